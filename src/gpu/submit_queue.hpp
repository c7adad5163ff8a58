#pragma once
// One stream of submissions: a VkQueue (or a share of one), the timeline semaphore each of its
// submissions signals, and the host's waits on that timeline. A GpuContext has two: the batches'
// (the strand's, the lanes', graphs', Device::run's) and the copy engine's uploads (on the
// transfer family's queue, or a share of the batches' queue where the device has none). A third
// for the direct and bulk lanes, and one for express batches, each on a queue of its own, were
// tried and measured no better (BENCHMARKS.md, fifth session of 2026-11-27).
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

  // What its submissions carry: batches (counted in `submissions`; Fault::hang applies) or the
  // copy engine's copies (counted in `copy_submissions`).
  enum class Carries { batches, copies };

  // `sharer`: the SubmitQueue whose VkQueue this one shares (its submissions then hold the
  // sharer's lock: a VkQueue is externally synchronised), or null. Creates the timeline
  // semaphore; the VkDevice (and a sharer) must outlive this object.
  SubmitQueue(VkDevice device, VkQueue queue, AtomicCounters& counters, Carries carries, WaitMode mode,
              SubmitQueue* sharer = nullptr);
  ~SubmitQueue();
  SubmitQueue(const SubmitQueue&) = delete;
  SubmitQueue& operator=(const SubmitQueue&) = delete;

  // The lock a submission to queue() holds (its own, or its sharer's).
  std::mutex& queue_lock() { return *queue_lock_; }
  VkSemaphore timeline() const { return timeline_; }

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
  std::mutex own_lock_;
  std::mutex* queue_lock_;  // &own_lock_, or the sharer's
  const Carries carries_;
  AtomicCounters& counters_;
  const WaitMode wait_mode_;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  std::uint64_t last_signalled_ = 0;  // guarded by *queue_lock_
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
