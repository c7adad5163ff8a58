// A caller that waits completes its own lone batch. See executor_core.hpp and DESIGN.md "The lone
// caller".
//
// A caller of handle.run() that finds the strand idle submits its batch on its own thread
// (post_if_idle). Handing that batch to a completion thread then costs one OS wake-up of that
// thread (20-30 us on the H200, longer than the device's own ~10 us for a lone request) and one
// more of the caller when its result is set: the caller would wait for a thread that waits for
// the device. Instead the inline pass keeps a lone batch (at most kLoneBatch requests) for its
// caller, who right after its call waits for it itself, as a completion thread would (the same
// await_batch: polling for completion_spin, then a blocking wait under the watchdog) and resolves
// it (complete_chunk, with a stats slot of its own). The caller waits for its result anyway; now
// nobody else wakes. A std::future's caller on an idle executor (lone_future_pass) does the same
// with BatchConfig::lone_future_waits, but polls for completion_spin at most (then the batch goes
// to the completion threads): its future most often comes back ready, and it never sleeps in
// get() for a completion thread's wake-up (H100: 28-31 us p50 against 17-19 us for handle.run()).
#include <chrono>
#include <memory>
#include <mutex>
#include <utility>

#include "executor/executor_core.hpp"

namespace gpubatch::detail {

thread_local ExecutorCore* ExecutorCore::inline_pass_ = nullptr;
thread_local Batch* ExecutorCore::own_batch_ = nullptr;
thread_local bool ExecutorCore::future_pass_ = false;
thread_local bool ExecutorCore::own_future_ = false;

void ExecutorCore::hand_to_completion(std::unique_ptr<Batch> batch) {
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    // An express batch is awaited first (completion_loop): its requests must not wait for a full
    // batch's chunks to resolve. Behind the express batches already there: they were submitted
    // earlier, so the device finishes them first.
    if (batch->express) {
      auto at = inflight_queue_.begin();
      while (at != inflight_queue_.end() && (*at)->express) ++at;
      inflight_queue_.insert(at, std::move(batch));
    } else {
      inflight_queue_.push_back(std::move(batch));
    }
  }
  inflight_cv_.notify_one();
}

// Only in this executor's inline pass for a caller that waits (handle.run(), or a future's with
// lone_future_waits), once per pass, for a lone batch that was submitted.
bool ExecutorCore::keep_for_caller(const Batch& batch) const noexcept {
  // A future's caller still holding the future its last such call completed is sending a burst:
  // its calls must not wait one by one (include/gpubatch/detail/future_state.hpp).
  const bool waits = future_pass_ ? config_.lone_future_waits && last_waited_future_released() : caller_waits();
  return caller_awaits_ && inline_pass_ == this && own_batch_ == nullptr && waits &&
         batch.items.size() <= kLoneBatch && !batch.error && batch.inflight;
}

bool ExecutorCore::claim_caller_slot(std::size_t& index) noexcept {
  for (std::size_t i = 0; i < kCallerSlots; ++i) {
    if (!caller_slot_busy_[i].load(std::memory_order_relaxed) &&
        !caller_slot_busy_[i].exchange(true, std::memory_order_acquire)) {
      index = config_.completion_threads + i;
      return true;
    }
  }
  return false;
}

void ExecutorCore::release_caller_slot(std::size_t index) noexcept {
  caller_slot_busy_[index - config_.completion_threads].store(false, std::memory_order_release);
}

// A future's caller waits at most completion_spin (polling): a batch not finished by then goes to
// the completion threads, and the call returns its future unresolved, as without
// lone_future_waits. A lost device met here is met again by the completion thread. Finished:
// this thread's newest future is noted as the one its call completed (future_state.cpp).
bool ExecutorCore::future_caller_polls(InFlightBatch& inflight, Clock::time_point submitted,
                                       Clock::time_point* finished_at) noexcept {
  if (completion_spin_.count() <= 0) return false;
  const auto until = std::min(submitted + watchdog_, Clock::now() + std::chrono::duration_cast<Clock::duration>(completion_spin_));
  bool finished = false;
  try {
    finished = poll_until(inflight, until);
  } catch (...) {
  }
  if (!finished) return false;
  if (finished_at) *finished_at = Clock::now();
  note_waited_future();
  return true;
}

void ExecutorCore::complete_own_batch() noexcept {
  Batch* const b = own_batch_;
  if (b == nullptr || inline_pass_ != nullptr) return;  // none kept, or still inside the pass
  own_batch_ = nullptr;
  const bool future = own_future_;
  own_future_ = false;
  Clock::time_point finished_at{};  // a future's: when its caller saw the batch finished
  if (future && !future_caller_polls(*b->inflight, b->submitted, &finished_at)) {
    hand_to_completion(std::unique_ptr<Batch>(b));
    return;
  }
  std::size_t slot = 0;
  if (!claim_caller_slot(slot)) {  // four callers completing their own already: hand it over
    hand_to_completion(std::unique_ptr<Batch>(b));
    return;
  }
  // An executor thread for the completion: a handler that throws is caught and counted, and
  // what the batch's completion would post (a strand waiting for the slot) is posted.
  ExecutorCore* const previous = exchange_thread_core(this);
  // The caller waits for its result anyway, so it polls its batch for the configured spin even
  // on a device of host cores, which completion threads never poll (under load they would take
  // its cores), as Device::run does (lavapipe, relu on 256 floats: --sync p50 73 us blocking
  // against 42-44 us polling, Device::run 29-43 us).
  // The watchdog and a lost device as for any batch; a future's batch, seen finished, is not
  // polled again (three clock reads and a poll fewer between the device's answer and the result).
  await_batch(*b, slot, config_.completion_spin, finished_at);
  b->next_chunk = 1;
  if (b->chunks > 1) {
    {
      std::lock_guard<std::mutex> lock(inflight_mutex_);
      ready_.push_back(b);
    }
    inflight_cv_.notify_all();
  }
  caller_completions_.fetch_add(1, std::memory_order_relaxed);  // before anyone sees a result
  complete_chunk(*b, 0, slot);  // may return the batch to the pool: `b` is not used after this
  release_caller_slot(slot);
  exchange_thread_core(previous);
}

}  // namespace gpubatch::detail
