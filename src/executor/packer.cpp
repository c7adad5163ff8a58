// The packer: a batch of many requests is laid out, copied into staging and submitted on a
// thread of its own, while the strand forms the next. Small batches (a lone caller's) stay on the
// strand: a hand-off to another thread would cost them a wake-up. Batches reach the device in the
// order the strand formed them: while the packer holds any, every regular batch goes to it.
// Express batches never do: they are meant to overtake, and the packer is what lets them.
//
// Only on an executor with priority levels (GPUBATCH_PACKER=on: every executor; off: none).
// There, at saturation, an express batch waited for the strand to finish packing a regular batch
// of 4,096 requests (submit stage p50 473 us, p99 1.26 ms on the H200; its formation p99 2.3 ms;
// BENCHMARKS.md eleventh session of 2026-11-28). For one level the packer does not pay: tried as
// every executor's in the seventh session of 2026-11-27, the H100's crowd did not move (4.43 ·
// 3.89 · 4.14 · 3.99 M/s against 4.10 · 4.03 · 4.17 · 3.95) and the open loop at 1 M/s had p50
// 219-250 us against 199-203 (one hand-off more). GPUBATCH_PACKER_MIN sets the requests a batch
// needs (256).
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
  {
    std::lock_guard lock(packer_mutex_);
    if (packer_stop_ || (packer_pending_ == 0 && batch->items.size() < packer_min_)) return false;
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
    ++packer_pending_;
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
      --packer_pending_;  // after the hand-over: a batch the strand sends itself now comes after
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
