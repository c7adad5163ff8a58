#pragma once
// The device's cost of a batch, learnt online: time = fixed + per_byte * bytes, fitted by
// least squares over exponentially weighted batches (recent batches weigh more, so the model follows a
// device whose speed changes: clocks, other work, a different mix of operations). Pure: the
// executor feeds it (bytes, service time) once per finished batch and reads predictions; tests
// feed it synthetic batches.
//
// Used by the strand for two things (DESIGN.md "Latency target"):
//   - a waiting request whose deadline minus the predicted time of its batch has come is flushed
//     early (BatchFormer::Input::predicted_device_time);
//   - with BatchConfig::target_p99 set, a batch is capped at the bytes the model says take
//     target_p99 / (max_inflight_batches + 1): a request arriving just after a flush waits for
//     at most the batches in flight, then runs in its own (with the default 2 in flight: three
//     batch times); but never below the size at which the device keeps up with the arrivals.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>

#include "gpubatch/config.hpp"

namespace gpubatch::detail {

// The time one batch may take under a latency target (batch_time_budget's reasoning above).
inline std::chrono::nanoseconds batch_time_budget(const BatchConfig& c) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(c.target_p99) /
         static_cast<std::int64_t>(c.max_inflight_batches + 1);
}

class CostModel {
 public:
  // Batches seen before predictions are trusted (a fit of two parameters needs spread in sizes;
  // until then predict() is 0 and byte_budget() unlimited).
  static constexpr std::uint64_t kWarmUp = 8;

  // One finished batch: its input + output bytes and its service time on the device. Thread-safe.
  void observe(std::size_t bytes, std::chrono::nanoseconds service) {
    const double x = static_cast<double>(bytes) / kMiB;
    const double y = static_cast<double>(std::max<std::int64_t>(0, service.count()));
    std::lock_guard<std::mutex> lock(mutex_);
    // Exponentially weighted sums of the least-squares fit y = a + c x; solved afresh each time
    // (a 2x2 system: no recursive update whose rounding could drift; recursive least squares
    // with forgetting did, in a test, by orders of magnitude).
    s0_ = kLambda * s0_ + 1.0;
    sx_ = kLambda * sx_ + x;
    sy_ = kLambda * sy_ + y;
    sxx_ = kLambda * sxx_ + x * x;
    sxy_ = kLambda * sxy_ + x * y;
    const double spread = s0_ * sxx_ - sx_ * sx_;  // s0^2 times the weighted variance of x
    // Sizes too alike to separate the two costs: keep the per-byte cost and refit the fixed one;
    // before any fit, take it all as per-byte cost (the cautious side: smaller batches under a
    // latency target, whose sizes then differ enough to fit both).
    if (spread > 1e-6 * s0_ * sxx_) c_ = (s0_ * sxy_ - sx_ * sy_) / spread;
    else if (c_ == 0.0 && sx_ > 0.0) c_ = sy_ / sx_;
    a_ = (sy_ - c_ * sx_) / s0_;
    // Published clamped: a negative fixed cost or per-byte cost is noise, not a device.
    fixed_ns_.store(std::max(0.0, a_), std::memory_order_relaxed);
    ns_per_mib_.store(std::max(0.0, c_), std::memory_order_relaxed);
    seen_.store(seen_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  bool warm() const noexcept { return seen_.load(std::memory_order_acquire) >= kWarmUp; }
  std::chrono::nanoseconds fixed() const noexcept {
    return std::chrono::nanoseconds(static_cast<std::int64_t>(fixed_ns_.load(std::memory_order_relaxed)));
  }
  double ns_per_byte() const noexcept { return ns_per_mib_.load(std::memory_order_relaxed) / kMiB; }

  // Predicted service time of a batch of `bytes` (0 until warm).
  std::chrono::nanoseconds predict(std::size_t bytes) const noexcept {
    if (!warm()) return std::chrono::nanoseconds(0);
    const double t = fixed_ns_.load(std::memory_order_relaxed) +
                     ns_per_mib_.load(std::memory_order_relaxed) * static_cast<double>(bytes) / kMiB;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(t));
  }

  // The most bytes a batch may hold to be served within `budget` (unlimited until warm or when the
  // model sees no cost per byte; at least `floor` so that a batch always makes progress), but
  // never so few that the device falls behind what arrives: with `arriving` bytes per second,
  // batches of B bytes are served at B / (fixed + per_byte B) bytes per second, and the cap stays
  // at or above the B at which that is kKeepUp times the arrivals. Unlimited where no batch size
  // meets the budget (the fixed cost alone exceeds it) or keeps up: the target cannot hold, and
  // capping would only cut throughput. (Capping at one request there, as this did before, served
  // 118,000 requests/s against 245,000 uncapped on lavapipe at 400,000 offered, and 275,000 at
  // 2 M offered on the H100; DESIGN.md "A latency target".)
  std::size_t byte_budget(std::chrono::nanoseconds budget, std::size_t floor, double arriving = 0.0) const noexcept {
    constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();
    if (!warm()) return kUnlimited;
    const double per_mib = ns_per_mib_.load(std::memory_order_relaxed);
    if (per_mib <= 0.0) return kUnlimited;
    const double fixed = fixed_ns_.load(std::memory_order_relaxed);
    const double left = static_cast<double>(budget.count()) - fixed;
    if (left <= 0.0) return kUnlimited;
    double bytes = left / per_mib * kMiB;
    if (arriving > 0.0) {
      const double need = kKeepUp * arriving / 1e9;  // bytes per ns
      const double per_byte = per_mib / kMiB;         // ns per byte
      if (need * per_byte >= 1.0) return kUnlimited;  // not even the largest batches keep up
      bytes = std::max(bytes, need * fixed / (1.0 - need * per_byte));
    }
    if (bytes >= static_cast<double>(kUnlimited) / 2) return kUnlimited;
    return std::max(floor, static_cast<std::size_t>(bytes));
  }
  // How much faster than the arrivals a capped batch size must be served (a queue fed near its
  // service rate grows without bound on every burst).
  static constexpr double kKeepUp = 1.25;

 private:
  static constexpr double kMiB = 1024.0 * 1024.0;
  static constexpr double kLambda = 0.95;  // a batch's weight halves after ~14 newer ones

  std::mutex mutex_;
  double s0_ = 0.0, sx_ = 0.0, sy_ = 0.0, sxx_ = 0.0, sxy_ = 0.0;  // guarded by mutex_
  double a_ = 0.0, c_ = 0.0;  // ns, ns per MiB
  std::atomic<double> fixed_ns_{0.0};
  std::atomic<double> ns_per_mib_{0.0};
  std::atomic<std::uint64_t> seen_{0};
};

}  // namespace gpubatch::detail
