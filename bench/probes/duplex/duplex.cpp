// duplex probe: the bus both ways at once, by copy engines on several queue arrangements and by
// kernels that read and write host memory. See README.md beside this file.
#include <vulkan/vulkan.h>
#include "probe_vk.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include "relu_spv.h"
#include "relu4_spv.h"
using clk = std::chrono::steady_clock;

static const VkDeviceSize SIZE = VkDeviceSize(std::getenv("DUPLEX_MIB") ? std::atoi(std::getenv("DUPLEX_MIB")) : 64) << 20;
static const int REP = 8;

struct Buf { VkBuffer b = VK_NULL_HANDLE; VkDeviceMemory m = VK_NULL_HANDLE; void* p = nullptr; };
struct Q { uint32_t family; uint32_t index; VkQueue q; VkCommandPool pool; VkCommandBuffer cmd; VkFence fence; };

static VkDevice dev;
static VkPhysicalDeviceMemoryProperties mp;

static Buf make_buf(VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer, VkMemoryPropertyFlags avoid, VkDeviceSize size = SIZE) {
  Buf b{};
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;  // ownership is not kept across queues: timing only
  CK(vkCreateBuffer(dev, &bci, nullptr, &b.b));
  VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, b.b, &r);
  int t = -1;
  for (int pass = 0; pass < 4 && t < 0; ++pass)  // `prefer` and `avoid` give way in that order
    for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
      const auto f = mp.memoryTypes[i].propertyFlags;
      const auto w = pass % 2 == 0 ? (want | prefer) : want;
      if ((r.memoryTypeBits & (1u << i)) && (f & w) == w && (pass >= 2 || !(f & avoid))) { t = int(i); break; }
    }
  if (t < 0) { std::fprintf(stderr, "no memory type\n"); std::exit(1); }
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO}; mai.allocationSize = r.size; mai.memoryTypeIndex = t;
  CK(vkAllocateMemory(dev, &mai, nullptr, &b.m));
  CK(vkBindBufferMemory(dev, b.b, b.m, 0));
  if (mp.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    CK(vkMapMemory(dev, b.m, 0, VK_WHOLE_SIZE, 0, &b.p));
    float* f = static_cast<float*>(b.p);
    for (size_t i = 0; i < size / 4; ++i) f[i] = (i % 7) - 3.0f;
  }
  std::printf("buffer: memory type %d flags 0x%x heap %u\n", t, mp.memoryTypes[t].propertyFlags, mp.memoryTypes[t].heapIndex);
  return b;
}

static void begin(Q& q) {
  CK(vkResetCommandPool(dev, q.pool, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT;  // run_each submits one buffer many times
  CK(vkBeginCommandBuffer(q.cmd, &bi));
}
static void copies(Q& q, const Buf& src, const Buf& dst, VkDeviceSize bytes, VkDeviceSize offset = 0) {
  begin(q);
  const VkBufferCopy region{offset, offset, bytes};
  for (int i = 0; i < REP; ++i) vkCmdCopyBuffer(q.cmd, src.b, dst.b, 1, &region);
  CK(vkEndCommandBuffer(q.cmd));
}

// Submits each queue's recorded buffer at once and waits for all: GB/s of `bytes` (one direction)
// over the time until all are done, best of 3 after a warm-up.
static double run(std::vector<Q*> qs, double bytes) {
  double best = 0;
  for (int trial = 0; trial < 4; ++trial) {
    for (Q* q : qs) CK(vkResetFences(dev, 1, &q->fence));
    const auto t0 = clk::now();
    for (Q* q : qs) {
      VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.commandBufferCount = 1; si.pCommandBuffers = &q->cmd;
      CK(vkQueueSubmit(q->q, 1, &si, q->fence));
    }
    for (Q* q : qs) CK(vkWaitForFences(dev, 1, &q->fence, VK_TRUE, UINT64_MAX));
    const double s = std::chrono::duration<double>(clk::now() - t0).count();
    if (trial > 0) best = std::max(best, bytes / s / 1e9);
  }
  return best;
}

// One submission per copy of `bytes`: the buffer (one dispatch or copy) submitted REP times in a row
// without waiting between, the last with the fence, as a library sending one request per batch does.
static double run_each(Q& q, double bytes) {
  double best = 0;
  for (int trial = 0; trial < 4; ++trial) {
    CK(vkResetFences(dev, 1, &q.fence));
    const auto t0 = clk::now();
    for (int i = 0; i < REP; ++i) {
      VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.commandBufferCount = 1; si.pCommandBuffers = &q.cmd;
      CK(vkQueueSubmit(q.q, 1, &si, i + 1 == REP ? q.fence : VK_NULL_HANDLE));
    }
    CK(vkWaitForFences(dev, 1, &q.fence, VK_TRUE, UINT64_MAX));
    const double s = std::chrono::duration<double>(clk::now() - t0).count();
    if (trial > 0) best = std::max(best, bytes * REP / s / 1e9);
  }
  return best;
}

// Bytes per submission against the GPU's cost of a submission: relu host->host over 8 regions of
// S bytes each, no region read twice (so the GPU's L2 holds none of the host's data), as one
// command buffer of 8 dispatches, 8 command buffers in one VkSubmitInfo, 8 VkSubmitInfos in one
// vkQueueSubmit, and 8 vkQueueSubmit calls.
static void submissions(VkPipelineLayout pl, VkPipeline pipe, VkDescriptorSetLayout dsl, VkDescriptorPool dp, int family) {
  const int K = 8;
  const VkDeviceSize total = VkDeviceSize(std::getenv("DUPLEX_SUB_MIB") ? std::atoi(std::getenv("DUPLEX_SUB_MIB")) : 512) << 20;
  const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  Buf in = make_buf(HV, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, total);
  Buf out = make_buf(HV, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, total);
  VkDescriptorSetAllocateInfo sai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO}; sai.descriptorPool = dp; sai.descriptorSetCount = 1; sai.pSetLayouts = &dsl;
  VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &sai, &ds));
  VkDescriptorBufferInfo bi[2] = {{in.b, 0, total}, {out.b, 0, total}};
  VkWriteDescriptorSet w[2]{};
  for (int i = 0; i < 2; ++i) { w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET; w[i].dstSet = ds; w[i].dstBinding = i; w[i].descriptorCount = 1; w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; w[i].pBufferInfo = &bi[i]; }
  vkUpdateDescriptorSets(dev, 2, w, 0, nullptr);
  VkQueue q; vkGetDeviceQueue(dev, family, 0, &q);
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO}; cpi.queueFamilyIndex = family;
  VkCommandPool pool; CK(vkCreateCommandPool(dev, &cpi, nullptr, &pool));
  VkCommandBuffer cmds[K + 1];
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO}; cai.commandPool = pool; cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY; cai.commandBufferCount = K + 1;
  CK(vkAllocateCommandBuffers(dev, &cai, cmds));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}; VkFence fence; CK(vkCreateFence(dev, &fci, nullptr, &fence));
  for (VkDeviceSize s = 4ull << 20; s * K <= total; s *= 4) {
    const uint32_t elems = uint32_t(s / 4);
    auto record = [&](VkCommandBuffer c, int first, int count) {
      VkCommandBufferBeginInfo b{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      CK(vkBeginCommandBuffer(c, &b));
      vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
      vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
      for (int i = first; i < first + count; ++i) {
        const uint32_t pc[2] = {elems, uint32_t(i) * elems};
        vkCmdPushConstants(c, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 8, pc);
        vkCmdDispatch(c, elems / 256, 1, 1);
      }
      CK(vkEndCommandBuffer(c));
    };
    CK(vkResetCommandPool(dev, pool, 0));
    record(cmds[K], 0, K);
    for (int i = 0; i < K; ++i) record(cmds[i], i, 1);
    for (int how = 0; how < 4; ++how) {
      double best = 0;
      for (int trial = 0; trial < 4; ++trial) {
        CK(vkResetFences(dev, 1, &fence));
        const auto t0 = clk::now();
        if (how == 0 || how == 1) {
          VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.commandBufferCount = how == 0 ? 1 : K; si.pCommandBuffers = how == 0 ? &cmds[K] : cmds;
          CK(vkQueueSubmit(q, 1, &si, fence));
        } else if (how == 2) {
          VkSubmitInfo si[K]{};
          for (int i = 0; i < K; ++i) { si[i].sType = VK_STRUCTURE_TYPE_SUBMIT_INFO; si[i].commandBufferCount = 1; si[i].pCommandBuffers = &cmds[i]; }
          CK(vkQueueSubmit(q, K, si, fence));
        } else {
          for (int i = 0; i < K; ++i) {
            VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.commandBufferCount = 1; si.pCommandBuffers = &cmds[i];
            CK(vkQueueSubmit(q, 1, &si, i + 1 == K ? fence : VK_NULL_HANDLE));
          }
        }
        CK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        const double sec = std::chrono::duration<double>(clk::now() - t0).count();
        if (trial > 0) best = std::max(best, double(s) * K / sec / 1e9);
      }
      static const char* names[4] = {"one command buffer of 8 dispatches", "8 command buffers, one VkSubmitInfo",
                                     "8 VkSubmitInfos, one vkQueueSubmit", "8 vkQueueSubmit calls"};
      std::printf("relu host->host, fresh regions of %4llu MiB, %-40s %7.2f GB/s\n", (unsigned long long)(s >> 20), names[how], best);
      std::fflush(stdout);
    }
  }
}

int main() {
  VkInstance inst = probe_instance();
  VkPhysicalDevice pd = probe_device(inst);
  VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);
  std::printf("USING %s driver %u\n", props.deviceName, props.driverVersion);
  uint32_t qn; vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qf(qn); vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qf.data());
  int C = -1, T = -1, O = -1;
  for (uint32_t i = 0; i < qn; ++i) {
    const auto f = qf[i].queueFlags;
    std::printf("family %u: flags 0x%x queues %u\n", i, f, qf[i].queueCount);
    if (C < 0 && (f & VK_QUEUE_COMPUTE_BIT)) C = int(i);
    else if (T < 0 && (f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))) T = int(i);
    else if (O < 0 && (f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))) O = int(i);
  }
  if (T < 0) T = C;
  const uint32_t nc = std::min(2u, qf[C].queueCount), nt = T == C ? 0 : std::min(2u, qf[T].queueCount);
  std::printf("compute family %d (%u queues), transfer family %d (%u), other transfer family %d\n", C, nc, T, nt, O);
  float prio[2] = {1.f, 1.f};
  std::vector<VkDeviceQueueCreateInfo> qcis;
  auto add = [&](int fam, uint32_t count) {
    if (fam < 0 || count == 0) return;
    VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}; q.queueFamilyIndex = fam; q.queueCount = count; q.pQueuePriorities = prio;
    qcis.push_back(q);
  };
  add(C, nc); add(T, nt); add(O, 1);
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO}; dci.queueCreateInfoCount = uint32_t(qcis.size()); dci.pQueueCreateInfos = qcis.data();
  CK(vkCreateDevice(pd, &dci, nullptr, &dev));
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  auto make_q = [&](int fam, uint32_t index) {
    Q q{uint32_t(fam), index};
    vkGetDeviceQueue(dev, fam, index, &q.q);
    VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO}; cpi.queueFamilyIndex = fam;
    CK(vkCreateCommandPool(dev, &cpi, nullptr, &q.pool));
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO}; cai.commandPool = q.pool; cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY; cai.commandBufferCount = 1;
    CK(vkAllocateCommandBuffers(dev, &cai, &q.cmd));
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}; CK(vkCreateFence(dev, &fci, nullptr, &q.fence));
    return q;
  };
  Q c0 = make_q(C, 0), c1 = make_q(C, nc > 1 ? 1 : 0);
  Q t0 = nt ? make_q(T, 0) : c0, t1 = nt > 1 ? make_q(T, 1) : t0;
  Q o0 = O >= 0 ? make_q(O, 0) : t1;
  const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  Buf h1 = make_buf(HV, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  Buf h2 = make_buf(HV, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  Buf d1 = make_buf(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  Buf d2 = make_buf(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  const double one = double(SIZE) * REP;
  auto line = [](const char* what, double gbps) { std::printf("%-72s %7.2f GB/s\n", what, gbps); std::fflush(stdout); };

  // Device buffers hold the host values first, so that what the kernels write back is checkable.
  copies(c0, h1, d2, SIZE); run({&c0}, one);
  copies(t0, h1, d1, SIZE); line("copy: upload alone, transfer queue 0", run({&t0}, one));
  copies(t0, d2, h2, SIZE); line("copy: download alone, transfer queue 0", run({&t0}, one));
  copies(c0, h1, d1, SIZE); line("copy: upload alone, compute queue", run({&c0}, one));
  copies(c0, d2, h2, SIZE); line("copy: download alone, compute queue", run({&c0}, one));
  if (nt) { copies(t0, h1, d1, SIZE); copies(c0, d2, h2, SIZE); line("copy both ways: up transfer 0, down compute 0 (the library's)", run({&t0, &c0}, one)); }
  if (nt > 1) { copies(t0, h1, d1, SIZE); copies(t1, d2, h2, SIZE); line("copy both ways: up transfer 0, down transfer 1", run({&t0, &t1}, one)); }
  if (O >= 0) { copies(t0, h1, d1, SIZE); copies(o0, d2, h2, SIZE); line("copy both ways: up transfer 0, down other transfer family", run({&t0, &o0}, one)); }
  if (nc > 1) { copies(c0, h1, d1, SIZE); copies(c1, d2, h2, SIZE); line("copy both ways: up compute 0, down compute 1", run({&c0, &c1}, one)); }
  if (nt > 1) { copies(t0, h1, d1, SIZE / 2); copies(t1, h1, d1, SIZE / 2, SIZE / 2); line("copy: upload split over transfer 0 and 1", run({&t0, &t1}, one)); }

  // Kernels: relu from binding 0 into binding 1 on the compute queue.
  VkDescriptorSetLayoutBinding bd[2]{};
  for (int i = 0; i < 2; ++i) { bd[i].binding = i; bd[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; bd[i].descriptorCount = 1; bd[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT; }
  VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO}; dli.bindingCount = 2; dli.pBindings = bd;
  VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dli, nullptr, &dsl));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 8};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO}; pli.setLayoutCount = 1; pli.pSetLayouts = &dsl; pli.pushConstantRangeCount = 1; pli.pPushConstantRanges = &pcr;
  VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, nullptr, &pl));
  auto pipe = [&](const uint32_t* code, size_t size) {
    return probe_pipeline(dev, pl, code, size); };
  VkPipeline relu1 = pipe(relu_spv, sizeof relu_spv), relu4 = pipe(relu4_spv, sizeof relu4_spv);
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 8};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO}; dpi.maxSets = 4; dpi.poolSizeCount = 1; dpi.pPoolSizes = &ps;
  VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpi, nullptr, &dp));
  auto set_of = [&](const Buf& in, const Buf& out) {
    VkDescriptorSetAllocateInfo sai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO}; sai.descriptorPool = dp; sai.descriptorSetCount = 1; sai.pSetLayouts = &dsl;
    VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &sai, &ds));
    VkDescriptorBufferInfo bi[2] = {{in.b, 0, SIZE}, {out.b, 0, SIZE}};
    VkWriteDescriptorSet w[2]{};
    for (int i = 0; i < 2; ++i) { w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET; w[i].dstSet = ds; w[i].dstBinding = i; w[i].descriptorCount = 1; w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; w[i].pBufferInfo = &bi[i]; }
    vkUpdateDescriptorSets(dev, 2, w, 0, nullptr);
    return ds; };
  VkDescriptorSet hh = set_of(h1, h2), hd = set_of(h1, d1), dh = set_of(d2, h2);
  // `groups` 0: one element per invocation; else a grid-stride loop over that many workgroups.
  auto kernels = [&](VkDescriptorSet ds, bool vec4, uint32_t groups, int reps = REP) {
    begin(c0);
    vkCmdBindPipeline(c0.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vec4 ? relu4 : relu1);
    vkCmdBindDescriptorSets(c0.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
    const uint32_t elems = uint32_t(SIZE / 4 / (vec4 ? 4 : 1));
    const uint32_t pc[2] = {elems, 0};
    vkCmdPushConstants(c0.cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 8, pc);
    for (int i = 0; i < reps; ++i) {
      vkCmdDispatch(c0.cmd, groups ? groups : elems / 256, 1, 1);
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER}; mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT; mb.dstAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      vkCmdPipelineBarrier(c0.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    }
    CK(vkEndCommandBuffer(c0.cmd));
  };
  kernels(hh, false, 0); line("kernel host->host, a float per invocation (the library's direct path)", run({&c0}, one));
  kernels(hh, false, 0, 1); line("kernel host->host, one submission per dispatch", run_each(c0, double(SIZE)));
  kernels(hh, true, 0); line("kernel host->host, four floats per invocation", run({&c0}, one));
  for (uint32_t g : {132u * 4, 132u * 16, 132u * 64}) {
    const std::string w = "kernel host->host, grid-stride over " + std::to_string(g) + " workgroups";
    kernels(hh, false, g); line(w.c_str(), run({&c0}, one));
  }
  kernels(hd, false, 0); line("kernel host->device (reads the bus only)", run({&c0}, one));
  kernels(dh, false, 0); line("kernel device->host (writes the bus only)", run({&c0}, one));
  if (nt) { kernels(dh, false, 0); copies(t0, h1, d1, SIZE); line("both ways: copy up on transfer 0, kernel device->host", run({&c0, &t0}, one)); }
  submissions(pl, relu1, dsl, dp, C);
  // Checked: h2 was last written by the device->host kernel from d2, a copy of h1.
  const float* x = static_cast<const float*>(h1.p); const float* y = static_cast<const float*>(h2.p);
  size_t bad = 0; for (size_t i = 0; i < SIZE / 4; i += 4099) bad += y[i] != std::max(x[i], 0.0f);
  std::printf("spot check: %zu bad of %zu\n", bad, size_t(SIZE / 4 / 4099 + 1));
  return 0;
}
