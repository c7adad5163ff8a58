// The strand: forms batches from the queues (with the BatchFormer), expires, cancels and submits
// them, and keeps its one timer. See executor_core.hpp.
#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include "log.hpp"

#include "executor/executor_core.hpp"
#include "executor/pull_loop.hpp"
#include "executor/executor_internal.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {


// The strand's state belongs to whoever holds strand_awake_ (set by exchange, cleared after the
// last look): the io thread for a posted run or the timer, or a producer that found the strand
// idle and runs it inline (post_if_idle). `on_io_thread` false: such a producer; it does one pass
// and posts whatever is left, so that its own call returns promptly.
void ExecutorCore::run_strand(bool on_io_thread) {
  for (;;) {
    bump(strand_stats_.runs);
    const bool traced = trace_.on();
    TraceRecorder::StrandRun run;
    if (traced) {
      run.begin = Clock::now();
      run.pulled = strand_stats_.pulled.load(std::memory_order_relaxed);
      run.batches = next_batch_id_;
    }
    try {
      process();
    } catch (const std::exception& e) {
      log::error("gpubatch executor: batch formation failed: {}", e.what());
    }
    if (traced) trace_strand_run(run, on_io_thread);
    // What the last look needs of the strand's state is read before the strand is let go: from
    // then on another thread may hold it.
    const StrandLook look{strand_finished_, blocked_on_slot_, closing_seen_, cancel_seen_, wake_position(),
                          timer_target_, lone_streak_ >= kLoneStreak, blocked_on_express_};
    wake_pos_.store(look.wake, std::memory_order_relaxed);
    wants_slot_.store(look.wants_slot || look.wants_express, std::memory_order_relaxed);
    strand_awake_.store(false, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!strand_has_work(look)) {
      if (on_io_thread) linger(look);
      return;
    }
    if (strand_awake_.exchange(true, std::memory_order_seq_cst)) return;  // another run is posted
    if (!on_io_thread && post_strand_run()) return;
  }
}

// With tracing on: the run that just ended, as trace_.strand_run records it (trace.hpp).
void ExecutorCore::trace_strand_run(TraceRecorder::StrandRun& run, bool on_io_thread) {
  run.end = Clock::now();
  run.io_thread = on_io_thread;
  run.pulled = strand_stats_.pulled.load(std::memory_order_relaxed) - run.pulled;
  run.batches = next_batch_id_ - run.batches;
  run.forming = former_.size();
  run.blocked_on_slot = blocked_on_slot_;
  trace_.strand_run(run);
}

// Opt-in (GPUBATCH_STRAND_SPIN=on): the io thread, idle, polls for a while before it goes back
// to the io_context, where it would sleep: a producer that finds the strand idle posts a run,
// which this thread then takes up without an OS wake-up. Only for a lone caller (kLoneBatch says
// why), never past the strand's timer (it fires on this thread), nor once shutdown has begun;
// completion_spin_us long (0 on a device of host cores: no polling there). Off by default: on
// the H200 a lone caller's future took 38.6 us p50 with it and 46.3 without in one run, 56.0 and
// 47.1 in the next, p99 worse in both, at nearly twice the CPU per request
// (session-h200-2026-11-23-s3b/-s3c).
void ExecutorCore::linger(const StrandLook& look) noexcept {
  if (!strand_spin_ || !look.lone || look.finished || completion_spin_.count() == 0) return;
  const auto until = std::min(look.timer_at, Clock::now() + std::chrono::duration_cast<Clock::duration>(completion_spin_));
  bump(strand_stats_.polls);
  for (std::uint32_t i = 1;; ++i) {
    if (strand_awake_.load(std::memory_order_relaxed)) {  // a run was posted: next on this thread
      bump(strand_stats_.poll_hits);
      return;
    }
    if (closing_requested_.load(std::memory_order_relaxed)) return;
    if ((i & 15) == 0 && Clock::now() >= until) return;
    for (int k = 0; k < 8; ++k) cpu_relax();
  }
}

// Hands the strand (held: strand_awake_ is set) to the io thread; false when the post failed.
bool ExecutorCore::post_strand_run() noexcept {
  try {
    boost::asio::post(strand_, [this] { run_strand(true); });
    return true;
  } catch (...) {
    return false;
  }
}

// Where in the queue the strand next needs to look, as a push position: the first request of
// an empty batch (to start its max_wait timer, or to flush it at once with the adaptive policy),
// the request that makes the batch full, or the one that fills half the queue (so that a full
// queue never waits for a sleeping strand). kNever when only a free slot can help.
std::uint64_t ExecutorCore::wake_position() const noexcept {
  if (strand_finished_) return kNever;
  if (!former_.wants(0)) return kNever;
  const std::uint64_t head = queue_.popped_approx();
  if (former_.empty()) return head;
  const std::size_t limit = former_.count_limit();
  const std::uint64_t room = limit - std::min(former_.size(), limit - 1);
  const std::uint64_t half = std::max<std::uint64_t>(1, queue_.capacity() / 2);
  return head + std::min(room, half) - 1;
}

// Called after the strand was let go: reads only atomics and `look`, taken while it was held.
bool ExecutorCore::strand_has_work(const StrandLook& look) const noexcept {
  if (look.finished) return false;
  if (look.wants_slot && slot_free()) return true;
  if (look.wants_express && !express_busy()) return true;
  if (timer_fired_.load(std::memory_order_relaxed)) return true;
  if (!look.closing_seen && closing_requested_.load(std::memory_order_relaxed)) return true;
  if (look.closing_seen && !look.cancel_seen && cancel_.load(std::memory_order_relaxed)) return true;
  if (urgent_.load(std::memory_order_relaxed)) return true;
  if (cancels_.load(std::memory_order_relaxed)) return true;
  if (upper_pushed_.load(std::memory_order_relaxed)) return true;
  return look.wake != kNever && queue_.published(look.wake);
}

// On the io thread, for events that are not pushes (timer, shutdown), noted first in atomics
// that strand_has_work() reads: process through run_strand() so that the wake-up state is
// republished when the strand goes idle again. When another run holds the strand (posted, or a
// producer's inline run), it sees the note in its last look and runs again.
void ExecutorCore::kick() {
  if (!strand_awake_.exchange(true, std::memory_order_seq_cst)) run_strand(true);
}

void ExecutorCore::process() {
  if (strand_finished_) return;
  if (timer_fired_.exchange(false, std::memory_order_relaxed)) timer_target_ = Clock::time_point::max();
  if (closing_requested_.load(std::memory_order_acquire)) closing_seen_ = true;
  if (closing_seen_ && cancel_.load(std::memory_order_acquire)) cancel_seen_ = true;
  const bool urgent = urgent_.exchange(false, std::memory_order_relaxed);
  const bool cancels = cancels_.exchange(false, std::memory_order_relaxed);
  upper_pushed_.store(false, std::memory_order_relaxed);
  if (cancel_seen_) {
    cancel_everything();
  } else {
    form_and_flush(cancels);
    after_forming(urgent);
    if (pass_budget_ == 0) note_upper_left();
  }
  if (finish_if_drained()) return;
  schedule_timer(Clock::now());
}

// A pass that ended at its budget runs again (strand_has_work) while a queue holds requests.
// Level 0's wake position says so; the levels above have only upper_pushed_, which this pass
// cleared. Without this, requests left above level 0 waited for the next push to a level above
// 0, and with none to come their futures never resolved (CI's TSan run, 2026-12-01:
// Priority.ManyThreadsOnThreeLevelsAllResolveCorrectly hung with 222 level-1 requests queued, the
// former empty, nothing in flight and the strand idle).
void ExecutorCore::note_upper_left() noexcept {
  for (std::size_t l = 1; l < level_count(); ++l)
    if (level_queue(l).size_approx() > 0) upper_pushed_.store(true, std::memory_order_relaxed);
}

// Takes what the queues hold and flushes what the policy says, until it says wait or every
// in-flight slot is taken.
void ExecutorCore::form_and_flush(bool cancels) {
  auto now = Clock::now();
  pass_budget_ = former_.count_limit() + kDropBudget;
  blocked_on_slot_ = false;
  blocked_on_express_ = false;
  if (cancels) sweep_cancelled();
  apply_latency_target(now);
  for (;;) {
    pull(now);
    note_forming_size();
    if (next_deadline() <= now && now - last_sweep_ >= kSweepInterval) {
      last_sweep_ = now;
      expire_forming(now);
      scan_queue_deadlines(now, true);
    }
    if (express_ready(now)) {  // levels above 0 go now, in their own slot
      flush(FlushReason::idle, now, true);
      now = Clock::now();
      continue;
    }
    // Requests above level 0 wait for the express slot (its completion wakes the strand). Not
    // when it is free: then they wait for what the policy decides, as level 0 does.
    blocked_on_express_ = express_on_ && level_count() > 1 && former_.upper_size() > 0 && express_busy();
    const auto decision = decide(now);
    if (!decision.reason) break;
    if (!slot_free()) {
      blocked_on_slot_ = true;
      break;
    }
    if (express_splits()) flush(FlushReason::idle, now, true);  // the levels above 0 go ahead of it
    flush(*decision.reason, now, false, upper_waits_for_express());
    now = Clock::now();
  }
  note_forming_size();  // what the last look sees (slot_free)
}

// After forming: requests with a deadline that wait in the queues behind a full former still
// fail promptly (looked at in place); producers waiting for room are woken; the drain rate
// sees what the strand took.
void ExecutorCore::after_forming(bool urgent) {
  const auto now = Clock::now();
  // pull() stopped at the end of every queue, not at a full level nor at its budget: nothing
  // waits there.
  if (former_.wants_every_level() && pass_budget_ != 0) queue_deadline_ = Clock::time_point::max();
  else if (urgent) scan_queue_deadlines(now, false);  // only what arrived since last time
  // A backlog: requests left in the queues, or a batch formed and waiting for a free slot; then
  // what the strand took since its last look is what it can take, not what arrived.
  bool backlogged = blocked_on_slot_ && !former_.empty();
  for (std::size_t l = 0; l < level_count(); ++l) {
    level_queue(l).notify_space();
    backlogged = backlogged || level_queue(l).size_approx() > 0;
  }
  drain_.observe(now, drain_taken_, backlogged);
  for (std::size_t l = 0; l < level_count(); ++l) forming_from_[l].store(former_.size_from(l), std::memory_order_relaxed);
}

// Shutdown: once closing and every accepted request has left the queues and the former, the
// strand is finished. True then.
bool ExecutorCore::finish_if_drained() {
  bool drained = former_.empty();
  for (std::size_t l = 0; drained && l < level_count(); ++l) drained = level_queue(l).drained();
  if (!closing_seen_ || !drained) return false;
  strand_finished_ = true;
  timer_target_ = Clock::time_point::max();
  timer_.cancel();
  strand_done_.store(true, std::memory_order_seq_cst);
  maybe_done();
  return true;
}

// Pulls each level's queue, the highest first, while the former takes that level.
bool ExecutorCore::pull(Clock::time_point now) {
  std::uint64_t n = 0;
  for (std::size_t level = level_count(); level-- > 0;) {
    const PullEnd end = pull_level(level, now, n);
    // An express batch is due (the caller flushes it first), or the pass's budget is spent.
    if (end == PullEnd::looked_up || end == PullEnd::budget) break;
  }
  pass_budget_ -= std::min(n, pass_budget_);
  if (n) bump(strand_stats_.pulled, n);
  return n != 0;
}

// Pulls one level while the former takes it; `n` counts what it took. True when it stopped early
// for an express batch: behind a crowd a pull of level 0 runs to thousands of requests (up to
// about a millisecond; on the H200 at 3 M/s offered an express batch's formation took p50 273 us,
// and 440 us with the packer, which leaves the strand more to pull), so every kUpperLook requests
// it looks for requests pushed above level 0 since, and takes them when the express slot is free.
PullEnd ExecutorCore::pull_level(std::size_t level, Clock::time_point now, std::uint64_t& n) {
  auto& queue = level_queue(level);
  const bool looks_up = level == 0 && express_on_ && level_count() > 1 && upper_look_;
  const auto take = [&] {
    for (;;) {
      if (queue.try_consume_quiet([&](Pending&& p) { accept_into_forming(std::move(p), now); })) return true;
      // After the close every claimed position gets published promptly; wait for it so that
      // the drain cannot finish with an accepted request left behind.
      if (!closing_seen_ || !queue.has_claimed()) return false;
      queue.notify_space();  // the claimer may be waiting for a slot this round freed
      std::this_thread::yield();
    }
  };
  return pull_with_looks(
      n, looks_up ? kUpperLook : 0, pass_budget_, [&] { return former_.wants(level); }, take,
      [&] { return express_due(now, n); });
}

// In a long pull of level 0: requests pushed above it since, taken now when the express slot is
// free; true when they make an express batch due. The flag is read with acquire (pushers store it
// with release after their push), so what it announces is published.
bool ExecutorCore::express_due(Clock::time_point now, std::uint64_t& n) {
  if (express_busy() || !upper_pushed_.load(std::memory_order_acquire)) return false;
  upper_pushed_.store(false, std::memory_order_relaxed);
  for (std::size_t level = level_count(); level-- > 1;) pull_level(level, now, n);
  return express_ready(now);
}

void ExecutorCore::accept_into_forming(Pending&& p, Clock::time_point now) {
  if (gone(p)) return;  // expired in the queue, already counted and resolved
  if (p.cancel && p.cancel->cancelled()) {
    drop_cancelled(p);
    return;
  }
  if (p.deadline <= now) {
    if (leave_to_watch(p)) return;
    fail_pending(p, ErrorCode::deadline_exceeded, strand_expiry_text(p, "in the queue"), strand_stats_.expired);
    return;
  }
  taken_bytes_ += p.bytes;
  ++taken_requests_;
  ++drain_taken_;
  former_.offer(std::move(p), now);
}

void ExecutorCore::expire_forming(Clock::time_point now) {
  if (former_.earliest_deadline() > now) return;
  former_.remove_if([&](Pending& p) {
    if (gone(p)) return true;
    if (p.deadline > now) return false;
    if (leave_to_watch(p)) return true;
    fail_pending(p, ErrorCode::deadline_exceeded, strand_expiry_text(p, "for its batch"), strand_stats_.expired);
    return true;
  });
}

// Requests still in the queues (behind a full former): fail the expired ones in place (they are
// skipped when popped) and note the earliest deadline for the timer. `from_head` rescans
// everything; otherwise only positions not scanned before are looked at.
void ExecutorCore::scan_queue_deadlines(Clock::time_point now, bool from_head) {
  if (from_head) queue_deadline_ = Clock::time_point::max();
  for (std::size_t level = 0; level < level_count(); ++level) scan_level_deadlines(level, now, from_head);
}

void ExecutorCore::scan_level_deadlines(std::size_t level, Clock::time_point now, bool from_head) {
  auto& q = level_queue(level);
  const std::uint64_t head = q.head_position();
  std::uint64_t pos = from_head ? head : std::max(head, scanned_upto_[level]);
  auto earliest = queue_deadline_;
  for (; pos < head + q.capacity(); ++pos) {
    Pending* p = q.peek(pos);
    if (!p) break;
    if (p->resolved || p->deadline == Clock::time_point::max()) continue;
    if (gone(*p)) {
      p->resolved = true;
      continue;
    }
    if (p->deadline <= now) {
      if (!leave_to_watch(*p))
        fail_pending(*p, ErrorCode::deadline_exceeded, strand_expiry_text(*p, "in the queue"), strand_stats_.expired);
      p->resolved = true;
    } else {
      earliest = std::min(earliest, p->deadline);
    }
  }
  scanned_upto_[level] = pos;
  queue_deadline_ = earliest;
}

// The earliest request deadline among those the strand holds or has seen in the queues.
Clock::time_point ExecutorCore::next_deadline() const noexcept {
  return std::min(former_.earliest_deadline(), queue_deadline_);
}

BatchFormer<Pending>::Decision ExecutorCore::decide(Clock::time_point now) const {
  BatchFormer<Pending>::Input in;
  in.closing = closing_seen_;
  in.blocked_on_slot = blocked_on_slot_;
  in.predicted_device_time = cost_.predict(former_.bytes());
  return former_.decide(now, in);
}

// With a latency target: cap the next batches at what the device serves in target /
// (max_inflight_batches + 1), but not below what keeps up with the offered load (cost_model.hpp
// says why). At least one byte's worth, so that a batch always goes.
void ExecutorCore::apply_latency_target(Clock::time_point now) {
  if (config_.target_p99.count() <= 0) return;
  const QueueCounts queues = queue_counts();
  note_arrivals(now, queues);
  if (backlog_trend_on_) backlog_trend_.observe(now, queues.depth, drain_taken_ - trend_taken_);
  trend_taken_ = drain_taken_;
  // The offered load counts only while the queues keep growing: a closed loop (callers waiting for
  // their results) never outruns the device, and there the cap is what bounds a batch. Slow
  // growth (backlog_trend.hpp) lifts the cap until the backlog drained, and scales it after.
  const double arriving = growing_windows_ >= 2 ? arriving_bytes_per_s_ : 0.0;
  // A backlog that is new (backlog_trend.hpp drained_lately: the capped queue emptied lately; a
  // stall, a burst) and whose oldest request has waited half the target already misses it in
  // capped batches, each taking its turn and its fixed cost: the cap is lifted for it, so that
  // one batch takes it (docs/DESIGN.md "A latency target"). A closed loop's standing queue does
  // not empty under the cap, and keeps it.
  const bool behind = target_age_lift_ && backlog_trend_on_ && backlog_trend_.drained_lately() &&
                      now - former_.oldest() >= config_.target_p99 / 2;
  const std::size_t cap = behind || backlog_trend_.outrun()
                              ? std::numeric_limits<std::size_t>::max()
                              : backlog_trend_.scaled(cost_.byte_budget(batch_time_budget(config_), 1, arriving));
  if (cap == std::numeric_limits<std::size_t>::max()) backlog_trend_.note_uncapped();
  former_.set_byte_limit(cap);
  target_cap_.store(cap, std::memory_order_relaxed);
}

// Positions claimed in the queues so far (every push, accepted or waiting), and the requests
// waiting there (claimed, not yet taken by the strand).
ExecutorCore::QueueCounts ExecutorCore::queue_counts() noexcept {
  std::uint64_t positions = 0, popped = 0;
  for (std::size_t level = 0; level < level_count(); ++level) {
    positions += level_queue(level).pushed_approx();
    popped += level_queue(level).popped_approx();
  }
  return {positions, positions - std::min(positions, popped)};
}

void ExecutorCore::note_arrivals(Clock::time_point now, QueueCounts queues) {
  const std::uint64_t positions = queues.positions;
  if (arrival_window_ == Clock::time_point{}) {
    arrival_window_ = now;
    arrival_positions_ = positions;
    return;
  }
  const double seconds = std::chrono::duration<double>(now - arrival_window_).count();
  if (seconds < 1e-3 || taken_requests_ == 0) return;
  const double bytes_each = static_cast<double>(taken_bytes_) / static_cast<double>(taken_requests_);
  const double sample = static_cast<double>(positions - arrival_positions_) * bytes_each / seconds;
  arriving_bytes_per_s_ = arriving_bytes_per_s_ == 0.0 ? sample : 0.7 * arriving_bytes_per_s_ + 0.3 * sample;
  // Growing: the queues hold more than a window ago, by more than a quarter of what was taken
  // meanwhile (and 64 requests): what arrives outruns what is served.
  const std::uint64_t depth = queues.depth;
  const bool growing = depth > queued_before_ + std::max<std::uint64_t>(64, taken_requests_ / 4);
  growing_windows_ = growing ? growing_windows_ + 1 : 0;
  queued_before_ = depth;
  arrival_window_ = now;
  arrival_positions_ = positions;
  taken_bytes_ = taken_requests_ = 0;
}

void ExecutorCore::flush(FlushReason reason, Clock::time_point now, bool express, bool level0_only) {
  // No request whose deadline has passed reaches the device (the sweep may be rate-limited).
  expire_forming(now);
  if (former_.empty() || (express && former_.upper_size() == 0)) return;
  std::unique_ptr<Batch> batch = take_batch_from_pool();
  batch->id = next_batch_id_++;
  batch->reason = reason;
  batch->express = express;
  if (express) former_.take_upper(batch->items);
  else former_.take(batch->items, now, level0_only);  // the former keeps the pooled vector's capacity
  if (!express) note_taken(batch->items.size(), now);
  claim_or_drop(*batch);  // from here a cancellation no longer takes a request out
  const std::size_t n = batch->items.size();
  if (n && !express) drain_.flushed(now, now - batch->items.back().enqueued);
  if (n == 0) {  // every request of it was cancelled
    --next_batch_id_;
    return_batch_to_pool(std::move(batch));
    return;
  }

  batch->slot_halves = express ? 0 : slot_halves(batch->bytes, n);  // express: a slot of its own
  if (express) {
    express_inflight_.fetch_add(1, std::memory_order_seq_cst);
    express_batches_.fetch_add(1, std::memory_order_relaxed);
  }
  lone_streak_ = n <= kLoneBatch ? std::min(lone_streak_ + 1, kLoneStreak) : 0;
  inflight_halves_.fetch_add(batch->slot_halves, std::memory_order_seq_cst);
  inflight_slots_.fetch_add(1, std::memory_order_seq_cst);
  unresolved_batches_.fetch_add(1, std::memory_order_seq_cst);
  bump(strand_stats_.batches);
  bump(strand_stats_.flushes[static_cast<int>(reason)]);
  bump(strand_stats_.dispatched, static_cast<std::uint64_t>(n));

  if (!express && pack_elsewhere(batch)) return;  // src/executor/packer.cpp
  submit_batch(*batch);
  if (keep_for_caller(*batch)) {
    own_future_ = future_pass_;
    own_batch_ = batch.release();  // src/executor/own_batch.cpp
    return;
  }
  hand_to_completion(std::move(batch));
}

// A regular batch of `n` was taken: the count cap learns whether the executor is saturated
// (count_cap.hpp), and the former, the completion threads' polls, the in-flight limit
// (inflight_limit_) and a trace's "batch count limit" counter follow its limit when it changes.
void ExecutorCore::note_taken(std::size_t n, Clock::time_point now) noexcept {
  last_taken_ = n;
  const std::size_t before = count_cap_.limit();
  count_cap_.taken(n, now);
  if (count_cap_.limit() == before) return;
  former_.set_count_limit(count_cap_.limit());
  count_limit_.store(count_cap_.limit(), std::memory_order_relaxed);
  inflight_limit_.store(count_cap_.raised() ? saturated_inflight_ : max_inflight_, std::memory_order_relaxed);
  if (trace_.on()) {
    try {
      trace_.counter("batch count limit", now, static_cast<double>(count_cap_.limit()));
    } catch (...) {  // a trace event lost to memory is not worth a batch
    }
  }
}

bool ExecutorCore::fail_pending(Pending& p, ErrorCode code, const std::string& why,
                                std::atomic<std::uint64_t>& counter) noexcept {
  if (p.expiry && !p.expiry->take()) return false;
  bump(counter);  // counted first, so that whoever sees the result also sees it counted
  // Runs on the strand: handlers are posted (never run inline here).
  try {
    resolve_error(completion_of(p), make_error(code, why), true);
  } catch (...) {
    resolve_error(completion_of(p), std::current_exception(), true);
  }
  return true;
}

// A request whose deadline has passed, found by the strand while the watch holds its cell: the
// strand drops it and the watch, due to fail it now anyway, fails it. Failing it here (the error's
// text, the exception, the handler's post) cost the strand, which serves every batch, the time of
// the requests it should have been packing: on the H100, half the requests on a 2 ms deadline at
// 1,000,000/s, a strand that fell behind failed more and more of them itself and served 340,000
// requests/s instead of 998,000 (2026-11-27). Counted as unresolved until the watch resolves it,
// so that shutdown waits for it. True: dropped (left, or the watch had expired it already).
//
// Unless the watch is behind (its last expiry came more than GPUBATCH_WATCH_LAG_US, 1 ms by
// default, after its deadline):
// then the strand fails the request itself, as before. Failing them slows the strand, the queue
// fills, the callers wait for room and leave the watch the cores it needs to catch up; without
// that, on a machine that could not carry the load, callers kept every core busy and deadline
// errors came 0.4-1.5 s late where the strand failing them had them 70-90 ms late (H100, call 8).
bool ExecutorCore::leave_to_watch(Pending& p) noexcept {
  if (!strand_leaves_expiry_ || !p.expiry || !p.expiry->watched.load(std::memory_order_acquire)) return false;
  if (watch_lag_ns_.load(std::memory_order_relaxed) > watch_lag_limit_ns_) return false;
  unresolved_batches_.fetch_add(1, std::memory_order_seq_cst);  // before the watch can see it left
  if (!p.expiry->leave()) unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);  // expired already
  return true;
}

// The strand's own deadline error for `p` (leave_to_watch() said no), saying why the watch did
// not fail it, for whoever reads a late error: no watch, not yet watched, or the watch behind.
std::string ExecutorCore::strand_expiry_text(const Pending& p, const char* where) const {
  std::string why = describe(p.request) + ": its deadline passed while it waited " + where;
  if (!strand_leaves_expiry_ || !deadline_watch_on_) return why;
  if (!p.expiry || !p.expiry->watched.load(std::memory_order_acquire))
    return why + " (the deadline watch did not hold it yet)";
  return why + " (the deadline watch was behind)";
}

// Hands a request's deadline to the watch. Without a thread for it, the strand's sweeps still
// fail the request, later.
void ExecutorCore::watch_deadline(std::shared_ptr<ExpiryCell> cell) noexcept {
  try {
    deadline_watch_.add(std::move(cell));
  } catch (...) {
  }
}

// The deadline watch's thread: a request whose deadline has come and that the strand has not
// taken fails now. Counted like a batch in flight, so that shutdown waits for the resolution.
// A handler is dispatched here as on a completion thread (inline unless its executor says
// otherwise), not posted: a post is one more thread wake-up before the caller hears of it, which
// on a loaded 2-core machine was a good part of the lateness.
void ExecutorCore::on_deadline(ExpiryCell& cell) noexcept {
  unresolved_batches_.fetch_add(1, std::memory_order_seq_cst);
  watch_lag_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - cell.deadline).count(),
                      std::memory_order_relaxed);
  bool left = false;  // the strand dropped its request and counted it unresolved (leave_to_watch)
  if (cell.expire(&left)) {
    watch_expired_.fetch_add(1, std::memory_order_relaxed);
    try {
      // Requests of one shape expiring together share one exception (SharedError), per thread:
      // the watch and its helpers fail requests at once.
      thread_local SharedError expired;
      resolve_error(cell.completion,
                    expired.get(cell.shape, ErrorCode::deadline_exceeded, ": its deadline passed before it was submitted"),
                    false, this);
    } catch (...) {
      resolve_error(cell.completion, std::current_exception(), false, this);
    }
  }
  if (left) unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
  unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
  maybe_done();
}

// A round of due requests on the watch's thread and its helpers (HelperPool: up to three threads
// of their own, a quarter of the cores; the completion threads are busy exactly when requests
// expire by the thousand): failing one, and running its handler inline, is the whole cost of an
// expiry, and one thread alone fell behind by a second once requests expired by the hundred
// thousand a second (H100, BENCHMARKS.md fourth session of 2026-11-27).
void ExecutorCore::spread_expiry(std::size_t n, const std::function<void(std::size_t)>& each) {
  constexpr std::size_t kPerPart = 32;
  const std::size_t parts = expiry_spread_ ? std::max<std::size_t>(1, n / kPerPart) : 1;
  if (parts == 1) {
    for (std::size_t i = 0; i < n; ++i) each(i);
    return;
  }
  expiry_helpers_.run(parts, [&](std::size_t part) {
    for (std::size_t i = part * n / parts, end = (part + 1) * n / parts; i < end; ++i) each(i);
  });
}

void ExecutorCore::cancel_everything() {
  auto cancel = [this](Pending& p) {
    if (gone(p)) return;
    fail_pending(p, ErrorCode::shut_down,
                 describe(p.request) + ": cancelled by shutdown before it was submitted",
                 strand_stats_.cancelled);
  };
  former_.for_each(cancel);
  former_.clear();
  for (std::size_t level = 0; level < level_count(); ++level) {
    auto& queue = level_queue(level);
    for (;;) {
      const bool got = queue.try_consume_quiet([&](Pending&& p) {
        bump(strand_stats_.pulled);
        cancel(p);
      });
      if (got) continue;
      if (queue.has_claimed()) {
        queue.notify_space();  // the claimer may be waiting for a slot this round freed
        std::this_thread::yield();
        continue;
      }
      break;
    }
    queue.notify_space();
  }
}

// One timer: the former's next look (max_wait, or a deadline's early flush) unless it waits for
// a slot, and the next request deadline's expiry sweep (rate-limited to kSweepInterval).
void ExecutorCore::schedule_timer(Clock::time_point now) {
  auto target = Clock::time_point::max();
  const auto decision = decide(now);
  if (!blocked_on_slot_) {
    // A reason here means the strand stopped early; fire at once, or the batch would wait for the
    // next push or shutdown (seen under ASan: 30 s).
    target = decision.reason ? now : std::max(decision.wake_at, now);
  }
  if (const auto d = next_deadline(); d != Clock::time_point::max())
    target = std::min(target, std::max(d, last_sweep_ + kSweepInterval));
  target = std::min(target, std::max(express_hold_ends(), now));  // an express batch due
  if (target == timer_target_) return;
  timer_target_ = target;
  if (target == Clock::time_point::max()) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(target);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec == boost::asio::error::operation_aborted) return;
    bump(strand_stats_.timer_wakeups);
    timer_fired_.store(true, std::memory_order_seq_cst);
    kick();
  });
}


}  // namespace gpubatch::detail
