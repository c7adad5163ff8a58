#pragma once
// The Vulkan objects one opened device needs: instance (with the validation layer when asked),
// the chosen physical device, a logical device with its queues (batches, resident kernel,
// copies), the timeline semaphores their submissions signal, and the memory pool and kernels built
// on them.
#include <vulkan/vulkan.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "gpubatch/device.hpp"
#include "gpu/submit_queue.hpp"

namespace gpubatch::gpu {
class MemoryPool;
class Kernels;
}  // namespace gpubatch::gpu

namespace gpubatch::detail {

struct AtomicCounters {
  std::atomic<std::uint64_t> submissions{0}, dispatches{0}, uploads{0}, downloads{0},
      bytes_up{0}, bytes_down{0}, pipelines_created{0}, pipeline_cache_hits{0},
      copy_submissions{0}, batch_recordings{0}, early_results{0};
};

class GpuContext {
 public:
  // `counters`: where this context counts its work (a DeviceIdentity's, shared by the contexts
  // that replace one another on recovery); null: its own.
  static std::shared_ptr<GpuContext> create(const DeviceOptions& options,
                                            std::shared_ptr<AtomicCounters> counters = nullptr);
  static std::vector<DeviceInfo> enumerate();
  ~GpuContext();
  // Contexts alive in this process (each one a VkInstance and a VkDevice): a test's check that
  // closing a Device gives its device back.
  static std::size_t live() noexcept { return live_.load(std::memory_order_relaxed); }
  // VkInstances this process made: at most one per validation setting, whatever the number of
  // contexts (NVIDIA 580 allows a process about 29; see process_instance in context.cpp).
  static std::size_t instances_made() noexcept { return instances_made_.load(std::memory_order_relaxed); }
  static inline std::atomic<std::size_t> instances_made_{0};
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  std::uint32_t queue_family() const { return queue_family_; }
  // A second compute queue for the resident kernel (src/gpu/resident_ring.cpp), where the device
  // has one; VK_NULL_HANDLE otherwise. Only the resident ring submits to it.
  VkQueue resident_queue() const { return resident_queue_; }
  // The batches' queue itself: only for a context with a single user (the resident ring's own
  // device); everyone else submits through submit().
  VkQueue queue() const { return queue_; }
  std::uint32_t resident_family() const { return resident_family_; }
  // shaderDeviceClock and the Vulkan memory model at device scope are enabled (resident mode).
  bool device_clock() const { return device_clock_; }
  const DeviceInfo& info() const { return info_; }
  const VkPhysicalDeviceLimits& limits() const { return limits_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_props_; }
  std::uint64_t max_allocation_bytes() const { return max_allocation_; }
  bool creation_feedback() const { return creation_feedback_; }
  bool timestamps_supported() const { return timestamp_period_ns_ > 0; }
  double timestamp_period_ns() const { return timestamp_period_ns_; }
  // Device::import_host (VK_EXT_external_memory_host): the alignment in bytes that an imported
  // host pointer and its size need (minImportedHostPointerAlignment); 0 where the device cannot
  // import host memory into buffers of the memory pool's usage.
  std::size_t host_import_alignment() const { return host_import_alignment_; }
  // vkGetMemoryHostPointerPropertiesEXT, an extension command the loader does not export (fetched
  // from the device). Only where host_import_alignment() > 0.
  VkResult host_pointer_properties(const void* pointer, VkMemoryHostPointerPropertiesEXT* properties) const;

  gpu::MemoryPool& memory() { return *memory_; }
  gpu::Kernels& kernels() { return *kernels_; }
  AtomicCounters& counters() { return *counters_; }

  // Submits one command buffer on batches() that signals the next value of its timeline, and
  // returns that value. Thread-safe. wait_upload > 0: its shaders first wait for the upload
  // timeline to reach it.
  std::uint64_t submit(VkCommandBuffer commands, std::uint64_t wait_upload = 0);

  // Holds every queue's submission lock (batches, transfers, resident kernel): nothing is
  // submitted while it lives. Kernels builds pipelines under it (RELIABILITY.md "A copy-engine batch
  // that never completes").
  struct SubmissionPause {
    std::unique_lock<std::mutex> batches, transfers, resident;
  };
  SubmissionPause pause_submissions();
  // The lock a submission to resident_queue() holds (the resident ring's; on a context without a
  // resident queue, whose ring submits to queue(), the batch queue's own).
  std::unique_lock<std::mutex> lock_resident_submissions();

  // Copy-engine path (DESIGN.md "Large requests"). The transfer family is a transfer-only family
  // where the device has one (unless GPUBATCH_TRANSFER_QUEUE=off), else the compute family, whose
  // queue then carries the copies too.
  std::uint32_t transfer_family() const { return transfer_family_; }
  bool dedicated_transfer_queue() const { return transfer_queue_ != queue_; }
  // Submits copies on the transfer queue, signalling the next value of the upload timeline (a
  // semaphore of its own: only the GPU waits on it); returns that value. Thread-safe.
  std::uint64_t submit_upload(VkCommandBuffer commands);
  // Waits (at most `timeout`) for the upload timeline: failure paths, before staging is reused.
  void wait_upload(std::uint64_t value, std::chrono::nanoseconds timeout) noexcept;
  // batches()'s wait(), completed_value() and last_submitted().
  bool wait(std::uint64_t value, std::chrono::nanoseconds timeout) { return batches_->wait(value, timeout); }
  std::uint64_t completed_value() { return batches_->completed_value(); }
  std::uint64_t last_submitted() { return batches_->last_submitted(); }
  // The upload timeline's counter (0 where unreadable) and the last value submitted to it
  // (diagnostics).
  std::uint64_t upload_counter();
  std::uint64_t last_upload_submitted() { return transfers_->last_submitted(); }

 private:
  GpuContext();
  static inline std::atomic<std::size_t> live_{0};
  static std::uint32_t resident_queue_plan(GpuContext& ctx, VkDeviceQueueCreateInfo* infos,
                                           const float* priorities);
  // create()'s steps (context.cpp).
  struct DeviceFeatures {
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceShaderClockFeaturesKHR clock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
    std::vector<const char*> extensions;
  };
  void adopt(VkPhysicalDevice physical, const DeviceInfo& info, std::uint32_t family);
  std::uint32_t queue_plan(VkDeviceQueueCreateInfo* infos, const float* priorities);
  void enable_features(DeviceFeatures& f);
  void open_device();
  void open_submit_queues();

  VkInstance instance_ = VK_NULL_HANDLE;  // the process's for this validation setting
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::uint32_t queue_family_ = 0;
  VkQueue resident_queue_ = VK_NULL_HANDLE;
  std::uint32_t resident_family_ = 0;
  bool device_clock_ = false;
  VkQueue transfer_queue_ = VK_NULL_HANDLE;  // == queue_ without a transfer family
  std::uint32_t transfer_family_ = 0;
  std::mutex resident_mutex_;  // submissions to resident_queue_
  std::unique_ptr<SubmitQueue> batches_;
  std::unique_ptr<SubmitQueue> transfers_;  // on transfer_queue_: a share of batches_ where that is queue_
  DeviceInfo info_;
  VkPhysicalDeviceLimits limits_{};
  VkPhysicalDeviceMemoryProperties memory_props_{};
  std::uint64_t max_allocation_ = 0;
  double timestamp_period_ns_ = 0;
  bool creation_feedback_ = false;
  std::size_t host_import_alignment_ = 0;
  PFN_vkGetMemoryHostPointerPropertiesEXT host_pointer_properties_ = nullptr;
  std::shared_ptr<AtomicCounters> counters_;
  std::unique_ptr<gpu::MemoryPool> memory_;
  std::unique_ptr<gpu::Kernels> kernels_;
};

}  // namespace gpubatch::detail
