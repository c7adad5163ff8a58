// The completion threads: wait for submitted batches, take their results in chunks and resolve
// the futures and handlers. See executor_core.hpp.
#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include "log.hpp"

#include "executor/executor_core.hpp"
#include "executor/executor_internal.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {

// A request whose result is as large as its first input gets that input's buffer for the result
// (the device has read the input by now): one allocation and one free fewer per request, and a
// large result is copied into memory that is already the process's (no page faults).
void reuse_input_buffer(Request& request, Result& result) noexcept {
  if (request.op == Op::interpolate) {
    if (result.states.capacity() == 0 && request.states_a.size() == output_bytes(request))
      result.states = std::move(request.states_a);
  } else if (result.values.capacity() == 0 && request.a.size() * sizeof(float) == output_bytes(request)) {
    result.values = std::move(request.a);
  }
}


std::unique_ptr<Batch> ExecutorCore::take_batch_from_pool() {
  if (Batch* hot = pool_hot_.exchange(nullptr, std::memory_order_acquire)) return std::unique_ptr<Batch>(hot);
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      auto b = std::move(pool_.back());
      pool_.pop_back();
      return b;
    }
  }
  return std::make_unique<Batch>();
}

void ExecutorCore::return_batch_to_pool(std::unique_ptr<Batch> batch) {
  batch->items.clear();
  batch->requests.clear();
  batch->inflight.reset();
  batch->error = nullptr;
  batch->express = false;
  Batch* empty = nullptr;
  if (pool_hot_.compare_exchange_strong(empty, batch.get(), std::memory_order_release, std::memory_order_relaxed)) {
    batch.release();  // owned by pool_hot_ now
    return;
  }
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (pool_.size() < 2 * saturated_inflight_ + 2) pool_.push_back(std::move(batch));
}

// Owners: the strand (a batch's copies into staging) and any thread taking a batch's results (a
// large result's copy out of readback: a completion thread, or a caller completing its own batch).
// One job is published at a time; an owner that finds another's job there runs its parts alone.
// The owner runs parts itself too, so it never waits for a part nobody has claimed: a completion
// thread that is waiting for the device, or busy with a batch, simply does not help.
void ExecutorCore::run_parallel(std::size_t parts, const std::function<void(std::size_t)>& work) {
  ParallelJob job;
  job.work = &work;
  job.parts = parts;
  job.left.store(parts, std::memory_order_relaxed);
  bool published = false;
  if (parts > 1 && config_.completion_threads != 0) {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    if (parallel_job_ == nullptr) parallel_job_ = &job, published = true;
  }
  if (!published) {
    for (std::size_t i = 0; i < parts; ++i) work(i);
    return;
  }
  inflight_cv_.notify_all();
  for (;;) {
    std::size_t part;
    {
      std::lock_guard<std::mutex> lock(inflight_mutex_);
      if (job.next == job.parts) break;
      part = job.next++;
      if (job.next == job.parts) parallel_job_ = nullptr;  // still ours: only its last claim clears it
    }
    work(part);
    job.left.fetch_sub(1, std::memory_order_release);
  }
  // Parts other threads claimed are running now (each a short copy).
  while (job.left.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void ExecutorCore::completion_loop(std::size_t index) {
  std::unique_lock<std::mutex> lock(inflight_mutex_);
  for (;;) {
    // The strand waits for its parallel job: help there first. Then with a finished batch
    // (oldest first), else wait for the next one.
    if (parallel_job_) {
      help_parallel_job(lock);
      continue;
    }
    // An express batch (hand_to_completion puts them first) is awaited before any other work,
    // also while await_width_ threads already wait for regular batches: then beside them, by a
    // poll (express_beside_).
    const bool express_front = !inflight_queue_.empty() && inflight_queue_.front()->express;
    const bool beside = express_front && awaiting_ >= await_width_ && express_beside_ && !express_awaiting_;
    const bool express_next = express_front && (awaiting_ < await_width_ || beside);
    if (!ready_.empty() && !express_next) {
      complete_ready_chunk(lock, index);
      continue;
    }
    if ((awaiting_ < await_width_ && !inflight_queue_.empty()) || beside) {
      await_front_batch(lock, index, beside);
      continue;
    }
    if (stop_completion_ && inflight_queue_.empty() && awaiting_ == 0 && !express_awaiting_) return;
    inflight_cv_.wait(lock);
  }
}

// The next part of the strand's parallel job (held: inflight_mutex_, released meanwhile).
void ExecutorCore::help_parallel_job(std::unique_lock<std::mutex>& lock) {
  ParallelJob* job = parallel_job_;
  const std::size_t part = job->next++;
  if (job->next == job->parts) parallel_job_ = nullptr;
  lock.unlock();
  (*job->work)(part);
  job->left.fetch_sub(1, std::memory_order_release);  // `job` may be gone after this
  lock.lock();
}

// The next chunk of the oldest batch that has finished (held: inflight_mutex_, released meanwhile).
void ExecutorCore::complete_ready_chunk(std::unique_lock<std::mutex>& lock, std::size_t index) {
  Batch* b = ready_.front();
  const std::uint32_t chunk = b->next_chunk++;
  if (b->next_chunk == b->chunks) ready_.pop_front();
  lock.unlock();
  complete_chunk(*b, chunk, index);
  lock.lock();
}

// Waits for the batch at the front of the in-flight queue, then completes its first chunk and
// leaves the others to whoever is idle (held: inflight_mutex_, released meanwhile). `beside`: an
// express batch awaited beside the regular waiters.
void ExecutorCore::await_front_batch(std::unique_lock<std::mutex>& lock, std::size_t index, bool beside) {
  std::unique_ptr<Batch> owned = std::move(inflight_queue_.front());
  inflight_queue_.pop_front();
  if (beside) express_awaiting_ = true;
  else ++awaiting_;
  lock.unlock();
  Batch* b = owned.release();  // from here owned by its chunks; the last one pools it
  // A completion thread polls only a lone caller's batch or a full one (polls_batch): a lone
  // request is back without the blocking wait's wake-up, a saturated device gets its next batch
  // sooner, and an idle executor spins not at all. Beside the regular waiters an express batch
  // is polled (for up to kExpressPoll): a second thread blocked in the driver's wait is what the
  // serial waiter avoids (NVIDIA's missed wake-ups).
  await_batch(*b, index, beside ? std::max(completion_spin_, std::chrono::microseconds(kExpressPoll))
                         : polls_batch(b->items.size()) ? completion_spin_ : std::chrono::microseconds(0));
  lock.lock();
  if (beside) express_awaiting_ = false;
  else --awaiting_;
  b->next_chunk = 1;
  if (b->chunks > 1) ready_.push_back(b);
  const bool more_to_wait_for = !inflight_queue_.empty();
  lock.unlock();
  if (b->chunks > 1 || more_to_wait_for) inflight_cv_.notify_all();
  complete_chunk(*b, 0, index);
  lock.lock();
}

// `finished_at`, when set: the caller saw the batch finished then (complete_own_batch); no poll.
void ExecutorCore::await_batch(Batch& b, std::size_t thread_index, std::chrono::microseconds spin,
                               Clock::time_point finished_at) {
  CompletionStats& st = *completion_stats_[thread_index];
  const std::size_t n = b.items.size();
  std::exception_ptr error = b.error;
  const bool seen = finished_at != Clock::time_point{};
  if (!error && !seen) {
    try {
      const auto limit = b.submitted + watchdog_;
      // Poll for up to `spin` first (never past the watchdog's limit), then block.
      bool finished = false;
      if (spin.count() > 0)
        finished = poll_until(*b.inflight,
                              std::min(limit, Clock::now() + std::chrono::duration_cast<Clock::duration>(spin)));
      while (!finished) {
        const auto now = Clock::now();
        if (now >= limit) {
          const std::string state = b.inflight->pending_state();
          error = make_error(ErrorCode::device_lost,
                             "batch " + std::to_string(b.id) + " of " + std::to_string(n) +
                                 " requests did not complete within " +
                                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_).count()) + " ms" +
                                 (state.empty() ? std::string() : " (" + state + ")"));
          break;
        }
        const auto slice = std::min<Clock::duration>(limit - now, wait_slice_);
        finished = b.inflight->wait_for(slice);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) recover_if_device_lost(error);  // src/executor/recovery.cpp
  b.done = seen ? finished_at : Clock::now();
  b.error = error;
  if (error) {
    auto [code, what] = explain(error);
    log::warn("gpubatch executor: batch {} ({} requests) failed: {}", b.id, n, what);
    b.error_code = code;
    b.error_what = std::move(what);
    last_done_.store(b.done.time_since_epoch().count());
  } else {
    st.device_time.record(b.done - b.submitted);
    if (trace_.on()) b.gpu_time = b.inflight->device_time();  // before the slot lets it go
    // Several completion threads may await at once (a device set): the previous completion is
    // whichever finished last, an approximation there.
    const Clock::time_point previous{Clock::duration(last_done_.exchange(b.done.time_since_epoch().count()))};
    cost_.observe(b.bytes, b.done - std::max(b.submitted, previous));
  }
  const std::size_t helpers = config_.completion_threads;
  b.chunks = static_cast<std::uint32_t>(std::clamp<std::size_t>(n / kMinChunk, 1, helpers));
  b.next_chunk = 0;
  b.chunks_taking.store(b.chunks, std::memory_order_relaxed);
  b.chunks_resolving.store(b.chunks, std::memory_order_relaxed);
}

namespace {
using ItemErrors = std::vector<std::pair<std::size_t, std::exception_ptr>>;
}  // namespace

// Takes the results of requests [first, last) into `results` (from index 0) while the device's
// memory is still the batch's; a request whose result cannot be taken goes to `errors`.
void ExecutorCore::take_chunk_results(Batch& b, std::size_t first, std::size_t last, std::vector<Result>& results,
                                      ItemErrors& errors) {
  if (results.size() < last - first) results.resize(last - first);
  for (std::size_t i = first; i < last; ++i) {
    Result& r = results[i - first];
    try {
      // Empty, whatever an earlier batch left in this slot: a request that failed there was
      // never moved out, and a result of one kind (states) must not carry the other's values
      // (fault stress saw "interpolate: result has 58 values" from such a leftover).
      r.values.clear();
      r.states.clear();
      reuse_input_buffer(b.items[i].request, r);
      b.inflight->take_result(i, r, helpers_);
    } catch (...) {
      errors.emplace_back(i, fresh_current_exception());
      r = Result{};
    }
  }
}

// Resolves requests [first, last), newest first: a caller waiting for its oldest request then
// wakes once, to find its later ones (most often in the same batch) already resolved, instead of
// once per request. A failed batch fails each with its own description.
void ExecutorCore::resolve_chunk(Batch& b, std::size_t first, std::size_t last, std::vector<Result>& results,
                                 ItemErrors& errors) {
  if (b.error) {
    const std::string suffix = " in batch " + std::to_string(b.id) + " of " + std::to_string(b.items.size()) +
                               " requests: " + b.error_what;
    for (std::size_t i = last; i-- > first;) {
      Pending& p = b.items[i];
      std::exception_ptr e;
      try {
        e = make_error(b.error_code, describe(p.request) + suffix);
      } catch (...) {
        e = b.error;
      }
      resolve_error(completion_of(p), std::move(e), false);
    }
    return;
  }
  std::size_t errors_left = errors.size();  // in ascending index order
  for (std::size_t i = last; i-- > first;) {
    if (errors_left > 0 && errors[errors_left - 1].first == i) {
      --errors_left;
      resolve_error(completion_of(b.items[i]), std::move(errors[errors_left].second), false);
    } else {
      resolve_value(completion_of(b.items[i]), std::move(results[i - first]));
      results[i - first] = Result{};
    }
  }
}

void ExecutorCore::complete_chunk(Batch& b, std::uint32_t chunk, std::size_t thread_index) {
  CompletionStats& st = *completion_stats_[thread_index];
  const std::size_t n = b.items.size();
  const std::size_t first = n * chunk / b.chunks, last = n * (chunk + 1) / b.chunks;

  // Take the chunk's results; the last chunk to finish taking gives the device slot back (the
  // strand can submit the next batch meanwhile).
  thread_local std::vector<Result> results;
  thread_local ItemErrors item_errors;
  item_errors.clear();
  if (!b.error) take_chunk_results(b, first, last, results, item_errors);
  if (b.chunks_taking.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    b.inflight.reset();
    inflight_slots_.fetch_sub(1, std::memory_order_seq_cst);
    inflight_halves_.fetch_sub(b.slot_halves, std::memory_order_seq_cst);
    if (b.express) express_inflight_.fetch_sub(1, std::memory_order_seq_cst);
    wake_if_waiting_for_slot();
  }

  // Statistics first, so that whoever sees a result also sees it counted.
  const std::uint64_t bad = b.error ? last - first : item_errors.size();
  for (std::size_t i = first; i < last; ++i) {
    st.queue_wait.record(b.submitted - b.items[i].enqueued);
    st.submit_latency.record(b.submit_returned - b.items[i].enqueued);
    st.end_to_end.record(b.done - b.items[i].enqueued);
    st.classes.record(b.items[i], b.done - b.items[i].enqueued);
  }
  bump(st.completed, static_cast<std::uint64_t>(last - first) - bad);
  bump(st.failed, bad);

  resolve_chunk(b, first, last, results, item_errors);
  if (b.chunks_resolving.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The batch's last chunk: every request of it has resolved.
  if (trace_.on()) record_trace(b);
  std::unique_ptr<Batch> owned(&b);
  b.items.clear();
  b.error = nullptr;
  b.error_what.clear();
  unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
  return_batch_to_pool(std::move(owned));
  maybe_done();
}


}  // namespace gpubatch::detail
