#include "gpu/submit_queue.hpp"

#include <algorithm>
#include <thread>

#include "gpu/context.hpp"
#include "gpu/fault_injection.hpp"
#include "gpu/vk_check.hpp"

namespace gpubatch::detail {

SubmitQueue::SubmitQueue(VkDevice device, VkQueue queue, AtomicCounters& counters, Carries carries,
                         WaitMode mode, SubmitQueue* sharer)
    : device_(device), queue_(queue), queue_lock_(sharer ? sharer->queue_lock_ : &own_lock_), carries_(carries),
      counters_(counters), wait_mode_(mode) {
  VkSemaphoreTypeCreateInfo type_info{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type_info.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo sem_info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &type_info};
  gpu::check_vk(vkCreateSemaphore(device_, &sem_info, nullptr, &timeline_), "vkCreateSemaphore");
}

SubmitQueue::~SubmitQueue() {
  if (timeline_) vkDestroySemaphore(device_, timeline_, nullptr);
}

std::uint64_t SubmitQueue::submit(VkCommandBuffer commands, VkSemaphore wait_semaphore, std::uint64_t wait_value) {
  std::lock_guard lock(*queue_lock_);
  const std::uint64_t value = last_signalled_ + 1;
  VkTimelineSemaphoreSubmitInfo timeline{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  timeline.signalSemaphoreValueCount = 1;
  timeline.pSignalSemaphoreValues = &value;
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO, &timeline};
  info.commandBufferCount = 1;
  info.pCommandBuffers = &commands;
  info.signalSemaphoreCount = 1;
  info.pSignalSemaphores = &timeline_;
  // The waited-for writes (the uploads') become visible to everything after the wait.
  const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  if (wait_value > 0) {
    timeline.waitSemaphoreValueCount = 1;
    timeline.pWaitSemaphoreValues = &wait_value;
    info.waitSemaphoreCount = 1;
    info.pWaitSemaphores = &wait_semaphore;
    info.pWaitDstStageMask = &wait_stage;
  }
  if (gpu::FaultInjector::fire(gpu::Fault::submit_device_lost))
    gpu::throw_vk(VK_ERROR_DEVICE_LOST, "vkQueueSubmit (injected)");
  const bool batches = carries_ == Carries::batches;
  gpu::check_vk(vkQueueSubmit(queue_, 1, &info, VK_NULL_HANDLE), batches ? "vkQueueSubmit" : "vkQueueSubmit (transfer)");
  last_signalled_ = value;
  // A hung batch: the work runs, but its completion is never reported to the waiter.
  if (batches && gpu::FaultInjector::fire(gpu::Fault::hang)) {
    std::lock_guard hung_lock(hung_mutex_);
    hung_.push_back(value);
  }
  (batches ? counters_.submissions : counters_.copy_submissions).fetch_add(1, std::memory_order_relaxed);
  return value;
}

namespace {
std::chrono::steady_clock::time_point deadline_after(std::chrono::nanoseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  if (timeout <= std::chrono::nanoseconds::zero()) return now;
  if (timeout >= std::chrono::steady_clock::time_point::max() - now) return std::chrono::steady_clock::time_point::max();
  return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
}
}  // namespace

bool SubmitQueue::wait(std::uint64_t value, std::chrono::nanoseconds timeout) {
  if (gpu::FaultInjector::fire(gpu::Fault::wait_device_lost))
    gpu::throw_vk(VK_ERROR_DEVICE_LOST, "vkWaitSemaphores (injected)");
  {
    std::lock_guard hung_lock(hung_mutex_);
    if (std::find(hung_.begin(), hung_.end(), value) != hung_.end()) {
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(timeout, std::chrono::seconds(1)));
      return false;
    }
  }
  const auto deadline = deadline_after(timeout);
  if (wait_mode_ == WaitMode::concurrent) {  // every waiter in the driver (the old behaviour)
    const VkResult r = driver_wait(value, deadline);
    if (r == VK_TIMEOUT) return false;
    gpu::check_vk(r, "vkWaitSemaphores");
    return true;
  }
  if (completed_.load(std::memory_order_acquire) >= value) return true;
  return wait_serial(value, deadline);
}

VkResult SubmitQueue::driver_wait(std::uint64_t value, std::chrono::steady_clock::time_point deadline) {
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  info.pSemaphores = &timeline_;
  info.pValues = &value;
  const auto left = deadline == std::chrono::steady_clock::time_point::max()
                        ? std::chrono::nanoseconds::max()
                        : std::max(std::chrono::nanoseconds::zero(),
                                   std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now()));
  return vkWaitSemaphores(device_, &info, static_cast<std::uint64_t>(left.count()));
}

bool SubmitQueue::reached(std::uint64_t value) {
  std::uint64_t now = 0;
  gpu::check_vk(vkGetSemaphoreCounterValue(device_, timeline_, &now), "vkGetSemaphoreCounterValue");
  note_completed(now);
  return now >= value;
}

void SubmitQueue::note_completed(std::uint64_t value) noexcept {
  std::uint64_t seen = completed_.load(std::memory_order_relaxed);
  while (seen < value &&
         !completed_.compare_exchange_weak(seen, value, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

// NVIDIA's driver (580.159, H200) loses wake-ups when several threads block in vkWaitSemaphores
// on one timeline at once: a waiter whose value was reached long before sleeps on for 10.06 ms
// (measured: the counter stood 100+ values past it). That was the ~10 ms p99 of 16 threads calling
// Device::run and of the executor whenever two batches were in flight (adaptive, short batches).
// So one thread at a time waits in the driver, for the lowest value any thread waits for (the
// queue completes in timeline order); the others sleep on wait_cv_ until it returns, having read
// the counter for them. A thread whose value is below the one being waited for in the driver (it
// arrived late; rare) polls the counter instead: its value is reached first.
bool SubmitQueue::wait_serial(std::uint64_t value, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(wait_mutex_);
  waiting_values_.push_back(value);
  struct Leave {
    SubmitQueue* self;
    std::uint64_t value;
    ~Leave() {  // under wait_mutex_
      auto& v = self->waiting_values_;
      v.erase(std::find(v.begin(), v.end(), value));
      // The new lowest may have to take the driver (when it is busy, its return wakes everyone).
      if (!v.empty() && !self->driver_waiting_) self->wait_cv_.notify_all();
    }
  } leave{this, value};
  for (;;) {
    if (completed_.load(std::memory_order_acquire) >= value) return true;
    if (std::chrono::steady_clock::now() >= deadline) return reached(value);
    const std::uint64_t lowest = *std::min_element(waiting_values_.begin(), waiting_values_.end());
    if (!driver_waiting_ && value == lowest) {
      driver_waiting_ = true;
      driver_target_ = value;
      const bool others = waiting_values_.size() > 1;
      lock.unlock();
      VkResult r = driver_wait(value, deadline);
      std::uint64_t now = 0;
      // Tell the others how far the timeline got (their values may have been reached too).
      if (r == VK_SUCCESS && others) vkGetSemaphoreCounterValue(device_, timeline_, &now);
      lock.lock();
      driver_waiting_ = false;
      if (r == VK_SUCCESS) note_completed(std::max(now, value));
      wait_cv_.notify_all();
      if (r == VK_TIMEOUT) continue;  // the deadline check above answers
      gpu::check_vk(r, "vkWaitSemaphores");
      return true;
    }
    if (driver_waiting_ && driver_target_ > value) {
      // Rare: the thread in the driver waits for a later value. Ours comes first; poll for it.
      lock.unlock();
      bool done = false;
      try {
        done = reached(value);
      } catch (...) {
        lock.lock();  // `leave` needs the lock
        throw;
      }
      if (!done) std::this_thread::sleep_for(std::chrono::microseconds(10));
      lock.lock();
      continue;
    }
    // A thread waits in the driver for a value at or below ours (or the lowest waiter is about to
    // take the driver): its return wakes us.
    if (deadline == std::chrono::steady_clock::time_point::max()) wait_cv_.wait(lock);
    else wait_cv_.wait_until(lock, deadline);
  }
}

std::uint64_t SubmitQueue::last_submitted() {
  std::lock_guard lock(*queue_lock_);
  return last_signalled_;
}

std::uint64_t SubmitQueue::completed_value() {
  std::uint64_t value = 0;
  gpu::check_vk(vkGetSemaphoreCounterValue(device_, timeline_, &value), "vkGetSemaphoreCounterValue");
  note_completed(value);
  return value;
}

}  // namespace gpubatch::detail
