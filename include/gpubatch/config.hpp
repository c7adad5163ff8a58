#pragma once
// How a BatchExecutor forms batches: size and wait limits, flush policy, queue capacity and
// back-pressure, in-flight batches. Start from a preset, override from a TOML file of the user's,
// then from GPUBATCH_<KEY> environment variables; validate() says which key is wrong.
//
//   auto config = gpubatch::BatchConfig::from_file("my.toml").apply_environment();
//
// File keys (every one optional; `preset` first picks the base, the others override it):
//   preset               "latency" | "balanced" | "throughput" | "adaptive" | "realtime" (without
//                        it, the defaults: adaptive)
//   max_batch_size       requests per batch (1 .. 1048576)
//   latency_batch_size   0 (off) or requests: with the adaptive policy a batch takes at most this
//                        many until the executor has been saturated for 10 ms (every batch full
//                        at this cap), then up to max_batch_size until batches under it have gone
//                        on for 10 ms; 1024 by default (DESIGN.md "Scheduling")
//   max_wait_us          the oldest waiting request is flushed after this long (microseconds)
//   policy               "deadline" | "adaptive" (adaptive also flushes whenever an in-flight
//                        slot is free)
//   queue_capacity       requests the submission queue holds before back-pressure applies
//   max_inflight_batches batches submitted to the device and not yet completed (adaptive:
//                        twice this many once saturated, without priority levels or a
//                        latency target; DESIGN.md "Twice the batches in flight once saturated")
//   overflow             "block" | "block_for" | "reject": what a full queue does to a caller
//   block_timeout_us     how long `block_for` waits before failing with queue_full
//   block_slice_us       0, or 100 .. 100000: the scheduler slice a caller's thread asks for
//                        while it waits for room until an instant (`block_for`, or `block` with
//                        a deadline), and gives back after (Linux 6.12+, no privilege needed):
//                        woken at its timeout among busy threads it runs within about this
//                        long, not a system slice (~3 ms) later; 100 by default, 0 leaves the
//                        thread's own (DESIGN.md "Overflow")
//   max_batch_bytes      input + output bytes of one batch (a larger request goes alone; on one
//                        device bytes of HostBuffers count an eighth: no staging, no CPU copy)
//   completion_threads   threads that wait for batches, resolve their futures, and copy the
//                        inputs of large batches beside the strand (on a device of host cores,
//                        such as lavapipe, at most half the usable cores: Executor::config() says)
//   batch_timeout_ms     a batch not complete after this long fails with device_lost
//   completion_spin_us   how long a completion thread polls a submitted batch before it blocks
//                        (0: block at once); 0 .. 10000
//   resident             true | false: small requests that find the executor idle go to a
//                        persistent kernel (DESIGN.md "Resident mode"), the rest are batched
//   resident_idle_us     the resident kernel (and the thread that waits for it) leaves after
//                        this long without a request
//   lone_future_waits    true | false: a call that returns a std::future on an idle executor
//                        submits its request itself and returns once the result is in, so the
//                        future comes back ready and its caller never sleeps in get() (one device
//                        round trip inside the call; DESIGN.md "The lone caller"). true in
//                        adaptive, latency and realtime; false in balanced and throughput
//   direct_bytes         0 (off) or bytes: a std::future's request of at least this many input +
//                        output bytes, made while the executor is busy, runs on its caller's
//                        thread beside the batches and comes back ready (DESIGN.md "Large
//                        requests"); 2 MiB in every preset
//   priority_levels      1 .. 8: levels a request may name (SubmitOptions::priority 0 .. n-1;
//                        higher goes first; DESIGN.md "Scheduling")
//   priority_aging_us    a request that has waited this long goes into the next batch whatever
//                        its level (bounds the wait of lower levels under a stream of higher ones)
//   level_queue_capacity "a,b,...", one number per level: that level's queue (0 or absent:
//                        queue_capacity)
//   level_timeout_us     "a,b,...", one number per level: the deadline of a request of that
//                        level that names none, counted from its submission (0 or absent: none)
//   target_p99_us        0 (off) or a latency target: batches are capped at the bytes the
//                        device's learnt cost model serves in target / (max_inflight_batches
//                        + 1) (DESIGN.md "Scheduling")
//   devices              "all" | "0,1" | "0,0" | "h100,a100": the devices BatchExecutor(config)
//                        opens (indices or name substrings; DESIGN.md "Several devices"); empty
//                        (the default): GPUBATCH_DEVICES, else one device
//   shard_per_device     true | false: a device set runs one executor core per member, each
//                        calling thread keeping to one (DESIGN.md "Several devices"); true by
//                        default; false: one core for the whole set (so does resident mode)
//   deadline_admission   true | false: a request with a deadline that the backlog ahead of it
//                        would outlast is refused at the call with deadline_exceeded; true by
//                        default (DESIGN.md "Deadlines")
//   thread_nice          -20 .. 19: the nice value of the executor's own threads (strand,
//                        completion threads, deadline watch and its helpers, packer, resident and bulk
//                        lanes); 0 (the default)
//                        leaves them as made. Below 0 needs CAP_SYS_NICE or RLIMIT_NICE; without
//                        it the log says so once and the threads keep their priority. Where
//                        callers' threads take every core, it keeps the executor's threads from
//                        waiting for one (DESIGN.md "Scheduling")
//   thread_slice_us      0, or 100 .. 100000: the scheduler slice the executor's own threads ask
//                        of Linux's EEVDF scheduler (kernel 6.12 or later; sched_attr's
//                        sched_runtime, no privilege needed): a short slice lets a thread that
//                        wakes run before callers' threads that have used their turn, without
//                        giving it a larger share of the CPU. 0 leaves the system's; where the
//                        kernel ignores it the log says so once (DESIGN.md "Scheduling")
// Environment: GPUBATCH_PRESET, GPUBATCH_MAX_BATCH_SIZE, GPUBATCH_MAX_WAIT_US, GPUBATCH_POLICY,
// GPUBATCH_QUEUE_CAPACITY, GPUBATCH_MAX_INFLIGHT_BATCHES, GPUBATCH_OVERFLOW,
// GPUBATCH_BLOCK_TIMEOUT_US, GPUBATCH_BLOCK_SLICE_US, GPUBATCH_MAX_BATCH_BYTES, GPUBATCH_COMPLETION_THREADS,
// GPUBATCH_BATCH_TIMEOUT_MS, GPUBATCH_COMPLETION_SPIN_US, GPUBATCH_RESIDENT (1/0, true/false,
// on/off), GPUBATCH_RESIDENT_IDLE_US, GPUBATCH_LONE_FUTURE_WAITS (like GPUBATCH_RESIDENT), GPUBATCH_DIRECT_BYTES, GPUBATCH_PRIORITY_LEVELS, GPUBATCH_PRIORITY_AGING_US,
// GPUBATCH_TARGET_P99_US, GPUBATCH_LEVEL_QUEUE_CAPACITY and GPUBATCH_LEVEL_TIMEOUT_US (comma-separated, one per level),
// GPUBATCH_LATENCY_BATCH_SIZE, GPUBATCH_DEVICES, GPUBATCH_THREAD_NICE, GPUBATCH_SHARD_PER_DEVICE and GPUBATCH_DEADLINE_ADMISSION (like
// GPUBATCH_RESIDENT).
#include <array>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpubatch {

enum class FlushPolicy {
  deadline,  // flush when max_batch_size requests wait or the oldest has waited max_wait
  adaptive,  // also flush as soon as an in-flight slot is free (the GPU would otherwise idle)
};

enum class OverflowPolicy {
  block,      // a caller waits for room in the queue
  block_for,  // waits up to block_timeout, then the request fails with queue_full
  reject,     // the request fails with queue_full at once
};

std::string_view to_string(FlushPolicy policy) noexcept;
std::string_view to_string(OverflowPolicy policy) noexcept;
std::optional<FlushPolicy> flush_policy_from_string(std::string_view name) noexcept;
std::optional<OverflowPolicy> overflow_policy_from_string(std::string_view name) noexcept;

// BatchConfig::devices (and GPUBATCH_DEVICES) split into its items: {"all"}, or each index or
// name substring, blanks around it trimmed, in order (repeats kept: "0,0" is device 0 twice).
// Throws Error(invalid_config) naming `where` for an empty list or item, "all" beside other items,
// or an item with characters other than letters, digits, blanks and "-_.()".
std::vector<std::string> parse_device_list(std::string_view list, std::string_view where = "devices");

// The defaults (BatchConfig{}, a file without `preset`) are the `adaptive` preset: it flushes as
// soon as the device has a free slot, so a lone caller never waits for a batch to fill, and under
// load batches grow on their own; it measured best in every regime (DESIGN.md).
struct BatchConfig {
  std::size_t max_batch_size = 4096;
  std::chrono::microseconds max_wait{5000};
  FlushPolicy policy = FlushPolicy::adaptive;
  std::size_t queue_capacity = 32768;
  std::size_t max_inflight_batches = 2;
  OverflowPolicy overflow = OverflowPolicy::block;
  std::chrono::microseconds block_timeout{10000};
  // The EEVDF slice a caller's thread asks for while it waits for room until an instant (0: its
  // own; else 100 us .. 100 ms). DESIGN.md "Overflow" gives the measurements.
  std::chrono::microseconds block_slice{100};
  // 8 MiB: large requests move fastest in small batches that pipeline (4 MiB and up take half an
  // in-flight slot); a full batch of 4096 256-float requests is exactly 8 MiB. On the H200, 16
  // threads of 65,536-float relu: 8.7 GB/s with 512 MiB batches, 13.9 GB/s with 8 MiB ones (4 in
  // flight); docs/BENCHMARKS.md "Large requests: batch bytes and depth". Bytes read and written in
  // place (HostBuffers) weigh an eighth (docs/DESIGN.md "Large requests").
  std::size_t max_batch_bytes = std::size_t{8} << 20;
  std::size_t completion_threads = 4;  // big batches under load: four threads share the work
  std::chrono::milliseconds batch_timeout{60000};
  // A completion thread polls the batch it waits for this long (pause, then yield) before it
  // blocks in the driver: a blocking wait's wake-up costs 20-30 us on the H200 (submit + spin
  // round trip 14 us, submit + blocking wait 43 us). Only a lone caller's batch or a full one,
  // and only while it is in flight, so an idle executor spins not at all; the price is up to
  // this much CPU per such batch (docs/DESIGN.md "Polling").
  std::chrono::microseconds completion_spin{200};
  bool resident = false;
  std::chrono::microseconds resident_idle{1000};
  std::chrono::microseconds target_p99{0};  // 0: no latency target
  // Priorities: levels 0 (the default) .. priority_levels - 1 (the most urgent).
  static constexpr std::size_t kMaxPriorityLevels = 8;
  std::size_t priority_levels = 1;
  std::chrono::microseconds priority_aging{50000};
  std::array<std::size_t, kMaxPriorityLevels> level_queue_capacity{};         // 0: queue_capacity
  std::array<std::chrono::microseconds, kMaxPriorityLevels> level_timeout{};  // 0: none
  std::size_t queue_capacity_of(std::size_t level) const noexcept {
    return level_queue_capacity[level] ? level_queue_capacity[level] : queue_capacity;
  }
  // The devices BatchExecutor(config) opens: "all", or comma-separated indices / name substrings
  // (parse_device_list). Ignored by the constructors that are given their devices.
  std::string devices;
  // The executor's threads' nice value (-20 .. 19; 0: unchanged).
  int thread_nice = 0;
  // The EEVDF slice the executor's threads ask for (0: the system's; else 100 us .. 100 ms).
  std::chrono::microseconds thread_slice{0};
  // A future asked of an idle executor comes back ready: the call submits the request on its own
  // thread (as it already did) and then waits for that lone batch itself, polling for
  // completion_spin, before it returns. Without it the call returns at once and its caller, in
  // future::get(), sleeps until a completion thread that polled the batch wakes it: on the H100
  // that OS wake-up made a lone future 28-31 us against 17-19 us for handle.run() (DESIGN.md "The
  // lone caller"). Only when nothing is in flight or forming, and only for a request of at most
  // 64 KiB, so a crowd's calls never wait; the price is that a caller who does other work before
  // get() does it one round trip later.
  bool lone_future_waits = true;
  // A std::future's (or handle.run()'s) request of at least this many input + output bytes, made
  // while the executor is busy, runs on its caller's thread: submitted to the device alone, awaited and resolved
  // inside the call (the future comes back ready), beside the batches. Such a request fills a
  // batch on its own, and the strand, one thread, packs every batch: on the H100 and the H200
  // 16 callers of 1,048,576-float relu from vectors moved 11-12 GB/s batched against 14-17 when
  // each ran its own (DESIGN.md "Large requests"). 0: never. Not for handlers, requests with a
  // deadline or a priority above 0, nor on a device set. 2 MiB: from 262,144-float relu up
  // (4 MiB until the sixth session of 2026-11-27; DESIGN.md "Large requests" says why).
  std::size_t direct_bytes = std::size_t{2} << 20;
  // A device set of several members runs one executor core per member (its own queues, strand,
  // completion threads and lanes), each calling thread keeping to one of them, all placing their
  // batches on the one shared set (DESIGN.md "Several devices"): two H100s carried 1.7-2.4x the
  // 256-float requests of one core. false: one core for the whole set. Ignored with one device
  // and in resident mode (its kernel runs on member 0, which every thread must reach).
  bool shard_per_device = true;
  // A request with a deadline that would wait past it before it is batched is refused at the call
  // with deadline_exceeded (before its deadline) instead of waiting to expire (DESIGN.md
  // "Deadlines": admission). Predicted from the requests ahead of it at the rate the strand took
  // requests while behind, and from the wait of the newest requests of the last batches; only
  // behind requests already waiting, with signals from the last 50 ms (an executor that has not
  // been behind lately refuses nothing). false: every request with a deadline is queued.
  bool deadline_admission = true;
  // With the adaptive policy, a regular batch takes at most this many requests while the
  // executor keeps up with what arrives, and up to max_batch_size once it has been saturated for
  // 10 ms (batch after batch full at this cap), until batches under this many have gone on for
  // 10 ms. Behind a backlog of a few milliseconds, batches of 4,096 256-float requests took 2-3 ms
  // to pack and complete, every request in them waiting as long; a crowd that keeps the device
  // saturated still gets the larger batches, which carried 6-13 % more on the H200 (DESIGN.md
  // "Scheduling", "A smaller batch until saturated"). 0, or at least max_batch_size: off.
  std::size_t latency_batch_size = 1024;

  // Presets (DESIGN.md): latency 256 / 1 ms, balanced 1024 / 5 ms, throughput 2048 / 10 ms,
  // adaptive (the default, BatchConfig{}) up to 4096, flushing whenever the device has a free slot.
  static BatchConfig latency();
  static BatchConfig balanced();
  static BatchConfig throughput();
  static BatchConfig adaptive();
  // adaptive() plus resident mode: a lone small request is served by a persistent kernel.
  static BatchConfig realtime();
  static constexpr std::array<std::string_view, 5> preset_names{"latency", "balanced",
                                                                "throughput", "adaptive", "realtime"};
  // Throws Error(invalid_config) naming an unknown preset.
  static BatchConfig preset(std::string_view name);

  // Reads a TOML file (keys above). Throws Error(invalid_config) naming the file and the key:
  // unreadable file, syntax error, unknown key, wrong type, negative or out-of-range value. The
  // result is validated.
  static BatchConfig from_file(const std::filesystem::path& path);
  // The same from TOML text; `source` names it in messages.
  static BatchConfig from_string(std::string_view toml, std::string_view source = "<string>");

  // Overrides fields from GPUBATCH_<KEY> variables (GPUBATCH_PRESET first replaces the whole
  // configuration with that preset), then validates. Throws Error(invalid_config) naming the
  // variable. Returns *this.
  BatchConfig& apply_environment();
  // The default (adaptive) configuration, or `base`, with the environment applied.
  static BatchConfig from_environment(BatchConfig base = adaptive());

  // Throws Error(invalid_config) naming the first key whose value is not allowed.
  void validate() const;

  friend bool operator==(const BatchConfig&, const BatchConfig&) = default;
};

}  // namespace gpubatch
