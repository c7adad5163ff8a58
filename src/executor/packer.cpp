// The packer: a regular batch of many requests is laid out, copied into staging and submitted on
// a thread of its own, while the strand forms the next. Smaller batches (a lone caller's, a
// moderate load's) stay on the strand: a hand-off to another thread would cost them a wake-up.
// Batches reach the device in the order the strand formed them: while the packer holds any,
// every regular batch goes to it. Express batches never do: they are meant to overtake.
//
// Why, and where the line falls (DESIGN.md "Data flow"; BENCHMARKS.md eleventh session of
// 2026-11-28, H200, against GPUBATCH_PACKER=off): at saturation the strand packing batches of
// 4,096 requests was time it neither formed the next batch nor sent an express one; with the
// packer the open loop at 3 M/s was served at 2.94-2.99 M/s against 2.30-2.65. A line of 256
// requests cost the open loop at 1.5 M/s a p50 of 0.7-3.9 ms against 0.3-0.4 (batches grew while
// the packer packed); at 1,024 those batches stay here and nothing measured below saturation
// moved. GPUBATCH_PACKER=off keeps every batch on the strand, =levels only an executor's with
// priority levels; GPUBATCH_PACKER_MIN sets the line.
#include <pthread.h>

#include <span>
#include <utility>

#include "executor/executor_core.hpp"
#include "executor/executor_internal.hpp"
#include "executor/split_submit.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {

void ExecutorCore::submit_batch(Batch& b) {
  b.submitted = Clock::now();
  try {
    b.inflight = submit_splitting_on_oom(*device_, std::span<const Request* const>(b.requests), helpers_);
    if (!b.inflight) b.error = make_error(ErrorCode::internal, device_->name() + " returned no batch");
  } catch (...) {
    b.error = std::current_exception();
  }
  b.submit_returned = Clock::now();
}

bool ExecutorCore::pack_elsewhere(std::unique_ptr<Batch>& batch) {
  if (!packer_on_) return false;
  // A small batch while the packer holds none goes from here, without the lock (a lone caller's
  // every batch: the lock and unlock were 2 % of its call over the null device).
  if (batch->items.size() < packer_min_ && packer_pending_.load(std::memory_order_acquire) == 0) return false;
  {
    std::lock_guard lock(packer_mutex_);
    if (packer_stop_ || (packer_pending_.load(std::memory_order_relaxed) == 0 && batch->items.size() < packer_min_))
      return false;
    try {
      if (!packer_thread_.joinable()) {
        auto self = shared_from_this();
        packer_thread_ = std::thread([self] { self->packer_loop(); });
      }
      packer_queue_.push_back(std::move(batch));
    } catch (...) {
      // No thread or no memory: the batch is still ours (the deque's strong guarantee). Sent
      // from here it may pass one the packer holds; it still completes.
      return false;
    }
    packer_pending_.fetch_add(1, std::memory_order_relaxed);
  }
  packer_cv_.notify_one();
  packed_batches_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ExecutorCore::packer_loop() {
  exchange_thread_core(this);  // an executor thread: a handler here that shuts down does not wait for itself
  pthread_setname_np(pthread_self(), "gpubatch-pack");
  prepare_thread();
  std::unique_lock lock(packer_mutex_);
  for (;;) {
    if (!packer_queue_.empty()) {
      std::unique_ptr<Batch> b = std::move(packer_queue_.front());
      packer_queue_.pop_front();
      lock.unlock();
      submit_batch(*b);
      hand_to_completion(std::move(b));
      lock.lock();
      // After the hand-over: a batch the strand sends itself now comes after.
      packer_pending_.fetch_sub(1, std::memory_order_release);
      continue;
    }
    if (packer_stop_) return;
    packer_cv_.wait(lock);
  }
}

void ExecutorCore::stop_packer_locked() {
  {
    std::lock_guard lock(packer_mutex_);
    packer_stop_ = true;
  }
  packer_cv_.notify_all();
}

}  // namespace gpubatch::detail
