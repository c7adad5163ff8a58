// The bulk lane (DESIGN.md "Large requests"): a completion handler's large request, made while the
// executor is busy, is submitted alone, awaited and resolved by a thread of the lane, beside the
// batches. The direct lane does the same for a future's request on its caller's thread; a
// handler's caller does not wait, so the lane has threads of its own.
//
// Why: a large request fills a batch alone (max_batch_bytes), so batching buys it nothing, while
// the strand, one thread, copies every batch's input and each batch holds one of the few in-flight
// slots through its copies. Small requests then waited behind large ones: 64 threads, 10 % of the
// requests 1,000,000 floats, small requests' p99 40.8 ms on the H100 (third session of
// 2026-11-27). The lane takes large requests off the strand and out of the slots.
#include <pthread.h>

#include <exception>
#include <memory>
#include <thread>
#include <utility>

#include "executor/executor_core.hpp"
#include "executor/executor_internal.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {
namespace {
// Threads, started one at a time as jobs find every started one busy (each submits and awaits one
// request at a time: four carried 16 callers' 1,048,576-float relu at 0.97x what the same callers
// moved alone, H100); requests held at most, waiting or running (a waiting one holds only the
// caller's own vectors, as the queue would): beyond that they are batched. The lane is the large
// requests' own queue, so that small ones never wait behind them for the strand.
constexpr std::size_t kBulkThreads = 4;
constexpr std::size_t kBulkHeld = 256;
}  // namespace

bool ExecutorCore::try_bulk(Request& request, Completion& completion, Clock::time_point now) noexcept {
  if (!lanes_busy(request)) return false;  // as try_direct
  std::unique_ptr<BulkJob> job;
  std::unique_lock lock(bulk_mutex_);
  if (bulk_stop_ || bulk_held_ >= kBulkHeld) return false;
  try {
    job = std::make_unique<BulkJob>();
    if (bulk_threads_.size() < kBulkThreads && bulk_threads_.size() <= bulk_held_) {
      auto self = shared_from_this();
      bulk_threads_.emplace_back([self] { self->bulk_loop(); });
    }
  } catch (...) {
    if (!job || bulk_threads_.empty()) return false;  // no memory, or no thread to run it
  }
  // Counted unresolved before the look at resident_closed_ (both seq_cst, as lane_submit): either
  // shutdown sees it and waits for it, or this producer sees the shutdown and batches it.
  unresolved_batches_.fetch_add(1, std::memory_order_seq_cst);
  if (resident_closed_.load(std::memory_order_seq_cst)) {
    unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
    lock.unlock();
    maybe_done();
    return false;
  }
  job->request = std::move(request);
  job->completion = std::move(completion);
  job->enqueued = now;
  try {
    bulk_jobs_.push_back(std::move(job));
  } catch (...) {  // the deque's strong guarantee: the job is still ours; give its parts back
    request = std::move(job->request);
    completion = std::move(job->completion);
    unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
    lock.unlock();
    maybe_done();
    return false;
  }
  ++bulk_held_;
  large_running_.fetch_add(1, std::memory_order_relaxed);  // until serve_bulk resolved it
  direct_stats_.accepted.fetch_add(1, std::memory_order_relaxed);
  lock.unlock();
  bulk_cv_.notify_one();
  return true;
}

void ExecutorCore::bulk_loop() {
  exchange_thread_core(this);  // an executor thread: a handler here that shuts down does not wait for itself
  pthread_setname_np(pthread_self(), "gpubatch-bulk");
  prepare_thread();
  std::unique_lock lock(bulk_mutex_);
  for (;;) {
    if (!bulk_jobs_.empty()) {
      std::unique_ptr<BulkJob> job = std::move(bulk_jobs_.front());
      bulk_jobs_.pop_front();
      lock.unlock();
      serve_bulk(*job);  // resolves it; shutdown may finish once it has
      large_running_.fetch_sub(1, std::memory_order_relaxed);
      job.reset();
      lock.lock();
      --bulk_held_;
      continue;
    }
    if (bulk_stop_) return;
    bulk_cv_.wait(lock);
  }
}

// Submits the job's request alone and awaits it as the direct lane does (await_lane: resolves,
// counts, ends its unresolved count). Shutdown in cancel mode fails a job not yet submitted.
void ExecutorCore::serve_bulk(BulkJob& job) noexcept {
  constexpr const char* what = "a large request's own batch";
  std::unique_ptr<InFlightBatch> inflight;
  std::exception_ptr error;
  const bool cancelled = cancel_.load(std::memory_order_acquire);
  if (cancelled) {
    error = std::make_exception_ptr(
        Error(ErrorCode::shut_down, describe(job.request) + ": cancelled by shutdown before it was submitted"));
  } else {
    try {
      const Request* one[] = {&job.request};
      inflight = device_->submit(one);
      if (!inflight) error = make_error(ErrorCode::internal, device_->name() + " returned no batch");
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (inflight) {
    // The watchdog counts from the submission: a job's wait in the bulk queue is not the device's.
    await_lane(job.request, job.completion, job.enqueued, inflight, Clock::now(), watchdog_, what, direct_stats_);
    return;
  }
  Result none;
  finish_lane(job.request, job.completion, job.enqueued, none, std::move(error), cancelled, what, direct_stats_);
}

// Every accepted job has resolved by now (shutdown counts them unresolved): the threads end.
void ExecutorCore::stop_bulk_locked() {
  {
    std::lock_guard lock(bulk_mutex_);
    bulk_stop_ = true;
  }
  bulk_cv_.notify_all();
}

}  // namespace gpubatch::detail
