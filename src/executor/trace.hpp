#pragma once
// Records what the executor did as Chrome trace events (a JSON object with `traceEvents`; opens in
// Perfetto and chrome://tracing): per batch its formation (oldest request's arrival to submit),
// the submit call on the strand, its device time and its completion (results taken and futures
// resolved), for a sample of requests their queue wait, and every run of the strand (which thread
// held it, what it pulled and flushed, whether it stopped for want of a free slot): a batch that
// waited long to form shows whether the strand ran meanwhile. The deadline watch's rounds have a
// track of their own (how many requests each failed, how late it began). A counter track shows the strand's
// batch count limit when it changes (latency_batch_size until saturated). Batches overlap (several in flight),
// so everything but the strand's submit calls is an async event (one track per kind in Perfetto).
//
// Off, it costs one relaxed load per batch. On, one mutex per batch (not per request): a batch is
// recorded whole when its last chunk has resolved. Events are kept in memory and written by
// stop(); past kMaxEvents new batches are counted as dropped, not recorded.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace gpubatch::detail {

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxEvents = 1000000;

  struct BatchSpan {
    std::uint64_t id = 0;
    std::size_t requests = 0;
    std::size_t upper = 0;  // of them, requests above priority level 0
    const char* reason = "";
    bool failed = false;
    Clock::time_point oldest_arrival, submit_begin, submit_end, device_done, resolved;
    // The GPU's own time for the batch (GPUBATCH_GPU_TIMESTAMPS=on), else negative: tells a
    // long "device" span that the GPU ran late or slowly from one whose end was seen late.
    double gpu_us = -1;
  };

  // Starts recording into memory for `path` (replacing an earlier recording that was not
  // stopped). Throws Error(invalid_config) when the file cannot be created.
  void start(const std::filesystem::path& path, std::uint32_t sample_every);
  // Writes the file and stops; false (and a logged warning) when there was nothing to stop or
  // the file could not be written. Safe with recording threads running.
  bool stop();
  bool on() const noexcept { return on_.load(std::memory_order_relaxed); }
  // Every `sample_every`-th request of a batch gets a queue-wait event.
  std::uint32_t sample_every() const noexcept { return sample_every_.load(std::memory_order_relaxed); }

  void batch(const BatchSpan& span);
  void queue_wait(std::uint64_t batch_id, Clock::time_point arrival, Clock::time_point submitted);

  // One run of the strand (run_strand's process()): on the io thread or a caller's (inline).
  struct StrandRun {
    Clock::time_point begin, end;
    bool io_thread = true;
    std::uint64_t pulled = 0, batches = 0;
    std::size_t forming = 0;  // requests the former holds after the run
    bool blocked_on_slot = false;
  };
  void strand_run(const StrandRun& run);
  // One round of the deadline watch (a track of its own): the requests it failed, from when it
  // looked to when the last was failed, and how late it looked after the earliest deadline among
  // them (a late OS wake-up of the watch's thread, or the round before it still running).
  struct ExpiryRound {
    Clock::time_point first_due, woke, end;
    std::size_t count = 0;
  };
  void expiry_round(const ExpiryRound& round);
  // A counter track (Perfetto draws it as a line): `name` took `value` at `t`. The strand's
  // count limit (latency_batch_size until saturated) when it changes.
  void counter(const char* name, Clock::time_point t, double value);

 private:
  double us(Clock::time_point t) const noexcept;
  void async_span(const char* name, std::uint64_t id, Clock::time_point begin, Clock::time_point end,
                  const std::string& args);

  std::atomic<bool> on_{false};
  std::atomic<std::uint32_t> sample_every_{64};
  std::mutex mutex_;
  std::filesystem::path path_;
  Clock::time_point origin_{};
  // The events, each a JSON object after a comma, in chunks of about kChunkBytes: one string that
  // doubled as it grew copied megabytes on a completion thread under mutex_, and on the H100 the
  // trace then showed the batches waiting for it as device spans of 1.3, 1.9, 5.5 and 17.8 ms, at
  // 0.14, 0.28, 0.56 and 1.1 s into a run (DESIGN.md "Where the p99 under load came from").
  static constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
  std::string& room_for(std::size_t bytes);  // the chunk to append `bytes` to (under mutex_)
  std::vector<std::string> chunks_;
  std::size_t count_ = 0;
  std::uint64_t dropped_batches_ = 0;
  std::uint64_t next_request_id_ = 0;
};

}  // namespace gpubatch::detail
