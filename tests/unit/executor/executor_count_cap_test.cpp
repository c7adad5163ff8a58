// latency_batch_size on a fake device (BatchConfig::latency_batch_size; the cap itself:
// count_cap_test.cpp): under the adaptive policy batches stay at the small cap until they have
// been full for GPUBATCH_SATURATED_AFTER_US, then grow to max_batch_size (and twice
// max_inflight_batches go in flight, GPUBATCH_SATURATED_INFLIGHT), and batches that take what
// waits whole for as long bring the small cap back; the deadline policy and 0 leave it off.
#include "gpubatch/executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "config_test_util.hpp"
#include "fake_device.hpp"
#include "gpubatch/stats.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;

BatchConfig capped(std::size_t small, std::size_t full) {
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = full;
  c.latency_batch_size = small;
  c.max_inflight_batches = 1;
  c.completion_threads = 2;
  c.lone_future_waits = false;
  return c;
}

// Submits n requests while the device completes nothing (so that they all wait, however slowly
// this machine submits), lets it go on (each batch then takes the device's delay) and waits for them all.
std::vector<std::size_t> crowd(BatchExecutor& executor, FakeDevice& device, int n) {
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  device.pause();
  for (int i = 0; i < n; ++i) futures.push_back(gpu.relu({float(i)}));
  device.resume();
  for (auto& f : futures) EXPECT_TRUE(ready_within(f, 60s));
  return device.batch_sizes();
}

TEST(LatencyBatchSize, ACrowdGetsTheFullCapOnlyAfterTheSmallOneStayedFull) {
  EnvGuard sustain("GPUBATCH_SATURATED_AFTER_US", "10000");
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 2ms});
  BatchExecutor executor(device, capped(16, 64));
  EXPECT_EQ(executor.stats().batch_count_limit, 16u);
  const auto sizes = crowd(executor, *device, 1500);
  ASSERT_FALSE(sizes.empty());
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 64u) << "the crowd got the full cap";
  const auto first_big = std::find_if(sizes.begin(), sizes.end(), [](std::size_t n) { return n > 16; });
  ASSERT_NE(first_big, sizes.end());
  // Before it, batches of at most 16, and at least two full ones: 10 ms of 2 ms batches.
  EXPECT_GE(std::count(sizes.begin(), first_big, std::size_t{16}), 2);
  // Lone requests after the crowd, each taking what waits whole: the small cap is back once they
  // have gone on for the sustain.
  auto gpu = executor.handle();
  for (int i = 0; i < 3; ++i) {
    auto f = gpu.relu({1.0f});
    ASSERT_TRUE(ready_within(f, 30s));
    std::this_thread::sleep_for(6ms);
  }
  auto f = gpu.relu({1.0f});
  ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_EQ(executor.stats().batch_count_limit, 16u);
  EXPECT_NE(to_prometheus(executor.stats()).find("gpubatch_batch_count_limit 16\n"), std::string::npos);
}

// A sustain longer than the crowd lasts: no batch ever passes the small cap, every request served.
TEST(LatencyBatchSize, BelowTheSustainBatchesStayAtTheSmallCap) {
  EnvGuard sustain("GPUBATCH_SATURATED_AFTER_US", "10000000");
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 1ms});
  BatchExecutor executor(device, capped(16, 64));
  const auto sizes = crowd(executor, *device, 400);
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 16u);
  EXPECT_EQ(device->max_inflight(), 1u) << "not saturated: max_inflight_batches";
  EXPECT_EQ(executor.stats().inflight_limit, 1u);
  std::size_t total = 0;
  for (std::size_t n : sizes) total += n;
  EXPECT_EQ(total, 400u);
}

// Saturated (the cap raised), twice max_inflight_batches go in flight; GPUBATCH_SATURATED_INFLIGHT
// names another count or turns it off, and a latency target (its batch sizes assume that many
// ahead of a request) or priority levels (an express batch runs behind them) keep
// max_inflight_batches.
TEST(LatencyBatchSize, SaturatedTwiceTheBatchesGoInFlight) {
  EnvGuard sustain("GPUBATCH_SATURATED_AFTER_US", "10000");
  struct Case {
    const char* env;
    int keep;  // 1: a latency target, 2: two priority levels
    std::size_t expected;
  };
  for (const Case c : {Case{"", 0, 2}, Case{"3", 0, 3}, Case{"off", 0, 1}, Case{"", 1, 1}, Case{"", 2, 1}}) {
    EnvGuard inflight("GPUBATCH_SATURATED_INFLIGHT", c.env);
    auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 2ms});
    BatchConfig config = capped(16, 64);
    if (c.keep == 1) config.target_p99 = 10s;
    if (c.keep == 2) config.priority_levels = 2;
    BatchExecutor executor(device, config);
    const auto sizes = crowd(executor, *device, 3000);
    EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}), 3000u);
    EXPECT_EQ(device->max_inflight(), c.expected) << "\"" << c.env << "\" keep " << c.keep;
    // Still saturated as far as the cap knows (nothing has been light for the sustain since).
    const Stats s = executor.stats();
    EXPECT_EQ(s.batch_count_limit, 64u);
    EXPECT_EQ(s.inflight_limit, c.expected);
    EXPECT_NE(to_prometheus(s).find("gpubatch_inflight_limit " + std::to_string(c.expected) + "\n"), std::string::npos);
  }
}

// 0, and the deadline policy (which waits for full batches by design): max_batch_size from the
// first batch on.
TEST(LatencyBatchSize, ZeroAndTheDeadlinePolicyLeaveItOff) {
  EnvGuard sustain("GPUBATCH_SATURATED_AFTER_US", "10000000");
  for (int variant = 0; variant < 2; ++variant) {
    auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 2ms});
    BatchConfig c = capped(16, 64);
    if (variant == 0) c.latency_batch_size = 0;
    else c.policy = FlushPolicy::deadline;
    BatchExecutor executor(device, c);
    EXPECT_EQ(executor.stats().batch_count_limit, 64u) << variant;
    const auto sizes = crowd(executor, *device, 600);
    EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 64u) << variant;
  }
}

}  // namespace
}  // namespace gpubatch::testing
