#pragma once
// The narrow seam between the executor and whatever runs its batches. The executor knows nothing
// of Vulkan: it hands a device the requests of one flush and later collects each one's result.
// src/gpu implements it for Vulkan; tests implement it to observe batches and inject faults.
// Both sides include this header and neither includes the other (src/gpu never includes
// src/executor, src/executor never includes src/gpu). It is installed because BatchExecutor's
// constructor and Device::batch_device() name BatchDevice; the `detail` namespace says it may
// change between versions.
#include <chrono>
#include <cstdlib>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gpubatch/ops.hpp"
#include "gpubatch/stats.hpp"

namespace gpubatch::detail {

class ParallelRunner;  // below

// One submitted batch. Owned by the executor until every result has been taken.
class InFlightBatch {
 public:
  virtual ~InFlightBatch() = default;
  // Waits up to `timeout` for the batch to finish; true when it has. Throws Error (device_lost,
  // ...) when the batch failed as a whole; each of its requests then fails with that error.
  virtual bool wait_for(std::chrono::nanoseconds timeout) = 0;
  // Whether the batch has finished, without blocking (true: as after a successful wait_for).
  // Throws like wait_for. Completion threads call it in a loop for a bounded time before they
  // block in wait_for (BatchConfig::completion_spin), so it should cost a memory read or two.
  virtual bool poll() { return wait_for(std::chrono::nanoseconds(0)); }
  // After a successful wait_for: moves request `index`'s result into `out` (which may hold a
  // buffer to reuse). Called at most once per index, possibly from several threads at once (for
  // different indices). By then the requests are the caller's again: it may have moved their
  // input buffers into `out`, so take_result must not read them.
  virtual void take_result(std::size_t index, Result& out) = 0;
  // The same, free to spread a large result's copy over `parallel` (the executor lends its
  // completion threads). A device that has nothing to spread takes it alone.
  virtual void take_result(std::size_t index, Result& out, ParallelRunner& parallel) {
    (void)parallel;
    take_result(index, out);
  }
  // Device execution time of the batch when the device measures it, else negative.
  virtual std::chrono::nanoseconds device_time() const { return std::chrono::nanoseconds(-1); }
  // For a watchdog's message: where the device stands with this unfinished batch (for Vulkan,
  // the timelines' counters against the values it waits for); empty when there is nothing to say.
  virtual std::string pending_state() { return {}; }
};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// GPUBATCH_POLL_PAUSE_US (0 .. 10000; default 5): how long poll_until spins with the pause hint,
// read once. A malformed value is refused with invalid_config when a Device or an executor is
// made (check_poll_pause, src/poll.cpp), so here it only falls back to the default.
inline constexpr long kDefaultPollPauseUs = 5;
inline bool parse_poll_pause(const char* env, long& us) noexcept {
  us = kDefaultPollPauseUs;
  if (env == nullptr || *env == '\0') return true;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 0 || v > 10000) return false;
  us = v;
  return true;
}
inline std::chrono::nanoseconds default_poll_pause() noexcept {
  static const std::chrono::nanoseconds pause = [] {
    long us = kDefaultPollPauseUs;
    parse_poll_pause(std::getenv("GPUBATCH_POLL_PAUSE_US"), us);
    return std::chrono::microseconds(us);
  }();
  return pause;
}
void check_poll_pause();

// Polls `batch` until it has finished (true) or `until` has passed (false), instead of blocking in
// the driver (whose wake-up costs 20-30 us on the H200). The first `pause_for` is a tight loop
// with the cpu's pause hint; after that each poll first yields the core to any thread that is
// ready. The tight part is kept short so that the core goes to other work soon (on lavapipe the
// device itself is CPU threads; 5 and 20 us measured the same there, within a noisy machine's
// spread); a yield that finds nothing else to run is one system call (about a microsecond, an
// estimate), small beside a small batch's 14 us round trip on the H200. Throws what poll()
// throws. Callers bound `until` (completion_spin).
inline bool poll_until(InFlightBatch& batch, std::chrono::steady_clock::time_point until,
                       std::chrono::nanoseconds pause_for = default_poll_pause()) {
  using Clock = std::chrono::steady_clock;
  const auto pause_until = Clock::now() + pause_for;
  for (;;) {
    if (batch.poll()) return true;
    const auto now = Clock::now();
    if (now >= until) return false;
    if (now < pause_until) {
      for (int i = 0; i < 8; ++i) cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

// Spreads independent pieces of one job over the caller's spare threads (the executor lends its
// completion threads): run(parts, work) calls work(0) ... work(parts - 1), some perhaps at once
// on other threads, and returns when every call has returned. `work` must not throw.
class ParallelRunner {
 public:
  virtual ~ParallelRunner() = default;
  // How many threads may run parts at once (the caller included); 1 runs everything inline.
  virtual std::size_t width() const = 0;
  virtual void run(std::size_t parts, const std::function<void(std::size_t)>& work) = 0;
};
// Runs every part on the calling thread.
inline ParallelRunner& inline_runner() noexcept {
  struct Inline final : ParallelRunner {
    std::size_t width() const override { return 1; }
    void run(std::size_t parts, const std::function<void(std::size_t)>& work) override {
      for (std::size_t i = 0; i < parts; ++i) work(i);
    }
  };
  static Inline runner;
  return runner;
}

// Data movement and work since the device was opened (the same fields the executor's stats show).
using TransferTotals = TransferCounts;

struct ResidentSettings {
  std::chrono::microseconds idle{1000};       // the kernel leaves after this long without work
  std::chrono::milliseconds watchdog{60000};  // a request unanswered this long: device_lost
};

class BatchDevice {
 public:
  virtual ~BatchDevice() = default;
  virtual std::string name() const = 0;
  // Largest input_bytes()+output_bytes() one request may have; larger ones are refused with
  // request_too_large before they reach submit().
  virtual std::size_t max_request_bytes() const = 0;
  // Packs the (already validated) requests into one submission, grouped by kernel. Throws Error
  // when the batch cannot be submitted at all (out_of_memory, device_lost); nothing then runs.
  virtual std::unique_ptr<InFlightBatch> submit(std::span<const Request* const> requests) = 0;
  // The same, free to spread its host-side work (copying inputs into staging) over `parallel`.
  virtual std::unique_ptr<InFlightBatch> submit(std::span<const Request* const> requests,
                                                ParallelRunner& parallel) {
    (void)parallel;
    return submit(requests);
  }
  // Chunked requests (DESIGN.md "Large requests"), optional. split_bytes(): requests of at least
  // this many input + output bytes may be offered to submit_split (0: none). submit_split: the
  // request as chunks that pipeline — its data moves through pinned memory chunk by chunk, driven
  // by wait_for() on the calling thread, the copies spread over `parallel` — or null when the
  // device does not split this one (its op, its size, no pinned memory free), the request then
  // untouched. A non-null batch may have taken the request's input vector (its result comes back
  // in that buffer); the request must live until the batch is destroyed. Throws as submit() does,
  // the request then untouched.
  virtual std::size_t split_bytes() const { return 0; }
  virtual std::unique_ptr<InFlightBatch> submit_split(Request& request, ParallelRunner& parallel) {
    (void)request;
    (void)parallel;
    return nullptr;
  }
  virtual TransferTotals transfers() const = 0;
  // Whether `request` may run here: false when it reads or writes a HostBuffer that another
  // device allocated (a device set routes such requests to their owner). Cheap; thread-safe.
  virtual bool can_run(const Request& request) const {
    (void)request;
    return true;
  }
  // How many devices stand behind this one, each taking max_inflight_batches batches: the
  // executor keeps max_inflight_batches times this many in flight (a device set: its members),
  // and awaits up to this many batches at once.
  virtual std::size_t inflight_multiplier() const { return 1; }
  // How many of max_inflight_batches this executor keeps in flight: inflight_multiplier(), or
  // fewer where several executors share the devices (one core per member of a set keeps one
  // device's worth each, src/executor/set_shard.hpp).
  virtual std::size_t slot_multiplier() const { return inflight_multiplier(); }
  // True when the device's work runs on the host's own cores (Mesa's lavapipe): a completion
  // thread polling it competes with the device for those cores, so the executor blocks at once
  // instead (BatchConfig::completion_spin applies to real devices only).
  virtual bool runs_on_host_cpu() const { return false; }
  // How many batch_timeout periods the executor's watchdog gives one batch before it fails it
  // with device_lost. A device set bounds each attempt itself and re-runs a lost member's batch
  // once elsewhere, so its batches may take two periods; the executor's watchdog stays a backstop.
  virtual std::size_t watchdog_periods() const { return 1; }
  // Per-device breakdown for Stats::devices (a device set: one entry per member). Empty: the
  // executor describes its one device itself.
  virtual std::vector<DeviceStats> device_stats() const { return {}; }
  // Called by the executor after a batch failed with device_lost (on submit, on wait, or by the
  // batch_timeout watchdog). A device whose underlying device really is lost re-creates it, so
  // that later submissions work again; batches still in flight keep what they use alive. Must be
  // safe to call concurrently with submit() and with itself, and cheap when nothing is lost.
  // May throw; the executor logs it and carries on (later submissions then fail on their own).
  virtual void recover() {}

  // Resident mode (BatchConfig::resident; DESIGN.md "Resident mode"), optional. start_resident
  // prepares a persistent kernel that serves small requests without a submission each; false
  // when the device cannot (it has logged why). Idempotent.
  virtual bool start_resident(const ResidentSettings& settings) {
    (void)settings;
    return false;
  }
  // One (validated) request for the resident kernel: a batch of one, or null when it does not
  // fit a slot, the ring is full, or resident mode is not running. Thread-safe. wait_for()
  // throws Error(device_lost) when the kernel stopped answering (settings.watchdog).
  virtual std::unique_ptr<InFlightBatch> try_submit_resident(const Request& request) {
    (void)request;
    return nullptr;
  }
};

}  // namespace gpubatch::detail
