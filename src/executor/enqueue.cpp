// Producers: a request's way from its caller's thread into the executor, in four steps that each
// fail it with its own typed error (DESIGN.md "Errors"): validation, admission (size, level,
// deadline, deadline_admission), a lane beside the queue (resident, split, direct, bulk), and its
// level's queue, pushed by the overflow policy, with the strand woken only when it must be.
// Every accepted request's completion is resolved on some path; one refused here is resolved
// here, on the caller's thread.
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "executor/executor_core.hpp"
#include "executor/executor_internal.hpp"
#include "gpubatch/detail/block_pool.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {

namespace {
// The bytes of `r` its HostBuffers hold (read or written in place, never copied by the CPU).
std::size_t in_place_bytes(const Request& r) noexcept {
  std::size_t floats = 0;
  for (const auto* m : {r.host_a.get(), r.host_b.get(), r.host_result.get()})
    if (m) floats += m->floats;
  return floats * sizeof(float);
}
}  // namespace

void ExecutorCore::enqueue(Request&& request, const SubmitOptions& options,
                           Completion&& completion) noexcept {
  try {
    validate(request);
  } catch (...) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    resolve_error(completion, fresh_current_exception(), true, this);
    return;
  }
  try {
    const std::size_t bytes = input_bytes(request) + output_bytes(request);
    const auto now = Clock::now();
    const auto deadline = admit(request, options, completion, bytes, now);
    if (!deadline || take_by_lane(request, completion, options.priority, bytes, *deadline, now)) return;
    queue_request(std::move(request), std::move(completion), options.priority, bytes, *deadline, now);
  } catch (...) {
    // Only std::bad_alloc can get here, before the completion moved on (queue_request fails a
    // request it took itself).
    rejected_.fetch_add(1, std::memory_order_relaxed);
    resolve_error(completion, std::current_exception(), true, this);
  }
}

// The checks that fail a request at its call, in the order a user would fix them. Its deadline
// (its level's default timeout applied) when it passes; nullopt once `completion` was failed.
std::optional<Clock::time_point> ExecutorCore::admit(const Request& request, const SubmitOptions& options,
                                                     Completion& completion, std::size_t bytes,
                                                     Clock::time_point now) {
  if (bytes > max_request_bytes_) {
    reject(completion, ErrorCode::request_too_large,
           describe(request) + " needs " + std::to_string(bytes) + " bytes; " + device_->name() +
               " takes at most " + std::to_string(max_request_bytes_) + " per request");
    return std::nullopt;
  }
  if (options.priority >= level_count()) {
    reject(completion, ErrorCode::invalid_argument,
           describe(request) + ": priority " + std::to_string(options.priority) +
               " is not a level of this executor (priority_levels = " + std::to_string(level_count()) + ")");
    return std::nullopt;
  }
  auto deadline = options.deadline;
  if (deadline == Clock::time_point::max() && config_.level_timeout[options.priority].count() > 0)
    deadline = now + std::chrono::duration_cast<Clock::duration>(config_.level_timeout[options.priority]);
  if (deadline <= now) {
    reject(completion, ErrorCode::deadline_exceeded, describe(request) + ": its deadline had passed when it was submitted");
    return std::nullopt;
  }
  if (deadline != Clock::time_point::max() && config_.deadline_admission &&
      backlog_outlasts(deadline, now, options.priority)) {
    shed(completion, request);
    return std::nullopt;
  }
  return deadline;
}

// Deadline admission (DESIGN.md "Deadlines"): only behind requests already waiting, with signals
// measured in the last DrainRate::kStale (so never on an executor that has not been behind in
// that time): the shortest wait of the newest requests of the last batches, and the requests
// ahead at the rate the strand took requests while behind; counting none of the device time
// after the wait (the prediction errs towards admitting).
bool ExecutorCore::backlog_outlasts(Clock::time_point deadline, Clock::time_point now, std::size_t level) noexcept {
  // Of the forming batch, only its requests at this level and above are ahead: level 0's would
  // count a lower level's backlog against a higher level's request, which goes before it (512 of
  // them forming refused a level-1 request that went out at once in the express slot;
  // DeadlineAdmission.LevelZerosFormingBatchIsNotAheadOfAHigherLevel).
  std::uint64_t ahead = forming_from_[level].load(std::memory_order_relaxed);
  for (std::size_t l = level; l < level_count(); ++l) ahead += level_queue(l).size_approx();
  if (ahead == 0) return false;  // it goes into the next batch
  // The newest requests' wait is level 0's (a higher level goes ahead of it): level 0 only.
  auto wait = drain_.wait_behind(ahead, now);
  if (level == 0) wait = std::max(wait, drain_.recent_wait(now));
  return wait.count() > 0 && now + wait > deadline;
}

// A refusal shares one exception per thread and shape (SharedError), as the deadline watch's
// expiries do: a saturated executor refuses requests by the hundred thousand a second.
void ExecutorCore::shed(Completion& completion, const Request& request) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  shed_.fetch_add(1, std::memory_order_relaxed);
  try {
    thread_local SharedError refused;
    resolve_error(completion,
                  refused.get(shape_of(request), ErrorCode::deadline_exceeded,
                              ": refused at submission: the requests queued ahead of it would outlast its "
                              "deadline (deadline_admission)"),
                  true, this);
  } catch (...) {
    resolve_error(completion, std::current_exception(), true, this);
  }
}

void ExecutorCore::reject(Completion& completion, ErrorCode code, const std::string& message) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  try {
    resolve_error(completion, make_error(code, message), true, this);
  } catch (...) {
    resolve_error(completion, std::current_exception(), true, this);
  }
}

// The lanes beside the queue (DESIGN.md "Resident mode", "Large requests"): true when one took
// the request and its completion. Only level 0 without a deadline leaves the queue this way.
bool ExecutorCore::take_by_lane(Request& request, Completion& completion, std::size_t priority,
                                std::size_t bytes, Clock::time_point deadline, Clock::time_point now) noexcept {
  if (priority != 0) return false;
  if (resident_on_ && try_resident(request, completion, now)) return true;
  if (deadline != Clock::time_point::max()) return false;
  if (bytes < (split_line_ ? std::min(split_line_, config_.direct_bytes) : config_.direct_bytes)) return false;
  // The caller's own thread may run a large request (chunked, or whole on the direct lane) when
  // it waits for it anyway.
  if ((returns_future(completion) || caller_waits()) && lanes_for(request)) {
    if (split_line_ && bytes >= split_line_ && try_split(request, completion, now)) return true;
    return direct_lane_ && bytes >= config_.direct_bytes && try_direct(request, completion, now);
  }
  // A handler's large request (without a cancellation slot: that needs the strand) goes to the
  // bulk lane's threads instead.
  return bulk_lane_ && bytes >= config_.direct_bytes && cancel_state_of(completion) == nullptr &&
         lanes_for(request) && try_bulk(request, completion, now);
}

// Into the request's level's queue, by the overflow policy; then the strand is woken if it must
// be, or the request is failed where the push was refused. The completion moves into the
// request's Pending (or its ExpiryCell) here: from then on only this function fails it.
void ExecutorCore::queue_request(Request&& request, Completion&& completion, std::size_t priority,
                                 std::size_t bytes, Clock::time_point deadline, Clock::time_point now) {
  const bool future_call = bytes <= kLoneFutureBytes && returns_future(completion);
  const bool handler_call = bytes <= kLoneFutureBytes && !future_call && !caller_waits();
  // Allocated while the completion is still the caller's: a bad_alloc fails it in enqueue().
  std::shared_ptr<ExpiryCell> expiry;
  if (deadline != Clock::time_point::max()) {
    // From a pool, not malloc: freed on the strand's, the watch's or a completion thread, a
    // malloc'd cell waited for this thread's arena lock (block_pool.hpp).
    expiry = std::allocate_shared<ExpiryCell>(PooledAllocator<ExpiryCell>{});
    expiry->deadline = deadline;
    expiry->shape = shape_of(request);  // described only if it expires
  }
  RequestCancel* const cancel = cancel_state_of(completion);
  Pending p{std::move(request), std::move(completion), now, deadline, bytes,
            static_cast<std::uint8_t>(priority), false, cancel, expiry};
  if (expiry) expiry->completion = std::move(p.completion);
  if (in_place_light_ && uses_host_buffers(p.request)) p.in_place = std::min(bytes, in_place_bytes(p.request));
  auto& queue = level_queue(priority);
  std::uint64_t pos = 0;
  bool deadline_first = false;  // the wait for room ended at the request's own deadline
  // The watch holds the cell before the push, so that a request in the queue is always watched:
  // handed over after the push, a caller preempted in between would leave its request unwatched,
  // and the strand, finding it expired, would fail it as late as it came to it. (The late errors
  // first blamed on that window were the load generator's own: a 1,000,000-float input copied
  // after its clock read outlasted the 2 ms deadline, and the call refused it; no strand error of
  // that window was seen in 30 H200 runs either way, BENCHMARKS.md 2026-11-29.) A refused push
  // takes the cell back (refuse_unqueued). GPUBATCH_WATCH_BEFORE_PUSH=off hands it over after.
  const bool watch = expiry && deadline_watch_on_;
  if (watch && watch_before_push_) watch_deadline(std::move(expiry));
  const PushResult r = push_by_policy(queue, std::move(p), deadline, now, pos, deadline_first);
  if (r != PushResult::ok) return refuse_unqueued(p, r, deadline_first);  // p still owns it all
  if (watch && !watch_before_push_) watch_deadline(std::move(expiry));
  const bool must_wake = note_pushed(deadline != Clock::time_point::max(), priority != 0, cancel, bytes);
  if (must_wake || pos >= wake_pos_.load(std::memory_order_relaxed))
    post_if_idle(future_call || handler_call ? InlineAsk{&queue, pos, future_call} : InlineAsk{});
}

// Moves `p` in only on `ok`.
PushResult ExecutorCore::push_by_policy(BlockingMpscQueue<Pending>& queue, Pending&& p, Clock::time_point deadline,
                                        Clock::time_point now, std::uint64_t& pos, bool& deadline_first) {
  switch (config_.overflow) {
    case OverflowPolicy::reject:
      return queue.try_push(std::move(p), pos);
    case OverflowPolicy::block:
      if (deadline == Clock::time_point::max()) return queue.push_wait(std::move(p), pos);
      deadline_first = true;
      return queue.push_until(std::move(p), deadline, pos);
    case OverflowPolicy::block_for: {
      auto limit = now + std::chrono::duration_cast<Clock::duration>(config_.block_timeout);
      if (deadline < limit) {
        limit = deadline;
        deadline_first = true;
      }
      return queue.push_until(std::move(p), limit, pos);
    }
  }
  return PushResult::full;  // not reached: every policy is a case
}

// The flags the strand reads on its next pass, for a request just pushed; true when it must be
// woken for this request whatever its position (see wake_position()): one with a deadline, of a
// higher level (it goes into the next batch), cancelled while it was being pushed (its signal
// found nothing to take out yet), or big. The fence orders the flags and the push before the
// caller's look at strand_awake_ (post_if_idle), against the strand's going idle.
bool ExecutorCore::note_pushed(bool urgent, bool upper, const RequestCancel* cancel, std::size_t bytes) noexcept {
  if (urgent) urgent_.store(true, std::memory_order_relaxed);
  if (upper) upper_pushed_.store(true, std::memory_order_release);  // after the push: pull_level reads it
  const bool cancelled = cancel && cancel->cancelled();
  if (cancelled) cancels_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return urgent || upper || cancelled || bytes > big_request_bytes_;
}

// A refused push moved nothing: `p` still owns the request and its completion. The watch may
// hold its cell already and have failed it at its deadline while the caller waited for room;
// then it counts as rejected, as it would have been here, and nothing else is left to do.
void ExecutorCore::refuse_unqueued(Pending& p, PushResult r, bool deadline_first) noexcept {
  if (p.expiry && !p.expiry->take()) {
    watch_expired_unqueued_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Completion& completion = completion_of(p);
  try {
    if (r == PushResult::closed) {
      reject(completion, ErrorCode::shut_down, describe(p.request) + ": the executor has shut down");
    } else if (deadline_first) {
      reject(completion, ErrorCode::deadline_exceeded,
             describe(p.request) + ": its deadline passed while it waited for room in the queue");
    } else {
      const auto& queue = level_queue(p.priority);
      reject(completion, ErrorCode::queue_full,
             describe(p.request) + ": the queue is full (" + std::to_string(queue.capacity()) + " requests" +
                 (level_count() > 1 ? " at priority " + std::to_string(p.priority) : std::string()) +
                 ", overflow = " + std::string(to_string(config_.overflow)) + ")");
    }
  } catch (...) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    resolve_error(completion, std::current_exception(), true, this);
  }
}

}  // namespace gpubatch::detail
