#pragma once
// A fixed log-linear latency histogram (HdrHistogram-like, 16 sub-buckets per power of two:
// about 6% relative resolution) over nanoseconds, up to 2^44 ns (about 4.9 hours; larger values
// land in the last bucket). Recording is one relaxed add on one bucket; there is no allocation
// and no lock. One writer per histogram is the intended use (record() is then a plain
// load + store); record_shared() may be used by several writers.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "gpubatch/stats.hpp"

namespace gpubatch::detail {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 4;
  static constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;
  static constexpr int kMaxExponent = 43;  // values below 2^44
  static constexpr std::size_t kBuckets = (kMaxExponent - kSubBits + 2) * kSub;

  static constexpr std::size_t bucket_of(std::uint64_t v) noexcept {
    if (v < kSub) return static_cast<std::size_t>(v);
    int e = std::bit_width(v) - 1;  // >= kSubBits
    if (e > kMaxExponent) return kBuckets - 1;
    const std::uint64_t sub = (v >> (e - kSubBits)) & (kSub - 1);
    return static_cast<std::size_t>((e - kSubBits + 1) * kSub + sub);
  }
  // [low, high) of a bucket.
  static constexpr std::uint64_t bucket_low(std::size_t i) noexcept {
    if (i < kSub) return i;
    const int e = static_cast<int>(i / kSub) + kSubBits - 1;
    const std::uint64_t sub = i % kSub;
    return (kSub + sub) << (e - kSubBits);
  }
  static constexpr std::uint64_t bucket_high(std::size_t i) noexcept {
    if (i < kSub) return i + 1;
    const int e = static_cast<int>(i / kSub) + kSubBits - 1;
    return bucket_low(i) + (std::uint64_t{1} << (e - kSubBits));
  }

  // Single writer.
  void record(std::uint64_t ns) noexcept {
    auto& b = buckets_[bucket_of(ns)];
    b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    count_.store(count_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sum_.store(sum_.load(std::memory_order_relaxed) + ns, std::memory_order_relaxed);
    if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
  }
  void record(std::chrono::nanoseconds d) noexcept {
    record(static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.count())));
  }

  // Any number of writers.
  void record_shared(std::uint64_t ns) noexcept {
    buckets_[bucket_of(ns)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(ns, std::memory_order_relaxed);
    std::uint64_t m = max_.load(std::memory_order_relaxed);
    while (ns > m && !max_.compare_exchange_weak(m, ns, std::memory_order_relaxed)) {
    }
  }

  // A plain copy that several histograms can be added into, then summarised.
  struct Snapshot {
    std::array<std::uint64_t, kBuckets> buckets{};
    std::uint64_t count = 0;
    std::uint64_t sum = 0;
    std::uint64_t max = 0;

    Snapshot& operator+=(const LatencyHistogram& h) noexcept {
      for (std::size_t i = 0; i < kBuckets; ++i)
        buckets[i] += h.buckets_[i].load(std::memory_order_relaxed);
      count += h.count_.load(std::memory_order_relaxed);
      sum += h.sum_.load(std::memory_order_relaxed);
      max = std::max(max, h.max_.load(std::memory_order_relaxed));
      return *this;
    }

    Snapshot& operator+=(const Snapshot& o) noexcept {  // another histogram's (shards' sums)
      for (std::size_t i = 0; i < kBuckets; ++i) buckets[i] += o.buckets[i];
      count += o.count;
      sum += o.sum;
      max = std::max(max, o.max);
      return *this;
    }

    // The value below which a fraction q of the samples lie (bucket midpoint, clamped to max).
    std::uint64_t percentile(double q) const noexcept {
      std::uint64_t total = 0;
      for (auto c : buckets) total += c;
      if (total == 0) return 0;
      auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total) + 0.5);
      rank = std::clamp<std::uint64_t>(rank, 1, total);
      std::uint64_t seen = 0;
      for (std::size_t i = 0; i < kBuckets; ++i) {
        seen += buckets[i];
        if (seen >= rank) {
          const std::uint64_t mid = bucket_low(i) + (bucket_high(i) - bucket_low(i)) / 2;
          return std::min(mid, max);
        }
      }
      return max;
    }

    // Samples in buckets that lie wholly at or below `ns` (a Prometheus `le` bound).
    std::uint64_t count_at_or_below(std::uint64_t ns) const noexcept {
      std::uint64_t n = 0;
      for (std::size_t i = 0; i < kBuckets && bucket_high(i) <= ns + 1; ++i) n += buckets[i];
      return n;
    }

    LatencySummary summary() const noexcept {
      LatencySummary s;
      s.count = count;
      if (count == 0) return s;
      s.mean = std::chrono::nanoseconds(static_cast<std::int64_t>(sum / count));
      s.p50 = std::chrono::nanoseconds(static_cast<std::int64_t>(percentile(0.50)));
      s.p90 = std::chrono::nanoseconds(static_cast<std::int64_t>(percentile(0.90)));
      s.p99 = std::chrono::nanoseconds(static_cast<std::int64_t>(percentile(0.99)));
      s.max = std::chrono::nanoseconds(static_cast<std::int64_t>(max));
      return s;
    }
  };

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> max_{0};
};

// Upper bounds of the Prometheus buckets of per-class latencies (Stats::LatencyClass).
inline constexpr std::uint64_t kClassBucketsNs[] = {
    25'000,     50'000,     100'000,     250'000,     500'000,       1'000'000,
    2'500'000,  5'000'000,  10'000'000,  25'000'000,  50'000'000,    100'000'000,
    250'000'000, 500'000'000, 1'000'000'000, 2'500'000'000, 10'000'000'000};

inline LatencyClass latency_class(std::string label, const LatencyHistogram::Snapshot& s) {
  LatencyClass c;
  c.label = std::move(label);
  c.summary = s.summary();
  for (std::uint64_t le : kClassBucketsNs)
    c.buckets.emplace_back(std::chrono::nanoseconds(le), s.count_at_or_below(le));
  return c;
}

}  // namespace gpubatch::detail
