// ew-kernel probe: the library's relu kernel against plain ones, host memory to host memory. See
// README.md beside this file.
#include <vulkan/vulkan.h>
#include "probe_vk.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "lib_spv.h"
#include "bda_spv.h"
#include "desc_spv.h"
using clk = std::chrono::steady_clock;

struct Buf { VkBuffer b = VK_NULL_HANDLE; VkDeviceMemory m = VK_NULL_HANDLE; void* p = nullptr; VkDeviceAddress a = 0; };
struct Segment { uint32_t a[2], b[2], dst[2]; uint32_t start, len; float p0; uint32_t u0, u1, u2; };
static_assert(sizeof(Segment) == 48);
struct LibPC { uint32_t segments[2], blocks[2], scratch[2]; uint32_t block_count, grid_x, segment_count, scratch_count; float table[16]; };

static VkDevice dev;
static VkPhysicalDeviceMemoryProperties mp;

static Buf make_buf(VkDeviceSize size, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer, VkMemoryPropertyFlags avoid) {
  Buf b{};
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  CK(vkCreateBuffer(dev, &bci, nullptr, &b.b));
  VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, b.b, &r);
  int t = -1;
  for (int pass = 0; pass < 4 && t < 0; ++pass)
    for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
      const auto f = mp.memoryTypes[i].propertyFlags;
      const auto w = pass % 2 == 0 ? (want | prefer) : want;
      if ((r.memoryTypeBits & (1u << i)) && (f & w) == w && (pass >= 2 || !(f & avoid))) { t = int(i); break; }
    }
  if (t < 0) { std::fprintf(stderr, "no memory type\n"); std::exit(1); }
  VkMemoryAllocateFlagsInfo fi{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO}; fi.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO}; mai.pNext = &fi; mai.allocationSize = r.size; mai.memoryTypeIndex = t;
  CK(vkAllocateMemory(dev, &mai, nullptr, &b.m));
  CK(vkBindBufferMemory(dev, b.b, b.m, 0));
  CK(vkMapMemory(dev, b.m, 0, VK_WHOLE_SIZE, 0, &b.p));
  VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO}; ai.buffer = b.b;
  b.a = vkGetBufferDeviceAddress(dev, &ai);
  std::printf("buffer: %llu MiB, memory type %d flags 0x%x\n", (unsigned long long)(size >> 20), t, mp.memoryTypes[t].propertyFlags);
  return b;
}
static void split(VkDeviceAddress a, uint32_t out[2]) { out[0] = uint32_t(a); out[1] = uint32_t(a >> 32); }

int main() {
  VkInstance inst = probe_instance();
  VkPhysicalDevice pd = probe_device(inst);
  VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);
  std::printf("USING %s\n", props.deviceName);
  uint32_t qn; vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qf(qn); vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qf.data());
  uint32_t fam = 0; for (uint32_t i = 0; i < qn; ++i) if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) { fam = i; break; }
  float prio = 1.f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}; qci.queueFamilyIndex = fam; qci.queueCount = 1; qci.pQueuePriorities = &prio;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES}; f12.bufferDeviceAddress = VK_TRUE;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO}; dci.pNext = &f12; dci.queueCreateInfoCount = 1; dci.pQueueCreateInfos = &qci;
  CK(vkCreateDevice(pd, &dci, nullptr, &dev));
  VkQueue q; vkGetDeviceQueue(dev, fam, 0, &q);
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  const int K = 8;
  const VkDeviceSize maxS = VkDeviceSize(std::getenv("EWK_MIB") ? std::atoi(std::getenv("EWK_MIB")) : 16) << 20;
  const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  Buf in = make_buf(maxS * K, HV, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  Buf out = make_buf(maxS * K, HV, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  Buf tables = make_buf(4u << 20, HV | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  { float* f = static_cast<float*>(in.p); for (size_t i = 0; i < maxS * K / 4; ++i) f[i] = float(int(i % 7) - 3); }

  // Pipelines: the library's (push constants only), the plain BDA one, the descriptor one.
  VkDescriptorSetLayoutBinding bd[2]{};
  for (int i = 0; i < 2; ++i) { bd[i].binding = i; bd[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; bd[i].descriptorCount = 1; bd[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT; }
  VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO}; dli.bindingCount = 2; dli.pBindings = bd;
  VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dli, nullptr, &dsl));
  auto layout = [&](uint32_t pc_bytes, bool with_set) {
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes};
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO}; pli.setLayoutCount = with_set ? 1 : 0; pli.pSetLayouts = &dsl; pli.pushConstantRangeCount = 1; pli.pPushConstantRanges = &pcr;
    VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, nullptr, &pl)); return pl; };
  VkPipelineLayout lib_pl = layout(sizeof(LibPC), false), bda_pl = layout(20, false), desc_pl = layout(8, true);
  auto pipe = [&](const uint32_t* code, size_t size, VkPipelineLayout pl) {
    return probe_pipeline(dev, pl, code, size); };
  VkPipeline lib = pipe(lib_spv, sizeof lib_spv, lib_pl), bda = pipe(bda_spv, sizeof bda_spv, bda_pl), desc = pipe(desc_spv, sizeof desc_spv, desc_pl);
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO}; dpi.maxSets = 1; dpi.poolSizeCount = 1; dpi.pPoolSizes = &ps;
  VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpi, nullptr, &dp));
  VkDescriptorSetAllocateInfo sai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO}; sai.descriptorPool = dp; sai.descriptorSetCount = 1; sai.pSetLayouts = &dsl;
  VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &sai, &ds));
  VkDescriptorBufferInfo dbi[2] = {{in.b, 0, VK_WHOLE_SIZE}, {out.b, 0, VK_WHOLE_SIZE}};
  VkWriteDescriptorSet w[2]{};
  for (int i = 0; i < 2; ++i) { w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET; w[i].dstSet = ds; w[i].dstBinding = i; w[i].descriptorCount = 1; w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; w[i].pBufferInfo = &dbi[i]; }
  vkUpdateDescriptorSets(dev, 2, w, 0, nullptr);

  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO}; cpi.queueFamilyIndex = fam;
  VkCommandPool pool; CK(vkCreateCommandPool(dev, &cpi, nullptr, &pool));
  VkCommandBuffer cmds[K];
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO}; cai.commandPool = pool; cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY; cai.commandBufferCount = K;
  CK(vkAllocateCommandBuffers(dev, &cai, cmds));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}; VkFence fence; CK(vkCreateFence(dev, &fci, nullptr, &fence));
  const uint32_t maxX = props.limits.maxComputeWorkGroupCount[0];

  for (VkDeviceSize S = 4ull << 20; S <= maxS; S *= 4) {
    const uint32_t len = uint32_t(S / 4), blocks = len / 256;
    // Tables: 8 segments (one per region), then the block table of one dispatch over all eight.
    auto* seg = static_cast<Segment*>(tables.p);
    for (int i = 0; i < K; ++i) {
      seg[i] = Segment{};
      split(in.a + VkDeviceAddress(i) * S, seg[i].a);
      split(out.a + VkDeviceAddress(i) * S, seg[i].dst);
      seg[i].start = 0; seg[i].len = len;
    }
    Segment* seg8 = seg + K;  // the same regions as one dispatch's segments
    for (int i = 0; i < K; ++i) { seg8[i] = seg[i]; seg8[i].start = uint32_t(i) * len; }
    const VkDeviceSize block_off = 4096;
    auto* bt = reinterpret_cast<uint32_t*>(static_cast<char*>(tables.p) + block_off);
    for (uint32_t b = 0; b < blocks * K; ++b) bt[b] = b / blocks;
    auto lib_pc = [&](VkDeviceAddress segments, uint32_t segment_count, uint32_t block_count) {
      LibPC pc{};
      split(segments, pc.segments); split(tables.a + block_off, pc.blocks);
      pc.block_count = block_count; pc.grid_x = std::min(block_count, maxX); pc.segment_count = segment_count;
      return pc; };
    // how: 0 desc, 1 bda, 2 lib one segment a dispatch, 3 lib one dispatch of 8 segments.
    auto record = [&](int how, VkCommandBuffer c, int first, int count) {
      VkCommandBufferBeginInfo b{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      CK(vkBeginCommandBuffer(c, &b));
      if (how == 0) {
        vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, desc);
        vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, desc_pl, 0, 1, &ds, 0, nullptr);
        for (int i = first; i < first + count; ++i) { const uint32_t pc[2] = {len, uint32_t(i) * len}; vkCmdPushConstants(c, desc_pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 8, pc); vkCmdDispatch(c, blocks, 1, 1); }
      } else if (how == 1) {
        vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, bda);
        for (int i = first; i < first + count; ++i) {
          uint32_t pc[5]; split(in.a + VkDeviceAddress(i) * S, pc); split(out.a + VkDeviceAddress(i) * S, pc + 2); pc[4] = len;
          vkCmdPushConstants(c, bda_pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 20, pc); vkCmdDispatch(c, blocks, 1, 1);
        }
      } else if (how == 2) {
        vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, lib);
        for (int i = first; i < first + count; ++i) {
          const LibPC pc = lib_pc(tables.a + VkDeviceAddress(i) * sizeof(Segment), 1, blocks);
          vkCmdPushConstants(c, lib_pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
          vkCmdDispatch(c, pc.grid_x, (blocks + pc.grid_x - 1) / pc.grid_x, 1);
        }
      } else {
        vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, lib);
        const LibPC pc = lib_pc(tables.a + K * sizeof(Segment), K, blocks * K);
        vkCmdPushConstants(c, lib_pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
        vkCmdDispatch(c, pc.grid_x, (blocks * K + pc.grid_x - 1) / pc.grid_x, 1);
      }
      CK(vkEndCommandBuffer(c));
    };
    // each: one submission per dispatch (cmds[0..7]) instead of one command buffer of eight.
    auto time = [&](int how, bool each) {
      CK(vkResetCommandPool(dev, pool, 0));
      if (each) for (int i = 0; i < K; ++i) record(how, cmds[i], i, 1);
      else record(how, cmds[0], 0, K);
      double best = 0;
      for (int trial = 0; trial < 4; ++trial) {
        std::memset(out.p, 0xff, S * K);  // no result of a previous trial can pass the check
        CK(vkResetFences(dev, 1, &fence));
        const auto t0 = clk::now();
        for (int i = 0; i < (each ? K : 1); ++i) {
          VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.commandBufferCount = 1; si.pCommandBuffers = &cmds[i];
          CK(vkQueueSubmit(q, 1, &si, i + 1 == (each ? K : 1) ? fence : VK_NULL_HANDLE));
        }
        CK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
        const double s = std::chrono::duration<double>(clk::now() - t0).count();
        if (trial > 0) best = std::max(best, double(S) * K / s / 1e9);
      }
      const float* x = static_cast<const float*>(in.p); const float* y = static_cast<const float*>(out.p);
      size_t bad = 0; for (size_t i = 0; i < S * K / 4; i += 997) bad += y[i] != std::max(x[i], 0.0f);
      return std::make_pair(best, bad);
    };
    static const char* names[4] = {"descriptor kernel", "buffer-address kernel, no tables", "library kernel, a segment a dispatch", "library kernel, 8 segments in one dispatch"};
    for (int how = 0; how < 4; ++how)
      for (bool each : {false, true}) {
        if (how == 3 && each) continue;
        const auto [gbps, bad] = time(how, each);
        std::printf("%4llu MiB x 8: %-46s %-26s %7.2f GB/s each way%s\n", (unsigned long long)(S >> 20), names[how],
                    how == 3 ? "one submission" : each ? "a submission a dispatch" : "one command buffer", gbps, bad ? "  WRONG RESULTS" : "");
        std::fflush(stdout);
      }
  }
  return 0;
}
