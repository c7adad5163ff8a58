#pragma once
// How many requests a regular batch may take under the adaptive policy (DESIGN.md "Scheduling",
// "A smaller batch until saturated"): `latency_batch_size` while the executor keeps up with what
// arrives, `max_batch_size` once it has been saturated for a while. Pure: no clock (time is passed
// in), no threads; the strand tells it each regular batch it took (tests/unit/executor/
// count_cap_test.cpp).
//
// Why. Behind a backlog of a few milliseconds (a host stall, a burst) the adaptive policy formed
// batches of 3,000-4,096 256-float requests, and such a batch's pack (one thread) and completion
// took 2-3 ms, so every request in it waited that long: the open loop's p99 at 2-3 M requests/s
// on the H200. Capped at 1,024 the same loads had p99 448-517 against 745-933 us at 2 M/s and
// 736-857 against 1,247-1,790 us at 2.5 M/s, but the closed-loop crowd (16 callers, 1,024
// requests each outstanding) fell from 5.21-5.39 to 4.70-4.92 M/s (BENCHMARKS.md, twenty-third
// session, call 1). A crowd is saturated for good and its latency is its callers' depth over the
// rate, so only the rate matters there: full batches at the small cap for `sustain` (10 ms)
// raise the cap, and batches that do not fill even the small cap (what was waiting was taken
// whole) for as long lower it again. Lowered at the first such batch, the cap flapped at
// saturation, where batches under 1,024 come now and then: the open loop at 3 M/s on a slower
// H200 had p99 5-41 ms against 7-24 ms without the cap (call 2).
#include <chrono>
#include <cstddef>

namespace gpubatch::detail {

template <typename Clock = std::chrono::steady_clock>
class CountCap {
 public:
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  // `small` 0 or at least `full`: always `full` (the cap is off).
  CountCap(std::size_t small, std::size_t full, duration sustain) noexcept
      : small_(small == 0 || small >= full ? full : small), full_(full), sustain_(sustain), limit_(small_) {}

  std::size_t limit() const noexcept { return limit_; }
  bool raised() const noexcept { return limit_ != small_; }

  // A regular batch of `n` requests was taken at `now` under limit().
  void taken(std::size_t n, time_point now) noexcept {
    if (n >= limit_) {  // full: saturated for as long as this goes on
      light_since_ = time_point::max();
      if (full_since_ == time_point::max()) full_since_ = now;
      if (now - full_since_ >= sustain_) limit_ = full_;
    } else if (n < small_) {  // drained: the small cap keeps up for as long as this goes on
      full_since_ = time_point::max();
      if (light_since_ == time_point::max()) light_since_ = now;
      if (now - light_since_ >= sustain_) limit_ = small_;
    } else {  // raised, and between the caps: neither
      full_since_ = light_since_ = time_point::max();
    }
  }

 private:
  std::size_t small_;
  std::size_t full_;
  duration sustain_;
  std::size_t limit_;
  time_point full_since_ = time_point::max();   // the first of the full batches in a row
  time_point light_since_ = time_point::max();  // the first of the batches under small_ in a row
};

}  // namespace gpubatch::detail
