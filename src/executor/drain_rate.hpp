#pragma once
// How fast the strand takes requests out of a backlog, learnt online, and what it predicts for a
// request that would join the back of one (DESIGN.md "Deadlines": admission). Pure: time is
// passed in; the strand feeds it once per pass and at each flush, any caller asks it.
//
// Why: past saturation a request with a deadline that joins a queue of thousands cannot be served
// before its deadline, yet it used to enter the queue, hold a cell in the deadline watch, be
// failed there at its deadline, and have its handler run on the watch's threads. On the H200 (16
// cores; 16 senders offering 3 M/s of 256-float relu, half with 2 ms deadlines) 2.9 of the 3
// million deadline requests went that way, their errors 16-19 ms late at p50 because the watch
// and its helpers fell behind, while the executor served 0.6 M/s. Refused at the call, such a
// request hears at once, before its deadline, and costs the watch and the strand nothing.
//
// A second signal covers what the count misses (requests waiting in the forming batch and for a
// free slot, a queue shorter than a batch but slow to leave): the wait of the newest request of
// each batch flushed lately (flushed()).
//
// Only a measured, recent rate is trusted: a window counts only while a backlog waited at both
// of its ends (an idle queue says nothing of how fast it drains), and a rate older than
// kStale predicts nothing (the load may have changed). A request is refused only when even this
// rate, counted over every request ahead of it and none of the device time after, outlasts its
// deadline: the prediction errs towards admitting.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpubatch::detail {

class DrainRate {
 public:
  using Clock = std::chrono::steady_clock;
  // A window shorter than this is not a rate (a strand run takes tens of microseconds).
  static constexpr auto kWindow = std::chrono::milliseconds(1);
  static constexpr auto kStale = std::chrono::milliseconds(50);

  // The strand, at the end of a pass: `taken` is every request it ever took into a batch (a
  // running count), `backlogged` whether requests still wait for it (in its queues, or in a
  // formed batch waiting for a free slot).
  void observe(Clock::time_point now, std::uint64_t taken, bool backlogged) noexcept {
    if (!backlogged) {
      open_ = false;
      return;
    }
    if (!open_) {
      open_ = true;
      start_ = now;
      start_taken_ = taken;
      return;
    }
    const auto span = now - start_;
    if (span < kWindow) return;
    const std::uint64_t n = taken - start_taken_;
    start_ = now;
    start_taken_ = taken;
    if (n == 0) return;  // stuck (a device holding its submit): no rate, and a stale one fades
    const double sample = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(span).count()) /
                          static_cast<double>(n);
    // Weighted towards the newest window: a rate that rises (the strand catching up) is trusted
    // within a few windows.
    ns_per_request_ = ns_per_request_ == 0.0 ? sample : 0.5 * ns_per_request_ + 0.5 * sample;
    published_ns_.store(static_cast<std::int64_t>(ns_per_request_ + 0.5), std::memory_order_relaxed);
    updated_.store(now.time_since_epoch().count(), std::memory_order_release);
  }

  // The strand, at a flush: how long the batch's newest request waited from its acceptance. The
  // shortest of the last kFlushes is kept: a request arriving now waits about as long as the last
  // ones to get into a batch did, when the backlog holds steady (and less when it shrinks: the
  // shortest of several errs towards admitting).
  static constexpr std::size_t kFlushes = 4;
  void flushed(Clock::time_point now, Clock::duration newest_wait) noexcept {
    waits_[next_wait_] = std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(newest_wait).count());
    next_wait_ = (next_wait_ + 1) % kFlushes;
    if (flushes_ < kFlushes) ++flushes_;
    if (flushes_ < kFlushes) return;
    published_wait_ns_.store(*std::min_element(waits_, waits_ + kFlushes), std::memory_order_relaxed);
    wait_updated_.store(now.time_since_epoch().count(), std::memory_order_release);
  }

  // Any thread: the time the strand would take to reach a request behind `ahead` others, at the
  // rate last measured; zero when there is no recent rate.
  std::chrono::nanoseconds wait_behind(std::uint64_t ahead, Clock::time_point now) const noexcept {
    if (!fresh(updated_, now)) return std::chrono::nanoseconds(0);
    const std::int64_t per = published_ns_.load(std::memory_order_relaxed);
    return std::chrono::nanoseconds(per * static_cast<std::int64_t>(std::min<std::uint64_t>(ahead, 1u << 30)));
  }
  // Any thread: the shortest wait of the newest requests of the last kFlushes batches, if the
  // last of them was recent; zero otherwise.
  std::chrono::nanoseconds recent_wait(Clock::time_point now) const noexcept {
    if (!fresh(wait_updated_, now)) return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(published_wait_ns_.load(std::memory_order_relaxed));
  }

  // The rate last measured, nanoseconds per request (0: none yet); for stats and tests.
  std::int64_t ns_per_request() const noexcept { return published_ns_.load(std::memory_order_relaxed); }

 private:
  // The strand's.
  bool open_ = false;
  Clock::time_point start_{};
  std::uint64_t start_taken_ = 0;
  double ns_per_request_ = 0.0;
  std::int64_t waits_[kFlushes] = {};
  std::size_t next_wait_ = 0, flushes_ = 0;
  // Published.
  std::atomic<std::int64_t> published_ns_{0};
  std::atomic<Clock::rep> updated_{0};
  std::atomic<std::int64_t> published_wait_ns_{0};
  std::atomic<Clock::rep> wait_updated_{0};

  static bool fresh(const std::atomic<Clock::rep>& updated, Clock::time_point now) noexcept {
    const Clock::rep at = updated.load(std::memory_order_acquire);
    return at != 0 && now.time_since_epoch().count() - at <= Clock::duration(kStale).count();
  }
};

}  // namespace gpubatch::detail
