#pragma once
// One stream of submissions: a VkQueue, the timeline semaphore each of its submissions signals,
// and the host's waits on that timeline. A GpuContext's batches (the strand's, the lanes',
// graphs', Device::run's) go through one. A second one for the direct and bulk lanes, on a queue
// of their own, was tried and measured no better (BENCHMARKS.md, fifth session of 2026-11-27).
#include <vulkan/vulkan.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpubatch::detail {

struct AtomicCounters;

class SubmitQueue {
 public:
  // GPUBATCH_SEMAPHORE_WAIT=concurrent: every waiter calls vkWaitSemaphores itself (the old
  // behaviour, for comparison); the default is serial.
  enum class WaitMode { serial, concurrent };

  // Creates the timeline semaphore; the VkDevice must outlive this object.
  SubmitQueue(VkDevice device, VkQueue queue, AtomicCounters& counters, WaitMode mode);
  ~SubmitQueue();
  SubmitQueue(const SubmitQueue&) = delete;
  SubmitQueue& operator=(const SubmitQueue&) = delete;

  VkQueue queue() const { return queue_; }
  // The lock a submission to queue() holds (a VkQueue is externally synchronised); where the
  // device has no transfer family, the copies take it too.
  std::mutex& queue_lock() { return queue_lock_; }

  // Submits one command buffer that signals the next value of this timeline; returns that value.
  // Thread-safe. `wait_value` > 0: its work first waits for `wait_semaphore` (a timeline) to
  // reach it.
  std::uint64_t submit(VkCommandBuffer commands, VkSemaphore wait_semaphore = VK_NULL_HANDLE,
                       std::uint64_t wait_value = 0);
  // Waits until the timeline reaches `value`; false on timeout. Throws Error(device_lost).
  // At most one thread at a time blocks in vkWaitSemaphores (for the lowest value waited for);
  // the others wait for it to return (wait_serial()).
  bool wait(std::uint64_t value, std::chrono::nanoseconds timeout);
  std::uint64_t completed_value();
  std::uint64_t last_submitted();

 private:
  bool wait_serial(std::uint64_t value, std::chrono::steady_clock::time_point deadline);
  VkResult driver_wait(std::uint64_t value, std::chrono::steady_clock::time_point deadline);
  bool reached(std::uint64_t value);  // one vkGetSemaphoreCounterValue
  void note_completed(std::uint64_t value) noexcept;

  VkDevice device_;
  VkQueue queue_;
  std::mutex queue_lock_;
  AtomicCounters& counters_;
  const WaitMode wait_mode_;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  std::uint64_t last_signalled_ = 0;  // guarded by queue_lock_
  // Host waits (wait()). completed_ only grows: the timeline has reached at least this.
  std::atomic<std::uint64_t> completed_{0};
  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;
  bool driver_waiting_ = false;                // guarded by wait_mutex_
  std::uint64_t driver_target_ = 0;            // guarded: the value that thread waits for
  std::vector<std::uint64_t> waiting_values_;  // guarded: one entry per thread in wait_serial()
  std::mutex hung_mutex_;
  std::vector<std::uint64_t> hung_;  // timeline values whose completion is hidden (fault injection)
};

}  // namespace gpubatch::detail
