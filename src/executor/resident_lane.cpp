// Resident mode in the executor (DESIGN.md "Resident mode"): a producer that finds the executor
// idle hands a small request straight to the device's resident kernel (BatchDevice::
// try_submit_resident) instead of the queue; one lane thread waits for those requests in ring
// order and resolves their futures. Everything else takes the batched path at the same time.
#include <pthread.h>

#include <string>
#include <utility>

#include "log.hpp"

#include "executor/executor_core.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {

namespace {

// A fresh Error equal to the one being handled, with the request and its lane (`what`) named
// (never shares the caught object across threads; see fresh_current_exception in executor.cpp).
std::exception_ptr current_error_for(const Request& r, const char* what) noexcept {
  try {
    const std::string named = describe(r) + " (" + what + "): ";
    try {
      throw;
    } catch (const Error& e) {
      return std::make_exception_ptr(Error(e.code(), named + std::string(e.message())));
    } catch (const std::exception& e) {
      return std::make_exception_ptr(Error(ErrorCode::internal, named + e.what()));
    } catch (...) {
      return std::make_exception_ptr(Error(ErrorCode::internal, named + "unknown exception"));
    }
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

void ExecutorCore::start_resident() {
  if (!config_.resident) return;
  ResidentSettings settings;
  settings.idle = config_.resident_idle;
  settings.watchdog = config_.batch_timeout;
  try {
    resident_on_ = device_->start_resident(settings);
  } catch (const std::exception& e) {
    log::warn("gpubatch executor: starting resident mode failed: {}", e.what());
    resident_on_ = false;
  }
  if (!resident_on_) {
    log::warn("gpubatch executor: resident mode is unavailable on {}; every request is batched",
                 device_->name());
    return;
  }
  auto self = shared_from_this();
  resident_thread_ = std::thread([self] {
    pthread_setname_np(pthread_self(), "gpubatch-ring");
    self->prepare_thread();
    self->resident_loop();
  });
}

// A crowd batches better than the ring serves it one by one: only a request that finds the
// queue empty and no batch on the device goes to the ring (and only while the ring has a free
// slot and the request fits one). So under load everything is batched as before, and resident
// mode never lowers throughput.
bool ExecutorCore::try_resident(Request& request, Completion& completion, Clock::time_point now) noexcept {
  // The batch slots first: under a crowd they are always taken, and that word changes once per
  // batch. The queues' head words change with every request the strand takes: 16 producers
  // reading them per request pull the strand's hottest line away from it.
  if (inflight_slots_.load(std::memory_order_relaxed) != 0) return false;
  if (queue_.pushed_approx() != queue_.popped_approx()) return false;
  for (const auto& q : upper_queues_)
    if (q->pushed_approx() != q->popped_approx()) return false;
  std::unique_ptr<InFlightBatch> inflight = lane_submit([&] { return device_->try_submit_resident(request); });
  if (!inflight) return false;
  resident_stats_.accepted.fetch_add(1, std::memory_order_relaxed);
  bool wake = false;
  // The backstop counts from here: a ring opened for this request (after a loss; on lavapipe a
  // VkDevice and a pipeline of its own, 0.4 s and more under a sanitizer) is not the kernel late.
  ResidentEntry entry{std::move(request), std::move(completion), now, Clock::now(), std::move(inflight)};
  // A synchronous caller polls its own slot's done word: no hop through the lane thread (on the
  // H200 that hop and the future's wake-up made a 3.8 us kernel round trip 12-19 us). So does a
  // future's caller with lone_future_waits, for completion_spin at most: its future comes back
  // ready; a request not served by then goes to the lane thread.
  if (caller_waits() || (config_.lone_future_waits && returns_future(entry.completion) &&
                         last_waited_future_released() && future_caller_polls(*entry.inflight, now))) {
    await_resident(entry);
    return true;
  }
  {
    std::lock_guard lock(resident_mutex_);
    try {
      resident_entries_.push_back(std::move(entry));  // strong guarantee: on throw, entry is intact
    } catch (...) {  // bad_alloc: the request is in the ring but cannot be waited for here
      resident_stats_.failed.fetch_add(1, std::memory_order_relaxed);
      resolve_error(entry.completion, std::current_exception(), true);
      unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
      return true;
    }
    resident_pending_.fetch_add(1, std::memory_order_release);
    wake = resident_sleeping_;
  }
  if (wake) resident_cv_.notify_one();
  return true;
}

// Oldest first (the kernel serves the ring in order). When the ring is empty the thread spins
// for resident_idle (a lone caller's next request comes within microseconds; an OS wake-up
// would cost 20-30 us), then sleeps until a producer wakes it: an idle executor burns no CPU.
void ExecutorCore::resident_loop() {
  std::unique_lock lock(resident_mutex_);
  for (;;) {
    if (!resident_entries_.empty()) {
      ResidentEntry entry = std::move(resident_entries_.front());
      resident_entries_.pop_front();
      lock.unlock();
      await_resident(entry);
      resident_pending_.fetch_sub(1, std::memory_order_relaxed);
      lock.lock();
      continue;
    }
    if (resident_stop_) return;
    lock.unlock();
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(config_.resident_idle);
    for (std::uint32_t spins = 0; resident_pending_.load(std::memory_order_acquire) == 0; ++spins) {
      if ((spins & 63) == 0 && Clock::now() >= until) break;
      if (spins > 4096) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
      else __builtin_ia32_pause();
#endif
    }
    lock.lock();
    if (!resident_entries_.empty() || resident_stop_) continue;
    resident_sleeping_ = true;
    resident_cv_.wait(lock, [&] { return !resident_entries_.empty() || resident_stop_; });
    resident_sleeping_ = false;
  }
}

// The device's own watchdog (batch_timeout from the ticket's submission) fires first and also
// retires the ring, so that no later request queues behind a stuck ticket; twice that is only a
// backstop for a device without one.
void ExecutorCore::await_resident(ResidentEntry& e) noexcept {
  await_lane(e.request, e.completion, e.enqueued, e.inflight, e.accepted,
             2 * std::chrono::duration_cast<Clock::duration>(config_.batch_timeout), "the resident kernel",
             resident_stats_);
}

// Waits for one lane request (a 1 ms blocking slice, then 50 us naps between looks; shutdown
// (cancel) and the `limit` from its arrival are looked at between them), then resolves it. The
// naps are on purpose for the direct lane too: with a blocking wait for the whole of a
// 1,048,576-float request's batch, 16 callers used 5.4-5.9 ms of CPU per request against 4.6-5.1
// with the naps (the driver's wait spins), and moved 10.0-10.4 GB/s against 11.8-13.2 (H100,
// BENCHMARKS.md fifth session of 2026-11-26, calls 8-10). device_lost goes through the
// recovery batches use.
void ExecutorCore::await_lane(Request& request, Completion& completion, Clock::time_point enqueued,
                              std::unique_ptr<InFlightBatch>& inflight, Clock::time_point submitted,
                              Clock::duration limit, const char* what, LaneStats& st) noexcept {
  std::exception_ptr error;  // none: served
  bool cancelled = false;
  const auto until = submitted + limit;
  Result result;
  bool first = true;
  try {
    for (;;) {
      const bool cancel = cancel_.load(std::memory_order_acquire);
      if (inflight->wait_for(cancel || !first ? std::chrono::milliseconds(0) : std::chrono::milliseconds(1))) {
        reuse_input_buffer(request, result);  // read by now: the result goes into its buffer
        inflight->take_result(0, result, helpers_);
        break;
      }
      if (cancel) {
        cancelled = true;
        error = std::make_exception_ptr(Error(
            ErrorCode::shut_down, describe(request) + ": cancelled by shutdown before " + what + " served it"));
        break;
      }
      if (Clock::now() >= until)
        throw Error(ErrorCode::device_lost,
                    "no answer within " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(limit).count()) +
                        " ms of its submission");
      if (!first) std::this_thread::sleep_for(std::chrono::microseconds(50));
      first = false;
    }
  } catch (...) {
    error = current_error_for(request, what);
  }
  inflight.reset();  // frees its slot or frame (a cancelled one once the device has passed it)
  finish_lane(request, completion, enqueued, result, std::move(error), cancelled, what, st);
}

// Counts and resolves one lane request: with `result`, or with `error` when there is one
// (`cancelled`: by shutdown; otherwise a device's error, logged, and a lost device recovered as
// for a batch). Ends its unresolved count.
void ExecutorCore::finish_lane(Request& request, Completion& completion, Clock::time_point enqueued,
                               Result& result, std::exception_ptr error, bool cancelled, const char* what,
                               LaneStats& st) noexcept {
  const bool served = !error;
  if (error && !cancelled) {
    log::warn("gpubatch executor: a request of {} failed: {}", what, [&] {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& x) {
        return std::string(x.what());
      }
    }());
    recover_if_device_lost(error);
  }
  // Statistics first, so that whoever sees a result also sees it counted. Several threads get
  // here (a lane thread, callers): one writer at a time.
  std::unique_lock stats_lock(st.mutex);
  if (served) {
    const auto e2e = Clock::now() - enqueued;
    st.end_to_end.record(e2e);
    st.classes.by_op[static_cast<std::size_t>(request.op)].record(e2e);
    st.classes.by_level[0].record(e2e);
    st.completed.store(st.completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    stats_lock.unlock();
    resolve_value(completion, std::move(result));
  } else {
    auto& counter = cancelled ? st.cancelled : st.failed;
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    stats_lock.unlock();
    resolve_error(completion, std::move(error), false);
  }
  unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
  maybe_done();
}

// Under shutdown_mutex_, once every accepted request has resolved.
void ExecutorCore::wake_resident_locked() {
  {
    std::lock_guard lock(resident_mutex_);
    resident_stop_ = true;
  }
  resident_cv_.notify_all();
}

}  // namespace gpubatch::detail
