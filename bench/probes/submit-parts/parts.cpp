// Submit-parts probe: where a lone request's time goes in a plain submit + spin, part by part, so
// that separate processes can be compared (gpubatch's lone future and Device::run are ~1 us slower
// in some processes than in others, in the device's submit call: BENCHMARKS.md, thirty-first
// session). Per request: write the 256-float input (t0 -> t1), vkQueueSubmit of a pre-recorded
// relu (t1 -> t2), spin on vkGetSemaphoreCounterValue until done (t2 -> t3); every result checked,
// 100 us of idle between requests. Two placements of the input: host-coherent system memory
// ("sys") and device-local host-visible memory ("bar", ReBAR: where gpubatch puts a small
// batch's inputs); the output is in system memory either way. PROBE_FAMILY=compute submits to a
// compute-only queue family instead of the first with compute. PROBE_BARRIER=1 records gpubatch's
// barrier after the dispatch (compute shader writes -> host reads); PROBE_DEP=1 runs a relu that
// first reads its input's offset from a control word in device-local memory (gpubatch's kernels
// read a segment record first); PROBE_TIMESTAMPS=1 also reports the GPU's own time of the
// dispatch (timestamps before and after it). Build and run: README.md.
#include <vulkan/vulkan.h>
#include "probe_vk.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "relu_spv.h"
#include "relu_dep_spv.h"
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
static double p50(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
static double p99(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() * 99 / 100]; }
static void idle(double u) { auto until = clk::now() + std::chrono::nanoseconds(static_cast<long>(u * 1000)); while (clk::now() < until) {} }
struct Buf { VkBuffer b; VkDeviceMemory m; void* p = nullptr; };
static const int N = 256, REPS = 5000;
// PROBE_CPU=1: the CPU's own speed beside the parts, every tenth request: a chain of 2,000
// dependent multiply-adds (the core's clock) and eight copies of 4 KiB between buffers in L1 (its
// loads and stores), in ns. The thirty-second session saw the submit call's slow state come with a
// slower memcpy; this says whether the core itself is slower then.
static double chain_ns() {
  volatile uint64_t seed = 1; uint64_t x = seed;
  const auto t0 = clk::now();
  for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  const auto t1 = clk::now();
  seed = x;
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}
static double copy_ns() {
  alignas(64) static char a[4096], b[4096];
  const auto t0 = clk::now();
  for (int i = 0; i < 8; ++i) { std::memcpy(i & 1 ? a : b, i & 1 ? b : a, sizeof a); asm volatile("" ::: "memory"); }
  const auto t1 = clk::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}
int main() {
  auto flag = [](const char* name) { const char* v = std::getenv(name); return v != nullptr && std::strcmp(v, "1") == 0; };
  // PROBE_SUBMIT2=1: vkQueueSubmit2 (Vulkan 1.3, synchronization2) in place of vkQueueSubmit.
  // PROBE_NOSIGNAL=1: the submission signals no semaphore; the spin waits for every result word
  // instead (the output starts as all-ones bits each request), and a vkQueueWaitIdle outside the
  // timed span keeps the command buffer's reuse legal. Both ask what the submit call's own
  // 2.1-3.9 us (thirty-second session) owes to its form and to the semaphore it signals.
  // PROBE_RESULTS=1: the semaphore is signalled as usual, but the spin first waits for every result
  // word (the span reported), then for the counter ("counter after results" in the summary).
  // PROBE_WAITIDLE=1: a vkQueueWaitIdle after each request outside the timed span, as
  // PROBE_NOSIGNAL does, with the semaphore signalled.
  const bool submit2 = flag("PROBE_SUBMIT2"), nosignal = flag("PROBE_NOSIGNAL");
  const bool on_results = nosignal || flag("PROBE_RESULTS"), wait_idle = nosignal || flag("PROBE_WAITIDLE");
  VkInstance inst = probe_instance(submit2 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2);
  VkPhysicalDevice pd = probe_device(inst);
  uint32_t qn; vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qf(qn); vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qf.data());
  // PROBE_FAMILY=compute: a family with compute and without graphics (the one gpubatch prefers);
  // otherwise the first family with compute (on NVIDIA the graphics + compute family).
  const char* want = std::getenv("PROBE_FAMILY");
  const bool compute_only = want != nullptr && std::strcmp(want, "compute") == 0;
  uint32_t fam = qn;
  for (uint32_t i = 0; i < qn && fam == qn; ++i)
    if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(compute_only && (qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))) fam = i;
  if (fam == qn) { std::printf("no such queue family\n"); return 1; }
  std::printf("family %u (%s)\n", fam, (qf[fam].queueFlags & VK_QUEUE_GRAPHICS_BIT) ? "graphics + compute" : "compute only");
  VkQueue q;
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES}; f13.synchronization2 = VK_TRUE;
  VkDevice dev = probe_open(pd, fam, &q, submit2 ? &f13 : nullptr);
  std::printf("submit %s, %s\n", submit2 ? "vkQueueSubmit2" : "vkQueueSubmit", nosignal ? "no semaphore (spin on the results)" : "timeline semaphore");
  VkPhysicalDeviceMemoryProperties mp; vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  auto mk = [&](size_t bytes, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) {
    Buf b{}; VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO}; bci.size = bytes; bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    CK(vkCreateBuffer(dev, &bci, nullptr, &b.b)); VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, b.b, &r);
    int t = -1; for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) if ((r.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want && !(mp.memoryTypes[i].propertyFlags & avoid)) { t = int(i); break; }
    if (t < 0) for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) if ((r.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) { t = int(i); break; }
    if (t < 0) { std::printf("no memory type want=%x\n", want); std::exit(1); }
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO}; mai.allocationSize = r.size; mai.memoryTypeIndex = t;
    CK(vkAllocateMemory(dev, &mai, nullptr, &b.m)); CK(vkBindBufferMemory(dev, b.b, b.m, 0)); CK(vkMapMemory(dev, b.m, 0, VK_WHOLE_SIZE, 0, &b.p));
    std::memset(b.p, 0, bytes); return b; };
  VkDescriptorSetLayoutBinding bd[3]{}; for (int i = 0; i < 3; ++i) { bd[i].binding = i; bd[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; bd[i].descriptorCount = 1; bd[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT; }
  VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO}; dli.bindingCount = 3; dli.pBindings = bd;
  VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dli, nullptr, &dsl));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO}; pli.setLayoutCount = 1; pli.pSetLayouts = &dsl; pli.pushConstantRangeCount = 1; pli.pPushConstantRanges = &pcr;
  VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, nullptr, &pl));
  const bool barrier = flag("PROBE_BARRIER"), dep = flag("PROBE_DEP"), stamps = flag("PROBE_TIMESTAMPS"), cpu_probe = flag("PROBE_CPU");
  std::printf("barrier %d, dependent read %d, timestamps %d\n", barrier, dep, stamps);
  VkPipeline relu = dep ? probe_pipeline(dev, pl, relu_dep_spv, sizeof relu_dep_spv) : probe_pipeline(dev, pl, relu_spv, sizeof relu_spv);
  VkQueryPoolCreateInfo qpi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO}; qpi.queryType = VK_QUERY_TYPE_TIMESTAMP; qpi.queryCount = 4;
  VkQueryPool qp; CK(vkCreateQueryPool(dev, &qpi, nullptr, &qp));
  VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 6};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO}; dpi.maxSets = 2; dpi.poolSizeCount = 1; dpi.pPoolSizes = &ps;
  VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpi, nullptr, &dp));
  Buf in[2] = {mk(N * 4, HV, DL), mk(N * 4, HV | DL, 0)}, out = mk(N * 4, HV, DL), ctl = mk(256, HV | DL, 0);
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO}; cpi.queueFamilyIndex = fam;
  VkCommandPool pool; CK(vkCreateCommandPool(dev, &cpi, nullptr, &pool));
  VkCommandBuffer cb[2]; uint32_t nn = N;
  for (int k = 0; k < 2; ++k) {
    VkDescriptorSetAllocateInfo sai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO}; sai.descriptorPool = dp; sai.descriptorSetCount = 1; sai.pSetLayouts = &dsl;
    VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &sai, &ds));
    VkDescriptorBufferInfo bi[3]{{in[k].b, 0, VK_WHOLE_SIZE}, {out.b, 0, VK_WHOLE_SIZE}, {ctl.b, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[3]{}; for (int i = 0; i < 3; ++i) { w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET; w[i].dstSet = ds; w[i].dstBinding = i; w[i].descriptorCount = 1; w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; w[i].pBufferInfo = &bi[i]; }
    vkUpdateDescriptorSets(dev, 3, w, 0, nullptr);
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO}; cai.commandPool = pool; cai.commandBufferCount = 1;
    CK(vkAllocateCommandBuffers(dev, &cai, &cb[k]));
    VkCommandBufferBeginInfo b{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}; CK(vkBeginCommandBuffer(cb[k], &b));
    vkCmdBindPipeline(cb[k], VK_PIPELINE_BIND_POINT_COMPUTE, relu); vkCmdBindDescriptorSets(cb[k], VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
    vkCmdPushConstants(cb[k], pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &nn);
    if (stamps) { vkCmdResetQueryPool(cb[k], qp, 2 * k, 2); vkCmdWriteTimestamp(cb[k], VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 2 * k); }
    vkCmdDispatch(cb[k], 1, 1, 1);
    if (barrier) {
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER}; mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT; mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
      vkCmdPipelineBarrier(cb[k], VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    }
    if (stamps) vkCmdWriteTimestamp(cb[k], VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 2 * k + 1);
    CK(vkEndCommandBuffer(cb[k]));
  }
  VkSemaphoreTypeCreateInfo sti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO}; sti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO}; sci.pNext = &sti;
  VkSemaphore done; CK(vkCreateSemaphore(dev, &sci, nullptr, &done));
  uint64_t dv = 0;
  std::vector<float> src(N);
  float* y = static_cast<float*>(out.p);
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 2; ++k) {
      std::vector<double> wr, sub, spin, all, gpu, chain, copy, after; int wrong = 0;
      for (int r = 0; r < REPS; ++r) {
        if (cpu_probe && r % 10 == 0) { chain.push_back(chain_ns()); copy.push_back(copy_ns()); }
        for (int i = 0; i < N; ++i) src[i] = float((i * 7 + r) % 19) - 9.f;
        std::memset(y, 0xff, N * 4); idle(100);
        const uint64_t sig = ++dv;
        VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO}; ts.signalSemaphoreValueCount = 1; ts.pSignalSemaphoreValues = &sig;
        VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.pNext = &ts; si.commandBufferCount = 1; si.pCommandBuffers = &cb[k];
        si.signalSemaphoreCount = nosignal ? 0 : 1; si.pSignalSemaphores = &done;
        VkSemaphoreSubmitInfo ss{VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO}; ss.semaphore = done; ss.value = sig; ss.stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
        VkCommandBufferSubmitInfo cs{VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO}; cs.commandBuffer = cb[k];
        VkSubmitInfo2 s2{VK_STRUCTURE_TYPE_SUBMIT_INFO_2}; s2.commandBufferInfoCount = 1; s2.pCommandBufferInfos = &cs;
        s2.signalSemaphoreInfoCount = nosignal ? 0 : 1; s2.pSignalSemaphoreInfos = &ss;
        if (nosignal) --dv;  // no value signalled
        const auto t0 = clk::now();
        std::memcpy(in[k].p, src.data(), N * 4);
        static_cast<volatile uint32_t*>(ctl.p)[0] = 0;  // the dependent read's offset (PROBE_DEP)
        const auto t1 = clk::now();
        if (submit2) CK(vkQueueSubmit2(q, 1, &s2, VK_NULL_HANDLE));
        else CK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
        const auto t2 = clk::now();
        if (on_results) {
          auto* words = static_cast<volatile uint32_t*>(out.p);
          for (int i = 0; i < N; ++i) while (words[i] == 0xffffffffu) {}
        } else {
          uint64_t cv = 0; do { CK(vkGetSemaphoreCounterValue(dev, done, &cv)); } while (cv < sig);
        }
        const auto t3 = clk::now();
        if (on_results && !nosignal) {
          uint64_t cv = 0; do { CK(vkGetSemaphoreCounterValue(dev, done, &cv)); } while (cv < sig);
          after.push_back(us(t3, clk::now()));
        }
        if (wait_idle) CK(vkQueueWaitIdle(q));
        if (stamps) {
          uint64_t t[2]; CK(vkGetQueryPoolResults(dev, qp, 2 * k, 2, sizeof t, t, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
          gpu.push_back(double(t[1] - t[0]) * props.limits.timestampPeriod / 1000.0);
        }
        wr.push_back(us(t0, t1)); sub.push_back(us(t1, t2)); spin.push_back(us(t2, t3)); all.push_back(us(t0, t3));
        for (int i = 0; i < N; ++i) if (y[i] != std::max(src[i], 0.f)) { wrong++; break; }
      }
      std::printf("%s round %d: write p50 %.2f  submit p50 %.2f p99 %.2f  spin p50 %.2f  total p50 %.2f p99 %.2f us  wrong %d of %d\n",
                  k ? "bar" : "sys", round + 1, p50(wr), p50(sub), p99(sub), p50(spin), p50(all), p99(all), wrong, REPS);
      if (!after.empty()) std::printf("    the counter after the results p50 %.2f us\n", p50(after));
      if (stamps) std::printf("    the GPU's own time of the dispatch p50 %.2f us\n", p50(gpu));
      if (cpu_probe) std::printf("    cpu: chain p50 %.0f ns  copy p50 %.0f ns\n", p50(chain), p50(copy));
    }
  }
  CK(vkDeviceWaitIdle(dev));
  return 0;
}
