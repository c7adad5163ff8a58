// Armed-submission probe: can a lone request skip vkQueueSubmit on its path without a resident
// kernel? The dispatch is submitted ahead of the request, waiting on a timeline semaphore (`gate`)
// that the host signals (vkSignalSemaphore) once the request's input is written; the host then
// spins for the result. Re-arming (the next submit) happens after the result, off the timed path.
//   E  pre-recorded relu + submit + spin vkGetSemaphoreCounterValue (the floor the library is held to)
//   A  armed: fill, vkSignalSemaphore(gate, v), spin on the done counter
//   AW armed, and the kernel writes a done word after its results: spin on the word
// relu on 256 floats, data in host-coherent system memory (the word: host-cached), every result
// checked, 100 us of idle between requests (a lone caller's think time) in every mode.
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
static void idle(double u) { auto until = clk::now() + std::chrono::nanoseconds(static_cast<long>(u * 1000)); while (clk::now() < until) {} }
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
    Buf b{}; VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO}; bci.size = bytes; bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    CK(vkCreateBuffer(dev, &bci, nullptr, &b.b)); VkMemoryRequirements r; vkGetBufferMemoryRequirements(dev, b.b, &r);
    int t = -1; for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) if ((r.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want && !(mp.memoryTypes[i].propertyFlags & avoid)) { t = int(i); break; }
    if (t < 0) for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) if ((r.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) { t = int(i); break; }  // lavapipe: all device-local
    if (t < 0) { std::printf("  no memory type want=%x\n", want); std::exit(1); }
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO}; mai.allocationSize = r.size; mai.memoryTypeIndex = t;
    CK(vkAllocateMemory(dev, &mai, nullptr, &b.m)); CK(vkBindBufferMemory(dev, b.b, b.m, 0)); CK(vkMapMemory(dev, b.m, 0, VK_WHOLE_SIZE, 0, &b.p));
    std::memset(b.p, 0, bytes); return b; };
  const VkMemoryPropertyFlags HC = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags CACHED = HC | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
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
  Buf in = mk(N * 4, HC, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT), out = mk(N * 4, HC, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT),
      ctl = mk(256, CACHED, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  float* x = (float*)in.p; float* y = (float*)out.p; volatile uint32_t* c = (volatile uint32_t*)ctl.p;
  VkDescriptorBufferInfo bi[3]{{in.b, 0, VK_WHOLE_SIZE}, {out.b, 0, VK_WHOLE_SIZE}, {ctl.b, 0, VK_WHOLE_SIZE}};
  VkWriteDescriptorSet w[3]{}; for (int i = 0; i < 3; ++i) { w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET; w[i].dstSet = ds; w[i].dstBinding = i; w[i].descriptorCount = 1; w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; w[i].pBufferInfo = &bi[i]; }
  vkUpdateDescriptorSets(dev, 3, w, 0, nullptr);
  auto fill = [&](int k) { for (int i = 0; i < N; ++i) x[i] = float((i * 7 + k) % 19) - 9.f; };
  auto bad = [&](int k) { for (int i = 0; i < N; ++i) if (y[i] != std::max(float((i * 7 + k) % 19) - 9.f, 0.f)) return true; return false; };
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO}; cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT; cpi.queueFamilyIndex = fam;
  VkCommandPool pool; CK(vkCreateCommandPool(dev, &cpi, nullptr, &pool));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO}; cai.commandPool = pool; cai.commandBufferCount = 1;
  VkCommandBuffer cb[2]; CK(vkAllocateCommandBuffers(dev, &cai, &cb[0])); CK(vkAllocateCommandBuffers(dev, &cai, &cb[1]));
  uint32_t nn = N;
  for (int i = 0; i < 2; ++i) {
    VkCommandBufferBeginInfo b{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}; b.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT; CK(vkBeginCommandBuffer(cb[i], &b));
    vkCmdBindPipeline(cb[i], VK_PIPELINE_BIND_POINT_COMPUTE, i ? relud : relu); vkCmdBindDescriptorSets(cb[i], VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
    vkCmdPushConstants(cb[i], pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &nn); vkCmdDispatch(cb[i], 1, 1, 1); CK(vkEndCommandBuffer(cb[i]));
  }
  VkSemaphoreTypeCreateInfo sti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO}; sti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO}; sci.pNext = &sti;
  VkSemaphore done, gate; CK(vkCreateSemaphore(dev, &sci, nullptr, &done)); CK(vkCreateSemaphore(dev, &sci, nullptr, &gate));
  uint64_t dv = 0;  // done's value
  uint64_t gv = 0;  // gate's value: rises across modes and rounds (a timeline never goes back)
  // One submission of cb[which]: waits for gate >= `wait` (0: no wait), signals done = ++dv.
  auto submit = [&](int which, uint64_t wait) {
    const uint64_t sig = ++dv;
    VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    ts.signalSemaphoreValueCount = 1; ts.pSignalSemaphoreValues = &sig;
    ts.waitSemaphoreValueCount = wait ? 1 : 0; ts.pWaitSemaphoreValues = &wait;
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.pNext = &ts; si.commandBufferCount = 1; si.pCommandBuffers = &cb[which];
    si.signalSemaphoreCount = 1; si.pSignalSemaphores = &done;
    si.waitSemaphoreCount = wait ? 1 : 0; si.pWaitSemaphores = &gate; si.pWaitDstStageMask = &stage;
    CK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
    return sig; };
  auto spin_done = [&](uint64_t v) { uint64_t cv = 0; do { CK(vkGetSemaphoreCounterValue(dev, done, &cv)); } while (cv < v); };
  for (int round = 0; round < 2; ++round) {
    {  // E
      std::vector<double> t; int wrong = 0;
      for (int k = 0; k < REPS; ++k) {
        fill(k); std::memset(y, 0xff, N * 4); idle(100);
        auto a = clk::now(); const uint64_t v = submit(0, 0); spin_done(v); t.push_back(us(a, clk::now()));
        if (bad(k)) wrong++;
      }
      stats("E submit + spin on the counter", t); std::printf("     wrong %d of %d\n", wrong, REPS);
    }
    for (int which = 0; which < 2; ++which) {  // A, AW
      std::vector<double> t, sig; int wrong = 0;
      uint64_t armed = submit(which, ++gv);  // done value of the armed submission; it waits for gate >= gv
      for (int k = 0; k < REPS; ++k) {
        fill(k); std::memset(y, 0xff, N * 4); c[32] = 0; idle(100);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        auto a = clk::now();
        VkSemaphoreSignalInfo s{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO}; s.semaphore = gate; s.value = gv;
        CK(vkSignalSemaphore(dev, &s));
        auto b = clk::now();
        if (which) { while (c[32] == 0) {} std::atomic_thread_fence(std::memory_order_acquire); }
        else spin_done(armed);
        t.push_back(us(a, clk::now())); sig.push_back(us(a, b));
        if (bad(k)) wrong++;
        spin_done(armed);                 // (AW) the counter too, before the next arming
        armed = submit(which, ++gv);      // re-arm, off the timed path
      }
      VkSemaphoreSignalInfo s{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO}; s.semaphore = gate; s.value = gv;
      CK(vkSignalSemaphore(dev, &s)); spin_done(armed);  // let the last armed one run
      stats(which ? "AW armed, signal + spin on the kernel's done word" : "A armed, signal + spin on the counter", t);
      stats("   (vkSignalSemaphore call alone)", sig);
      std::printf("     wrong %d of %d\n", wrong, REPS);
    }
  }
  CK(vkDeviceWaitIdle(dev));
  std::printf("DONE\n");
}
