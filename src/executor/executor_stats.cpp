// The executor's statistics snapshot (Stats; its Prometheus text is in stats.cpp).
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>

#include "executor/executor_core.hpp"
#include "executor/executor_internal.hpp"
#include "executor/set_shard.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {


// What each core adds up; several cores (the shards of a device set) add into one.
struct ExecutorCore::StatsSums {
  std::uint64_t submitted = 0, rejected = 0, shed = 0, handler_exceptions = 0, expired = 0, cancelled = 0;
  std::uint64_t dispatched = 0, batches = 0, flushes[4]{}, completed = 0, device_errors = 0;
  std::uint64_t lanes = 0, lanes_cancelled = 0, resident = 0, split = 0, direct = 0, inflight = 0;
  std::uint64_t runs = 0, timer_wakeups = 0, polls = 0, poll_hits = 0, done_runs = 0, caller_completions = 0, express = 0;
  LatencyHistogram::Snapshot qw, sl, dt, e2e;
  std::vector<LatencyHistogram::Snapshot> by_level, by_op;
};

// Per-level and per-op latency classes: every completion thread's histograms and the lanes'.
void ExecutorCore::add_class_stats(StatsSums& x) const {
  x.by_level.resize(std::max(x.by_level.size(), config_.priority_levels));
  x.by_op.resize(kOpCount);
  for (const auto& c : completion_stats_) {
    for (std::size_t level = 0; level < config_.priority_levels; ++level) x.by_level[level] += c->classes.by_level[level];
    for (std::size_t op = 0; op < kOpCount; ++op) x.by_op[op] += c->classes.by_op[op];
  }
  for (const LaneStats* lane : {&resident_stats_, &direct_stats_, &split_stats_}) {
    x.by_level[0] += lane->classes.by_level[0];
    for (std::size_t op = 0; op < kOpCount; ++op) x.by_op[op] += lane->classes.by_op[op];
  }
}

std::uint64_t ExecutorCore::pushed_all_levels() const noexcept {
  std::uint64_t n = queue_.pushed_approx();
  for (const auto& q : upper_queues_) n += q->pushed_approx();
  return n;
}

void ExecutorCore::add_stats(StatsSums& x) const {
  const auto load = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  x.submitted += pushed_all_levels();
  // The watch counts its expiry a moment after the caller that waited for room sees it (on_deadline,
  // refuse_unqueued): the difference saturates rather than wrap in that moment.
  const std::uint64_t unqueued = load(watch_expired_unqueued_), watched = load(watch_expired_);
  x.rejected += load(rejected_) + unqueued;
  x.shed += load(shed_);
  x.handler_exceptions += load(handler_exceptions_);
  x.expired += load(strand_stats_.expired) + (watched > unqueued ? watched - unqueued : 0);
  x.cancelled += load(strand_stats_.cancelled);
  x.dispatched += load(strand_stats_.dispatched);
  x.batches += load(strand_stats_.batches);
  for (int i = 0; i < 4; ++i) x.flushes[i] += load(strand_stats_.flushes[i]);
  for (const auto& c : completion_stats_) {
    x.completed += load(c->completed);
    x.device_errors += load(c->failed);
    x.qw += c->queue_wait;
    x.sl += c->submit_latency;
    x.dt += c->device_time;
    x.e2e += c->end_to_end;
  }
  // Lane requests (resident_lane.cpp, direct_lane.cpp: whole or in chunks) never enter the queue:
  // they count as accepted and as having left it at once.
  for (const LaneStats* lane : {&resident_stats_, &direct_stats_, &split_stats_}) {
    x.lanes += load(lane->accepted);
    x.completed += load(lane->completed);
    x.device_errors += load(lane->failed);
    x.lanes_cancelled += load(lane->cancelled);
    x.e2e += lane->end_to_end;
  }
  x.resident += load(resident_stats_.completed);
  x.split += load(split_stats_.completed);
  x.direct += load(direct_stats_.completed);
  x.inflight += inflight_slots_.load(std::memory_order_relaxed);
  x.runs += load(strand_stats_.runs);
  x.timer_wakeups += load(strand_stats_.timer_wakeups);
  x.polls += load(strand_stats_.polls);
  x.poll_hits += load(strand_stats_.poll_hits);
  x.done_runs += load(strand_stats_.done_runs);
  x.caller_completions += load(caller_completions_);
  x.express += load(express_batches_);
  add_class_stats(x);
}

Stats ExecutorCore::stats() const {
  StatsSums x;
  add_stats(x);
  if (shard_group_)
    for (const auto& shard : shard_group_->others) shard->add_stats(x);
  Stats s;
  fill_counts(x, s);
  fill_latencies(x, s);
  fill_device_model(s);
  try {
    const TransferTotals t = device_->transfers();  // a set's shards share its members: once
    s.transfers = {t.uploads, t.downloads, t.bytes_up, t.bytes_down, t.dispatches, t.submissions};
  } catch (...) {
  }
  s.devices = device_stats_of(*device_, s, x.dispatched);  // src/executor/device_stats.cpp
  return s;
}

// Requests by outcome, batches, flushes and the strand's runs.
void ExecutorCore::fill_counts(const StatsSums& x, Stats& s) const {
  s.submitted = x.submitted + x.lanes;
  s.rejected = x.rejected;
  s.shed = x.shed;
  s.handler_exceptions = x.handler_exceptions;
  s.expired = x.expired;
  s.cancelled = x.cancelled + x.lanes_cancelled;
  s.batches = x.batches;
  s.flushes = {x.flushes[0], x.flushes[1], x.flushes[2], x.flushes[3]};
  s.completed = x.completed;
  s.device_errors = x.device_errors;
  s.resident = x.resident;
  s.split = x.split;
  s.direct = x.direct + x.split;
  s.failed = s.expired + s.cancelled + s.device_errors;
  const std::uint64_t left = x.dispatched + s.expired + s.cancelled - x.lanes_cancelled + x.lanes;
  s.queue_depth = s.submitted > left ? s.submitted - left : 0;
  s.inflight_batches = x.inflight;
  s.max_batch_size = config_.max_batch_size;
  s.mean_batch_size = s.batches ? static_cast<double>(x.dispatched) / static_cast<double>(s.batches) : 0.0;
  s.mean_fill = s.mean_batch_size / static_cast<double>(config_.max_batch_size);
  s.strand_runs = x.runs;
  s.timer_wakeups = x.timer_wakeups;
  s.strand_polls = x.polls;
  s.strand_poll_hits = x.poll_hits;
  s.strand_done_runs = x.done_runs;
  s.caller_completions = x.caller_completions;
  s.express_batches = x.express;
  s.packed_batches = packed_batches_.load(std::memory_order_relaxed);
}

// The latency summaries, and end to end by priority level and by operation.
void ExecutorCore::fill_latencies(const StatsSums& x, Stats& s) const {
  s.queue_wait = x.qw.summary();
  s.submit_latency = x.sl.summary();
  s.device_time = x.dt.summary();
  s.end_to_end = x.e2e.summary();
  for (std::size_t level = 0; level < config_.priority_levels; ++level)
    s.end_to_end_by_priority.push_back(latency_class(std::to_string(level), x.by_level[level]));
  for (std::size_t op = 0; op < kOpCount; ++op)
    if (x.by_op[op].count) s.end_to_end_by_op.push_back(latency_class(std::string(kOpTable[op].name), x.by_op[op]));
}

// What the cost model has learnt, and the batch bytes it allows under target_p99.
void ExecutorCore::fill_device_model(Stats& s) const {
  s.cost_fixed = cost_.fixed();
  s.cost_ns_per_byte = cost_.ns_per_byte();
  s.batch_count_limit = count_limit_.load(std::memory_order_relaxed);
  s.inflight_limit = inflight_limit_.load(std::memory_order_relaxed);
  if (config_.target_p99.count() == 0) return;
  const auto budget = batch_time_budget(config_);
  const std::size_t set = target_cap_.load(std::memory_order_relaxed);  // the strand's, with its arrival rate
  s.target_batch_bytes = std::min(set ? set : cost_.byte_budget(budget, 1), config_.max_batch_bytes);
}

}  // namespace gpubatch::detail
