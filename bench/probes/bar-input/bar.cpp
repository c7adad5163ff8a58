// BAR-input probe: does putting a lone request's INPUT in device-local host-visible memory (ReBAR)
// shorten the round trip of a plain submit? The kernel's reads of system memory are reads across
// the bus; reads of BAR memory are local, and the host's writes to it are posted (write-combined).
//   E  pre-recorded relu + submit + spin vkGetSemaphoreCounterValue
//   H  the kernel writes a done word after its results (barrier, atomic store): spin on the word,
//      then on the counter
// Input: host-coherent system memory (what the library's staging uses today) or BAR; results and
// the done word in host-cached system memory. The timed span starts before the host copies the
// 1 KiB input into place (a library's caller pays that copy too) and ends when the result is seen.
// Build and run: README.md beside this file.
#include <vulkan/vulkan.h>
#include "probe_vk.hpp"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "relu_spv.h"
#include "relu_done_spv.h"
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
static void stats(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("  %-64s p50 %7.2f us  p90 %7.2f  p99 %7.2f  min %7.2f\n", what, v[v.size()/2], v[v.size()*9/10], v[v.size()*99/100], v[0]);
}
struct Buf { VkBuffer b; VkDeviceMemory m; void* p = nullptr; };
static const int N = 256, REPS = 5000;
int main() {
  VkInstance inst = probe_instance();
  VkPhysicalDevice pd = probe_device(inst);
  VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props);
  std::printf("USING %s driver %u\n", props.deviceName, props.driverVersion);
  uint32_t qn; vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qf(qn); vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qf.data());
  uint32_t fam = 0; for (uint32_t i = 0; i < qn; ++i) if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) { fam = i; break; }
  VkQueue q;
  VkDevice dev = probe_open(pd, fam, &q);
  VkPhysicalDeviceMemoryProperties mp; vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  auto mk = [&](size_t bytes, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) {
    Buf b{}; VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO}; bci.size = bytes; bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    CK(vkCreateBuffer(dev, &bci, nullptr, &b.b)); VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, b.b, &r);
    int t = -1; for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) if ((r.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want && !(mp.memoryTypes[i].propertyFlags & avoid)) { t = int(i); break; }
    if (t < 0) { std::printf("  no memory type want=%x avoid=%x\n", want, avoid); return b; }
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO}; mai.allocationSize = r.size; mai.memoryTypeIndex = t;
    CK(vkAllocateMemory(dev, &mai, nullptr, &b.m)); CK(vkBindBufferMemory(dev, b.b, b.m, 0)); CK(vkMapMemory(dev, b.m, 0, VK_WHOLE_SIZE, 0, &b.p));
    std::memset(b.p, 0, bytes); return b; };
  const VkMemoryPropertyFlags HC = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags CACHED = HC | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  const VkMemoryPropertyFlags BAR = HC | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  VkDescriptorSetLayoutBinding bd[3]{}; for (int i = 0; i < 3; ++i) { bd[i].binding = i; bd[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; bd[i].descriptorCount = 1; bd[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT; }
  VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO}; dli.bindingCount = 3; dli.pBindings = bd;
  VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dli, nullptr, &dsl));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO}; pli.setLayoutCount = 1; pli.pSetLayouts = &dsl; pli.pushConstantRangeCount = 1; pli.pPushConstantRanges = &pcr;
  VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, nullptr, &pl));
  auto mkPipe = [&](const uint32_t* code, size_t size) {
    return probe_pipeline(dev, pl, code, size); };
  VkPipeline relu = mkPipe(relu_spv, sizeof relu_spv), relud = mkPipe(relu_done_spv, sizeof relu_done_spv);
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO}; dpi.maxSets = 1; dpi.poolSizeCount = 1; dpi.pPoolSizes = &ps;
  VkDescriptorPool dp; CK(vkCreateDescriptorPool(dev, &dpi, nullptr, &dp));
  VkDescriptorSetAllocateInfo sai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO}; sai.descriptorPool = dp; sai.descriptorSetCount = 1; sai.pSetLayouts = &dsl;
  VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &sai, &ds));
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO}; cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT; cpi.queueFamilyIndex = fam;
  VkCommandPool pool; CK(vkCreateCommandPool(dev, &cpi, nullptr, &pool));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO}; cai.commandPool = pool; cai.commandBufferCount = 1;
  VkCommandBuffer cb; CK(vkAllocateCommandBuffers(dev, &cai, &cb));
  VkSemaphoreTypeCreateInfo sti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO}; sti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO}; sci.pNext = &sti; VkSemaphore tl; CK(vkCreateSemaphore(dev, &sci, nullptr, &tl));
  uint64_t tv = 0; uint32_t nn = N;
  auto submitTl = [&]() { ++tv; VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO}; ts.signalSemaphoreValueCount = 1; ts.pSignalSemaphoreValues = &tv;
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.pNext = &ts; si.commandBufferCount = 1; si.pCommandBuffers = &cb; si.signalSemaphoreCount = 1; si.pSignalSemaphores = &tl; CK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE)); };
  struct Mem { const char* name; VkMemoryPropertyFlags want, avoid; } mems[4] = {{"input sysmem coherent", HC, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT},
    {"input BAR", BAR, 0}, {"input sysmem coherent", HC, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT}, {"input BAR", BAR, 0}};
  for (auto& mem : mems) {
    Buf in = mk(N * 4, mem.want, mem.avoid), out = mk(N * 4, CACHED, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT), ctl = mk(256, CACHED, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (!in.p || !out.p || !ctl.p) continue;
    float* x = (float*)in.p; float* y = (float*)out.p; volatile uint32_t* c = (volatile uint32_t*)ctl.p;
    VkDescriptorBufferInfo bi[3]{{in.b, 0, VK_WHOLE_SIZE}, {out.b, 0, VK_WHOLE_SIZE}, {ctl.b, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[3]{}; for (int i = 0; i < 3; ++i) { w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET; w[i].dstSet = ds; w[i].dstBinding = i; w[i].descriptorCount = 1; w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; w[i].pBufferInfo = &bi[i]; }
    vkUpdateDescriptorSets(dev, 3, w, 0, nullptr);
    std::vector<float> src(N);
    auto fill = [&](int k) { for (int i = 0; i < N; ++i) src[i] = float((i * 7 + k) % 19) - 9.f; };
    auto bad = [&](int k) { for (int i = 0; i < N; ++i) if (y[i] != std::max(float((i * 7 + k) % 19) - 9.f, 0.f)) return true; return false; };
    for (int variant : {0, 2}) {
      CK(vkResetCommandBuffer(cb, 0));
      VkCommandBufferBeginInfo b{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}; b.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT; CK(vkBeginCommandBuffer(cb, &b));
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, variant == 2 ? relud : relu); vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
      vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &nn); vkCmdDispatch(cb, 1, 1, 1);
      if (variant == 1) {
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER}; mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT; mb.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
        vkCmdFillBuffer(cb, ctl.b, 128, 4, 1u);
      }
      CK(vkEndCommandBuffer(cb));
      std::vector<double> vw, vs; int wrong = 0, wrong_later = 0;
      for (int k = 0; k < REPS; ++k) {
        fill(k); std::memset(y, 0xff, N * 4); c[32] = 0; std::atomic_thread_fence(std::memory_order_seq_cst);
        auto a = clk::now(); std::memcpy(x, src.data(), N * 4); submitTl();
        uint64_t cv = 0;
        if (variant > 0) { while (c[32] == 0) {} std::atomic_thread_fence(std::memory_order_acquire); vw.push_back(us(a, clk::now()));
          if (bad(k)) wrong++; }
        do { CK(vkGetSemaphoreCounterValue(dev, tl, &cv)); } while (cv < tv);
        vs.push_back(us(a, clk::now()));
        if (bad(k)) wrong_later++;
      }
      char nm[160];
      const char* vn[3] = {"E spin on the timeline counter", "G fill after the dispatch", "H the kernel writes the word"};
      if (variant > 0) { std::snprintf(nm, sizeof nm, "%s, word seen (%s)", vn[variant], mem.name); stats(nm, vw); }
      std::snprintf(nm, sizeof nm, "%s, counter seen (%s)", vn[variant], mem.name); stats(nm, vs);
      std::printf("     wrong when the word was seen %d, when the counter was seen %d, of %d\n", wrong, wrong_later, REPS);
    }
  }
  std::printf("DONE\n");
}
