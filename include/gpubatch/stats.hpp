#pragma once
// A snapshot of what a BatchExecutor has done: request outcomes, batches and why they were
// flushed, latency percentiles, data moved. Counters only grow; latencies come from fixed
// log-linear histograms (about 6% relative resolution), so percentiles are approximate.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpubatch {

struct LatencySummary {
  std::uint64_t count = 0;  // samples
  std::chrono::nanoseconds mean{0};
  std::chrono::nanoseconds p50{0};
  std::chrono::nanoseconds p90{0};
  std::chrono::nanoseconds p99{0};
  std::chrono::nanoseconds max{0};
};

// One class of requests' end-to-end latency (a priority level, or an operation): the summary and
// cumulative counts at fixed upper bounds (Prometheus histogram buckets, `le`), each counted from
// the log-linear histogram's buckets that lie wholly below it (so within about 6% of exact).
struct LatencyClass {
  std::string label;  // "0", "1", ... for levels; the operation's name for ops
  LatencySummary summary;
  std::vector<std::pair<std::chrono::nanoseconds, std::uint64_t>> buckets;  // (le, count <= le)
};

struct FlushCounts {
  std::uint64_t size = 0;      // max_batch_size requests (or max_batch_bytes) were waiting
  std::uint64_t deadline = 0;  // the oldest waiting request had waited max_wait
  std::uint64_t idle = 0;      // adaptive: an in-flight slot was free
  std::uint64_t shutdown = 0;  // shutdown() drained the queue
  std::uint64_t total() const noexcept { return size + deadline + idle + shutdown; }
};

struct TransferCounts {
  std::uint64_t uploads = 0;    // upload passes
  std::uint64_t downloads = 0;  // download passes
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  std::uint64_t dispatches = 0;
  std::uint64_t submissions = 0;
};

// One device of the executor (one entry for a lone device; one per member of a device set, in
// the order they were given). A batch a lost member could not finish and another member re-ran
// counts on both: as a failover on the first, as a rerun (and a batch) on the second.
struct DeviceStats {
  std::string name;
  std::uint64_t batches = 0;   // batches submitted to it (re-runs it took included)
  std::uint64_t requests = 0;  // requests in those batches
  std::uint64_t bytes = 0;     // input + output bytes of those requests (a lone device: the
                               // bytes it moved up and down, from its transfer counters)
  std::uint64_t inflight_batches = 0;  // submitted to it, not yet finished
  std::uint64_t inflight_bytes = 0;    // their input + output bytes (what placement weighs;
                                       // 0 for a lone device, which has no placement)
  std::uint64_t losses = 0;     // times it was found lost (device_lost on submit, wait, watchdog)
  std::uint64_t failovers = 0;  // its batches re-run on another member after it was lost
  std::uint64_t reruns = 0;     // batches it ran for a lost member
  std::uint64_t recoveries = 0;  // recover() calls that brought it back into placement
  bool live = true;  // takes new batches (false: lost and not yet recovered, or dropped)
  TransferCounts transfers;  // from the device: every path that used it
};

struct Stats {
  // Requests. submitted = accepted into the queue; each accepted one ends completed or failed.
  // rejected = refused at the call (invalid, too large, queue full, shut down, deadline already
  // past); their futures hold the error.
  std::uint64_t submitted = 0;
  std::uint64_t completed = 0;  // resolved with a value
  std::uint64_t failed = 0;     // accepted, then resolved with an error (any cause below)
  std::uint64_t rejected = 0;
  std::uint64_t shed = 0;       // of rejected: a deadline the backlog ahead would have outlasted
                                // (BatchConfig::deadline_admission)
  std::uint64_t expired = 0;    // of failed: deadline passed while queued (never ran)
  std::uint64_t cancelled = 0;  // of failed: shutdown(cancel), or the request's cancellation slot
  std::uint64_t device_errors = 0;  // of failed: the batch failed on the device
  std::uint64_t resident = 0;       // of completed: served by the resident kernel (resident mode)
  std::uint64_t direct = 0;         // of completed: large requests run by their caller's thread
                                    // or the bulk lane's (BatchConfig::direct_bytes; and split)
  std::uint64_t split = 0;          // of direct: requests the device took in chunks that pipeline
                                    // (DeviceOptions::split_bytes)
  std::uint64_t queue_depth = 0;    // accepted, not yet in a batch (queue + forming batch)
  std::uint64_t inflight_batches = 0;
  // Completion handlers that threw on an executor thread (caught and logged; see
  // docs/RELIABILITY.md, "Completion handlers").
  std::uint64_t handler_exceptions = 0;

  // Batches.
  std::uint64_t batches = 0;  // flushes that reached the device
  FlushCounts flushes;
  std::size_t max_batch_size = 0;  // from the configuration
  double mean_batch_size = 0.0;
  double mean_fill = 0.0;  // mean_batch_size / max_batch_size

  // The strand that forms batches: how often it ran, and of those runs how many its timer
  // started (max_wait, a request deadline). An arrival to an idle executor with the adaptive
  // policy is flushed by the run its own push starts, never by the timer.
  std::uint64_t strand_runs = 0;
  std::uint64_t timer_wakeups = 0;
  // Times the strand's thread, idle after a lone caller's batch, polled for the next arrival
  // (completion_spin_us) instead of sleeping; and of those, how many an arrival ended.
  std::uint64_t strand_polls = 0;
  std::uint64_t strand_poll_hits = 0;
  // Of strand_runs, those a completion thread ran itself on freeing the slot the strand waited
  // for (a device of host cores only; GPUBATCH_HOST_DONE_STRAND=off: none).
  std::uint64_t strand_done_runs = 0;
  // Batches that the synchronous caller who submitted them (handle.run() on an idle executor)
  // polled and completed on its own thread, with no completion thread woken.
  std::uint64_t caller_completions = 0;
  // Batches of only requests above priority level 0, sent at once in the in-flight slot kept for
  // them (DESIGN.md "Priorities"; GPUBATCH_EXPRESS=off: none).
  std::uint64_t express_batches = 0;
  // Batches the packer thread laid out and submitted while the strand formed the next (batches of
  // many requests; DESIGN.md "Data flow", the packer; GPUBATCH_PACKER=off: none).
  std::uint64_t packed_batches = 0;

  // Latencies: queue wait (accepted -> batch submitted), submit (accepted -> its batch's device
  // submission returned: inputs staged, vkQueueSubmit done), device (batch submitted ->
  // completed, one sample per batch), end to end (accepted -> future resolved).
  LatencySummary queue_wait;
  LatencySummary submit_latency;
  LatencySummary device_time;
  LatencySummary end_to_end;
  // End to end by priority level (one entry per configured level) and by operation (only those
  // that had requests; chains count under "chain", custom kernels under "custom").
  std::vector<LatencyClass> end_to_end_by_priority;
  std::vector<LatencyClass> end_to_end_by_op;

  // The device's cost of a batch as the executor has learnt it (time = fixed + per_byte * bytes;
  // zeros until it has seen a few batches), and the byte cap target_p99 puts on a batch (0: none).
  std::chrono::nanoseconds cost_fixed{0};
  double cost_ns_per_byte = 0.0;
  std::uint64_t target_batch_bytes = 0;
  // Requests a regular batch may take now: latency_batch_size until the executor has been
  // saturated for a while, then max_batch_size (BatchConfig::latency_batch_size).
  std::uint64_t batch_count_limit = 0;
  // Batches that may be in flight now: max_inflight_batches, or twice that while the adaptive
  // policy is saturated (the count limit raised; not with priority levels or target_p99). With
  // a core per member of a device set, the first core's.
  std::uint64_t inflight_limit = 0;

  TransferCounts transfers;  // from the device: every path that used it, not only this executor
                             // (a device set: the sum over its members)
  // Per device (one entry for a lone device; a device set's members in order). Health: a member
  // with live == false takes no batches until it recovers.
  std::vector<DeviceStats> devices;
};

// Prometheus text exposition (version 0.0.4) of a snapshot; every metric name starts with
// `prefix` (default "gpubatch").
std::string to_prometheus(const Stats& stats, std::string_view prefix = "gpubatch");

}  // namespace gpubatch
