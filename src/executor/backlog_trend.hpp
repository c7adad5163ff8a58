#pragma once
// Whether what arrives outruns what the executor serves, from the depth of its queues over time:
// the slow case the latency target's 1 ms windows miss (strand.cpp note_arrivals). Pure: time is
// passed in; the strand feeds it once a pass while a latency target is set.
//
// Why: under BatchConfig::target_p99 a batch is capped at what the device serves within the
// target's share, and raised to what keeps up with the arrivals only while the queues are seen to
// grow (a closed loop's arrivals follow its service, so they say nothing of the load). The 1 ms
// windows call a queue growing when it gains 64 requests a window; one that gains a few a
// millisecond went unseen and the cap stayed. On lavapipe (2 cores; gpubatch-mix, 16 senders,
// 10,000 requests/s offered, target_p99_us 500) batches of one request served less than arrived
// and the queue grew for the whole run: p50 356 ms and p99 545 ms, against 0.43 and 1.5 ms
// without a target.
//
// Here a period (period()) keeps the least depth the queues had at the passes within it (the
// floor under a closed loop's swings); the load outruns the service once that floor rose by more
// than a margin kRising periods in a row, and stops doing so once a period's floor is back
// within the margin (the backlog drained). A closed loop that refills its queue after a drain
// rises for a batch time or two, not kRising periods.
//
// While outrun, the strand lifts the cap (the backlog drains in batches as large as the policy
// allows). Each outrun also doubles scale(), by which the strand multiplies the cap from then on:
// the cost model had said batches of that size keep up, and they did not (on lavapipe the model
// sees a batch's device time, not the CPU its submission and completion take from the senders'
// cores). The scale decays by kDecay a period without an outrun, so a load that lightens gets its
// smaller batches back within seconds (decaying faster, halving in 1.4 s, the cap shrank back
// under the load within the same run and the queue outran it again every second).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace gpubatch::detail {

class BacklogTrend {
 public:
  using Clock = std::chrono::steady_clock;
  // The shortest period; the executor makes it two batch times of its latency target at least
  // (a closed loop's queue refills at a batch's worth a batch time after a drain: on the fake
  // device of LatencyTarget.CapsBatchesAtWhatTheDeviceServesInAThirdOfTheTarget, 15 ms batches,
  // three rises of 10 ms periods in a row were seen).
  static constexpr auto kMinPeriod = std::chrono::milliseconds(10);

  explicit BacklogTrend(Clock::duration period = kMinPeriod) noexcept
      : period_(std::max<Clock::duration>(period, kMinPeriod)) {}
  Clock::duration period() const noexcept { return period_; }
  static constexpr std::uint32_t kRising = 3;
  // A rise counts past this many requests, or an eighth of those taken in the period.
  static constexpr std::uint64_t kMinRise = 4;

  // At a strand pass: `depth` requests wait in the queues; `taken` were taken into batches since
  // the previous call.
  void observe(Clock::time_point now, std::uint64_t depth, std::uint64_t taken) noexcept {
    if (start_ == Clock::time_point{}) start_ = now;
    floor_ = std::min(floor_, depth);
    taken_ += taken;
    if (now - start_ < period_) return;
    const std::uint64_t margin = std::max(kMinRise, taken_ / 8);
    // A period with an uncapped batch says nothing of the cap: a closed loop refilling after the
    // cost model's warm-up (batches of 224-256 taking 50 ms, each longer than a 30 ms period) rose
    // three periods in a row (LatencyTarget.CapsBatchesAtWhatTheDeviceServesInAThirdOfTheTarget
    // failed 1 run in 20 so).
    const bool rose = previous_ != kNone && floor_ > previous_ + margin && !uncapped_;
    rising_ = rose ? rising_ + 1 : 0;
    if (rising_ >= kRising) {
      if (!outrun_) scale_ = std::min(scale_ * 2.0, kMaxScale);
      outrun_ = true;
    } else if (floor_ <= margin) {
      outrun_ = false;
    }
    drained_before_ = drained_last_;
    drained_last_ = floor_ <= margin && !uncapped_;
    uncapped_ = false;
    if (!outrun_) scale_ = std::max(1.0, scale_ * kDecay);
    previous_ = floor_;
    floor_ = kNone;
    taken_ = 0;
    start_ = now;
  }

  bool outrun() const noexcept { return outrun_; }
  // The queues emptied (to within the margin) under a cap in one of the last two periods: a
  // backlog now is new (a stall, a burst), not a closed loop's standing queue. Two periods,
  // because a stall can start a period whose floor is its backlog. Under a cap: a period in which
  // a batch went uncapped (note_uncapped: the model not yet warm, an outrun, a lift for a backlog)
  // does not count, or a closed loop would drain in each uncapped batch, refill, and be lifted
  // again (and its refills after such batches, longer than a period, looked like an outrun).
  bool drained_lately() const noexcept { return drained_last_ || drained_before_; }
  void note_uncapped() noexcept { uncapped_ = true; }
  // How many times the cost model's cap a batch may hold (1 until an outrun; at most kMaxScale).
  double scale() const noexcept { return scale_; }
  // `cap` bytes scaled, saturating.
  std::size_t scaled(std::size_t cap) const noexcept {
    const double bytes = static_cast<double>(cap) * scale_;
    return bytes >= static_cast<double>(std::numeric_limits<std::size_t>::max() / 2) ? std::numeric_limits<std::size_t>::max()
                                                                                     : static_cast<std::size_t>(bytes);
  }
  static constexpr double kMaxScale = 1024.0;
  static constexpr double kDecay = 0.999;  // a period: halves in about 700 periods (7 s at 10 ms)

 private:
  static constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  Clock::duration period_;
  Clock::time_point start_{};
  std::uint64_t floor_ = kNone, previous_ = kNone, taken_ = 0;
  std::uint32_t rising_ = 0;
  bool outrun_ = false;
  bool drained_last_ = false, drained_before_ = false, uncapped_ = false;
  double scale_ = 1.0;
};

}  // namespace gpubatch::detail
