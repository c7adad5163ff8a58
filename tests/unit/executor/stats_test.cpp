// The latency histogram and the Prometheus rendering.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "executor/histogram.hpp"
#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/stats.hpp"

namespace gpubatch::testing {
namespace {

using detail::LatencyHistogram;
using namespace std::chrono_literals;

TEST(LatencyHistogram, BucketsAreContiguousAndTight) {
  EXPECT_EQ(LatencyHistogram::bucket_of(0), 0u);
  EXPECT_EQ(LatencyHistogram::bucket_of(15), 15u);
  EXPECT_EQ(LatencyHistogram::bucket_of(16), 16u);
  EXPECT_EQ(LatencyHistogram::bucket_of(31), 31u);
  for (std::size_t i = 0; i + 1 < LatencyHistogram::kBuckets; ++i) {
    EXPECT_EQ(LatencyHistogram::bucket_high(i), LatencyHistogram::bucket_low(i + 1)) << i;
    EXPECT_EQ(LatencyHistogram::bucket_of(LatencyHistogram::bucket_low(i)), i);
    EXPECT_EQ(LatencyHistogram::bucket_of(LatencyHistogram::bucket_high(i) - 1), i);
    const double width = double(LatencyHistogram::bucket_high(i) - LatencyHistogram::bucket_low(i));
    if (LatencyHistogram::bucket_low(i) >= 16) {
      EXPECT_LE(width / double(LatencyHistogram::bucket_low(i)), 1.0 / 16 + 1e-12);
    }
  }
  EXPECT_EQ(LatencyHistogram::bucket_of(~std::uint64_t{0}), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogram, PercentilesWithinResolution) {
  LatencyHistogram h;
  std::mt19937_64 rng(1);
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = 1000 + rng() % 1000000;  // 1 us .. 1 ms
    values.push_back(v);
    h.record(v);
  }
  std::sort(values.begin(), values.end());
  LatencyHistogram::Snapshot s;
  s += h;
  for (double q : {0.5, 0.9, 0.99}) {
    const double exact = double(values[std::size_t(q * double(values.size())) - 1]);
    const double got = double(s.percentile(q));
    EXPECT_NEAR(got, exact, exact * 0.07) << q;
  }
  const auto sum = s.summary();
  EXPECT_EQ(sum.count, 100000u);
  EXPECT_EQ(sum.max.count(), static_cast<std::int64_t>(values.back()));
  EXPECT_LE(sum.p50, sum.p90);
  EXPECT_LE(sum.p90, sum.p99);
  EXPECT_LE(sum.p99, sum.max);
}

TEST(LatencyHistogram, SharedRecordingFromManyThreads) {
  LatencyHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&h] {
      for (int i = 0; i < 10000; ++i) h.record_shared(static_cast<std::uint64_t>(i));
    });
  for (auto& t : threads) t.join();
  LatencyHistogram::Snapshot s;
  s += h;
  EXPECT_EQ(s.count, 40000u);
  EXPECT_EQ(s.max, 9999u);
}

TEST(Stats, EmptySnapshotIsZero) {
  LatencyHistogram::Snapshot s;
  const auto sum = s.summary();
  EXPECT_EQ(sum.count, 0u);
  EXPECT_EQ(sum.p99.count(), 0);
}

TEST(Stats, PrometheusExposition) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = BatchConfig::balanced();  // the deadline policy: two full batches of 4
  config.max_batch_size = 4;
  config.max_wait = 60s;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 8; ++i) futures.push_back(gpu.relu({1.0f, 2.0f}));
  for (auto& f : futures) f.get();
  auto bad = gpu.relu({});
  (void)bad;
  const Stats s = executor.stats();
  EXPECT_EQ(s.transfers.uploads, 2u);
  EXPECT_EQ(s.transfers.bytes_up, 8u * 2 * sizeof(float));
  const std::string text = to_prometheus(s);
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\n" << text;
  };
  has("# TYPE gpubatch_requests_total counter");
  has("gpubatch_requests_total{outcome=\"completed\"} 8\n");
  has("gpubatch_requests_total{outcome=\"rejected\"} 1\n");
  has("gpubatch_requests_total{outcome=\"failed\"} 0\n");
  has("# TYPE gpubatch_requests_shed_total counter");
  has("gpubatch_requests_shed_total 0\n");
  has("gpubatch_batches_total 2\n");
  has("gpubatch_flushes_total{reason=\"size\"} 2\n");
  has("gpubatch_flushes_total{reason=\"deadline\"} 0\n");
  has("gpubatch_batch_fill_mean 1\n");
  has("# TYPE gpubatch_end_to_end_seconds summary");
  has("gpubatch_end_to_end_seconds{quantile=\"0.99\"} ");
  has("gpubatch_end_to_end_seconds_count 8\n");
  has("gpubatch_transfers_total{direction=\"up\"} 2\n");
  has("gpubatch_transfer_bytes_total{direction=\"down\"} 64\n");
  // Every sample line is "name{labels} value" or "name value".
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    ASSERT_NE(end, std::string::npos) << "the exposition must end with a newline";
    const std::string line = text.substr(start, end - start);
    if (line.rfind("# ", 0) != 0) {
      EXPECT_EQ(line.rfind("gpubatch_", 0), 0u) << line;
      EXPECT_NE(line.find(' '), std::string::npos) << line;
    }
    start = end + 1;
  }
  EXPECT_NE(to_prometheus(s, "myapp").find("myapp_batches_total 2"), std::string::npos);
}

}  // namespace
}  // namespace gpubatch::testing
