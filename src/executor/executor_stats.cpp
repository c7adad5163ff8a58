// The executor's statistics snapshot (Stats; its Prometheus text is in stats.cpp).
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "executor/executor_core.hpp"
#include "executor/executor_internal.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {


// Per-level and per-op latency classes: every completion thread's histograms and the resident
// lane's, summed.
void ExecutorCore::class_stats(Stats& s) const {
  auto sum = [&](auto pick) {
    LatencyHistogram::Snapshot snap;
    for (const auto& c : completion_stats_) snap += pick(c->classes);
    return snap;
  };
  for (std::size_t level = 0; level < config_.priority_levels; ++level) {
    auto snap = sum([&](const ClassHistograms& h) -> const LatencyHistogram& { return h.by_level[level]; });
    if (level == 0) {
      snap += resident_stats_.classes.by_level[0];
      snap += direct_stats_.classes.by_level[0];
      snap += split_stats_.classes.by_level[0];
    }
    s.end_to_end_by_priority.push_back(latency_class(std::to_string(level), snap));
  }
  for (std::size_t op = 0; op < kOpCount; ++op) {
    auto snap = sum([&](const ClassHistograms& h) -> const LatencyHistogram& { return h.by_op[op]; });
    snap += resident_stats_.classes.by_op[op];
    snap += direct_stats_.classes.by_op[op];
    snap += split_stats_.classes.by_op[op];
    if (snap.count) s.end_to_end_by_op.push_back(latency_class(std::string(kOpTable[op].name), snap));
  }
}

std::uint64_t ExecutorCore::pushed_all_levels() const noexcept {
  std::uint64_t n = queue_.pushed_approx();
  for (const auto& q : upper_queues_) n += q->pushed_approx();
  return n;
}

Stats ExecutorCore::stats() const {
  Stats s;
  const auto load = [](const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
  };
  s.submitted = pushed_all_levels();
  s.rejected = load(rejected_);
  s.handler_exceptions = load(handler_exceptions_);
  s.expired = load(strand_stats_.expired) + load(watch_expired_);
  s.cancelled = load(strand_stats_.cancelled);
  const std::uint64_t dispatched = load(strand_stats_.dispatched);
  s.batches = load(strand_stats_.batches);
  s.flushes.size = load(strand_stats_.flushes[0]);
  s.flushes.deadline = load(strand_stats_.flushes[1]);
  s.flushes.idle = load(strand_stats_.flushes[2]);
  s.flushes.shutdown = load(strand_stats_.flushes[3]);
  LatencyHistogram::Snapshot qw, sl, dt, e2e;
  for (const auto& c : completion_stats_) {
    s.completed += load(c->completed);
    s.device_errors += load(c->failed);
    qw += c->queue_wait;
    sl += c->submit_latency;
    dt += c->device_time;
    e2e += c->end_to_end;
  }
  // Lane requests (resident_lane.cpp, direct_lane.cpp: whole or in chunks) never enter the queue:
  // they count as accepted and as having left it at once.
  std::uint64_t lanes = 0, lanes_cancelled = 0;
  for (const LaneStats* lane : {&resident_stats_, &direct_stats_, &split_stats_}) {
    lanes += load(lane->accepted);
    s.completed += load(lane->completed);
    s.device_errors += load(lane->failed);
    lanes_cancelled += load(lane->cancelled);
    e2e += lane->end_to_end;
  }
  s.submitted += lanes;
  s.resident = load(resident_stats_.completed);
  s.split = load(split_stats_.completed);
  s.direct = load(direct_stats_.completed) + s.split;
  s.cancelled += lanes_cancelled;
  s.failed = s.expired + s.cancelled + s.device_errors;
  const std::uint64_t left = dispatched + s.expired + s.cancelled - lanes_cancelled + lanes;
  s.queue_depth = s.submitted > left ? s.submitted - left : 0;
  s.inflight_batches = inflight_slots_.load(std::memory_order_relaxed);
  s.max_batch_size = config_.max_batch_size;
  s.mean_batch_size = s.batches ? static_cast<double>(dispatched) / static_cast<double>(s.batches) : 0.0;
  s.mean_fill = s.mean_batch_size / static_cast<double>(config_.max_batch_size);
  s.queue_wait = qw.summary();
  s.submit_latency = sl.summary();
  s.strand_runs = load(strand_stats_.runs);
  s.timer_wakeups = load(strand_stats_.timer_wakeups);
  s.strand_polls = load(strand_stats_.polls);
  s.strand_poll_hits = load(strand_stats_.poll_hits);
  s.caller_completions = load(caller_completions_);
  s.express_batches = load(express_batches_);
  s.device_time = dt.summary();
  s.end_to_end = e2e.summary();
  class_stats(s);
  s.cost_fixed = cost_.fixed();
  s.cost_ns_per_byte = cost_.ns_per_byte();
  if (config_.target_p99.count() > 0) {
    const auto budget = batch_time_budget(config_);
    const std::size_t set = target_cap_.load(std::memory_order_relaxed);  // the strand's, with its arrival rate
    const std::size_t cap = std::min(set ? set : cost_.byte_budget(budget, 1), config_.max_batch_bytes);
    s.target_batch_bytes = cap;
  }
  try {
    const TransferTotals t = device_->transfers();
    s.transfers = {t.uploads, t.downloads, t.bytes_up, t.bytes_down, t.dispatches, t.submissions};
  } catch (...) {
  }
  s.devices = device_stats_of(*device_, s, dispatched);  // src/executor/device_stats.cpp
  return s;
}


}  // namespace gpubatch::detail
