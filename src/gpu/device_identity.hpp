#pragma once
// The one owner of "the device as it is now". A Device, its copies, its VulkanBatchDevice (the
// executor's path), its graphs and its custom kernels all hold one DeviceIdentity and take the
// current GpuContext from it at the start of each operation; work in flight keeps the context it
// started on alive (a shared_ptr), so a re-created device never frees what old work still uses.
// What outlives a re-creation lives here rather than in the context: the options the device was
// opened with, the counters, the registered custom kernels (their SPIR-V: pipelines are rebuilt
// on the new device on first use) and the DeviceInfo references handed out.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "gpu/context.hpp"
#include "gpu/custom_kernels.hpp"

namespace gpubatch::detail {

class DeviceIdentity {
 public:
  // Opens the device (GpuContext::create).
  explicit DeviceIdentity(DeviceOptions options);
  DeviceIdentity(const DeviceIdentity&) = delete;
  DeviceIdentity& operator=(const DeviceIdentity&) = delete;

  // The context new work runs on.
  std::shared_ptr<GpuContext> context() const;
  // Bumped by each re-creation: a cheap "has the context changed" for hot paths.
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // How many times recover() re-created the device.
  std::uint64_t recreations() const { return generation() - 1; }

  // Checks whether the device `seen` (a context an operation ran on) is lost
  // (vkGetSemaphoreCounterValue says VK_ERROR_DEVICE_LOST; Fault::device_lost_check makes it say
  // so) and if so opens a new one with the same options. Serialised; when `seen` is no longer
  // current another caller has re-created it already and nothing is done. Returns true when the
  // current context differs from `seen` afterwards. Throws what GpuContext::create throws.
  bool recover(const std::shared_ptr<GpuContext>& seen);

  // The current device's description. The reference stays valid for the identity's lifetime
  // (every DeviceInfo handed out is kept).
  const DeviceInfo& info() const;
  AtomicCounters& counters() { return *counters_; }
  gpu::CustomKernelRegistry& custom_kernels() { return custom_kernels_; }
  const DeviceOptions& options() const { return options_; }

 private:
  const DeviceOptions options_;
  const std::shared_ptr<AtomicCounters> counters_ = std::make_shared<AtomicCounters>();
  gpu::CustomKernelRegistry custom_kernels_;
  mutable std::mutex mutex_;  // guards context_ and infos_
  std::shared_ptr<GpuContext> context_;
  std::deque<DeviceInfo> infos_;  // one per context opened; the last is current
  std::atomic<std::uint64_t> generation_{1};
  std::mutex recover_mutex_;  // one recovery at a time
};

}  // namespace gpubatch::detail
