// The direct lane (DESIGN.md "Large requests"): a std::future's large request, made while the
// executor is busy, is submitted alone by its caller's thread (BatchDevice::submit is safe to
// call from several threads: Device::run does), awaited and resolved there, beside the batches.
//
// Why: a large request fills a batch on its own (max_batch_bytes), so batching buys it nothing,
// while the strand, one thread, packs every batch. On the H100 and the H200, 16 threads of
// 1,048,576-float relu from vectors: the strand was in submit() 94 % of the time (348 us a batch:
// its copy of 4 MiB of input), and the batched path moved 11-12 GB/s where the same callers each
// running their own request (--unbatched) moved 14-17. Neither more in-flight batches, more
// completion threads, copy threads of the strand's own nor streaming stores lifted it (docs/
// BENCHMARKS.md, fifth session of 2026-11-26). Here each caller copies its own input and result,
// as --unbatched does. An idle executor keeps the batched path (a lone request goes out at once
// there anyway, and the strand spreads its copy over the completion threads).
#include <memory>

#include "executor/executor_core.hpp"

namespace gpubatch::detail {

bool ExecutorCore::try_direct(Request& request, Completion& completion, Clock::time_point now) noexcept {
  if (!lanes_busy(request)) return false;
  large_running_.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<InFlightBatch> inflight = lane_submit([&] {
    const Request* one[] = {&request};
    return device_->submit(one);
  });
  if (!inflight) {
    large_running_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  direct_stats_.accepted.fetch_add(1, std::memory_order_relaxed);
  // The request stays the caller's (it lives until this call returns); the batch's watchdog.
  await_lane(request, completion, now, inflight, Clock::now(), watchdog_, "a large request's own batch", direct_stats_);
  large_running_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

// Chunked: the device cuts the request into chunks that pipeline (src/gpu/chunked_request.hpp);
// this thread drives them in await_lane's waits, their copies on the idle completion threads. It
// pays where those threads and the device are idle: one chunked request at a time, none beside
// batches in flight. Among 16 callers of 1,048,576-float relu (8 in flight each), with up to four
// at a time chunked, the rest on the direct lane, the load moved 11.4-11.5 GB/s against 12.6-13.1
// with chunks off (H100, third session of 2026-11-27, call 7); a lone 4,194,304-float request
// took 1.41-1.44 ms against 2.31-2.40 (call 5).
//
// Not beside other large requests on the lanes either: among 16 callers of 1,048,576-float relu
// (8 in flight each) one went in chunks whenever no batch was in flight, and the callers that came
// meanwhile found the executor idle and queued for the strand, which copied their inputs alone:
// the load moved 11.7-12.3 GB/s against 12.9-13.5 for the same callers unbatched (H100, sixth
// session of 2026-11-27, call 3).
bool ExecutorCore::try_split(Request& request, Completion& completion, Clock::time_point now) noexcept {
  if (inflight_slots_.load(std::memory_order_relaxed) != 0 ||
      (!lanes_busy_batches_only_ && large_running_.load(std::memory_order_relaxed) != 0))
    return false;
  if (splitting_.exchange(true, std::memory_order_acquire)) return false;
  std::unique_ptr<InFlightBatch> inflight = lane_submit([&] { return device_->submit_split(request, helpers_); });
  if (!inflight) {
    splitting_.store(false, std::memory_order_release);
    return false;
  }
  split_stats_.accepted.fetch_add(1, std::memory_order_relaxed);
  await_lane(request, completion, now, inflight, Clock::now(), watchdog_, "a chunked request", split_stats_);
  splitting_.store(false, std::memory_order_release);
  return true;
}

}  // namespace gpubatch::detail
