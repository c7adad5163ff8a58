// The executor's side of tracing (src/executor/trace.hpp records): what a finished batch
// contributes, GPUBATCH_TRACE, and BatchExecutor's start_trace / stop_trace.
#include "log.hpp"

#include <cstdlib>

#include "executor/executor_core.hpp"
#include "executor/set_shard.hpp"

namespace gpubatch {
namespace detail {
namespace {

const char* reason_name(FlushReason r) noexcept {
  switch (r) {
    case FlushReason::size: return "size";
    case FlushReason::deadline: return "deadline";
    case FlushReason::idle: return "idle";
    case FlushReason::shutdown: return "shutdown";
  }
  return "?";
}

}  // namespace

// Runs once per batch, on the completion thread that resolved its last chunk; the items are
// still there (their requests and completions moved out, their times kept).
void ExecutorCore::record_trace(const Batch& b) {
  if (b.items.empty()) return;
  TraceRecorder::BatchSpan span;
  span.id = b.id;
  span.requests = b.items.size();
  span.reason = b.express ? "express" : reason_name(b.reason);  // express: DESIGN.md "Priorities"
  span.failed = b.error != nullptr;
  span.oldest_arrival = b.items.front().enqueued;
  for (const Pending& p : b.items) {
    span.oldest_arrival = std::min(span.oldest_arrival, p.enqueued);
    span.upper += p.priority > 0 ? 1 : 0;
  }
  span.submit_begin = b.submitted;
  span.submit_end = b.submit_returned;
  span.device_done = b.done;
  span.resolved = Clock::now();
  if (b.gpu_time.count() >= 0) span.gpu_us = std::chrono::duration<double, std::micro>(b.gpu_time).count();
  trace_.batch(span);
  const std::size_t every = trace_.sample_every();
  for (std::size_t i = 0; i < b.items.size(); i += every)
    trace_.queue_wait(b.id, b.items[i].enqueued, b.submitted);
}

// On the deadline watch's thread after each round of expiries (DeadlineWatch::Round).
void ExecutorCore::trace_expiry_round(const DeadlineWatch::Round& round) {
  if (trace_.on()) trace_.expiry_round({round.first_due, round.woke, round.end, round.count});
}

void start_trace_from_environment(ExecutorCore& core, std::size_t shard) noexcept {
  const char* env = std::getenv("GPUBATCH_TRACE");
  if (!env || !*env) return;
  const std::string path = shard_trace_path(env, shard);
  try {
    core.start_trace(path, 64);
    log::info("gpubatch executor: tracing batches to {} (GPUBATCH_TRACE)", path);
  } catch (const std::exception& e) {
    log::warn("gpubatch executor: GPUBATCH_TRACE ignored: {}", e.what());
  }
}

}  // namespace detail

// A device set with a core per member traces each: shard k > 0 into the file named with
// ".shard<k>" before the extension (detail::shard_trace_path).
void BatchExecutor::start_trace(const std::filesystem::path& path, std::uint32_t sample_every) {
  if (!core_) throw Error(ErrorCode::shut_down, "start_trace: the executor was moved from");
  core_->start_trace(path, sample_every);
  if (const detail::ShardGroup* group = core_->shard_group())
    for (std::size_t k = 1; k < group->size(); ++k)
      group->others[k - 1]->start_trace(detail::shard_trace_path(path.string(), k), sample_every);
}

bool BatchExecutor::stop_trace() {
  if (!core_) return false;
  bool stopped = core_->stop_trace();
  if (const detail::ShardGroup* group = core_->shard_group())
    for (const auto& shard : group->others) stopped = shard->stop_trace() && stopped;
  return stopped;
}

}  // namespace gpubatch
