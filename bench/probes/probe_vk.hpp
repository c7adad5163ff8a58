#pragma once
// What every plain-Vulkan probe in this folder does the same way: fail loudly on a Vulkan error,
// open an instance (Vulkan 1.2), take the first discrete GPU (else the first device), open it with
// one queue of a family and timeline semaphores on, and make a compute pipeline from SPIR-V. Header-only; each probe builds with `-I..` (see its README).
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { VkResult r_ = (x); if (r_ != VK_SUCCESS) { std::fprintf(stderr, "%s -> %d (line %d)\n", #x, r_, __LINE__); std::exit(1);} } while (0)

inline VkInstance probe_instance(uint32_t api = VK_API_VERSION_1_2) {
  VkApplicationInfo ai{VK_STRUCTURE_TYPE_APPLICATION_INFO}; ai.apiVersion = api;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO}; ici.pApplicationInfo = &ai;
  VkInstance inst; CK(vkCreateInstance(&ici, nullptr, &inst));
  return inst;
}

inline VkPhysicalDevice probe_device(VkInstance inst) {
  uint32_t n = 0; vkEnumeratePhysicalDevices(inst, &n, nullptr);
  if (n == 0) { std::fprintf(stderr, "no Vulkan device\n"); std::exit(1); }
  std::vector<VkPhysicalDevice> pds(n); vkEnumeratePhysicalDevices(inst, &n, pds.data());
  for (auto d : pds) { VkPhysicalDeviceProperties p; vkGetPhysicalDeviceProperties(d, &p); if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) return d; }
  return pds[0];
}

// The device with one queue of family `fam` (into *queue) and timeline semaphores enabled; `more`
// chains further feature structures (a probe's option).
inline VkDevice probe_open(VkPhysicalDevice pd, uint32_t fam, VkQueue* queue, void* more = nullptr) {
  float prio = 1.f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}; qci.queueFamilyIndex = fam; qci.queueCount = 1; qci.pQueuePriorities = &prio;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES}; f12.timelineSemaphore = VK_TRUE; f12.pNext = more;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO}; dci.pNext = &f12; dci.queueCreateInfoCount = 1; dci.pQueueCreateInfos = &qci;
  VkDevice dev; CK(vkCreateDevice(pd, &dci, nullptr, &dev));
  vkGetDeviceQueue(dev, fam, 0, queue);
  return dev;
}

inline VkPipeline probe_pipeline(VkDevice dev, VkPipelineLayout layout, const uint32_t* code, size_t size) {
  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO}; smi.codeSize = size; smi.pCode = code;
  VkShaderModule sm; CK(vkCreateShaderModule(dev, &smi, nullptr, &sm));
  VkComputePipelineCreateInfo c{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO}; c.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  c.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT; c.stage.module = sm; c.stage.pName = "main"; c.layout = layout;
  VkPipeline p; CK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &c, nullptr, &p));
  return p;
}
