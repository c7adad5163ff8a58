// The online cost model on synthetic batches, and the latency target on a fake device whose
// batches take longer the more bytes they hold.
#include "executor/cost_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/stats.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using detail::CostModel;

TEST(CostModel, PredictsNothingUntilWarm) {
  CostModel m;
  for (std::uint64_t i = 0; i + 1 < CostModel::kWarmUp; ++i) m.observe(1000 * (i + 1), 50us);
  EXPECT_FALSE(m.warm());
  EXPECT_EQ(m.predict(1 << 20).count(), 0);
  EXPECT_EQ(m.byte_budget(1ms, 1), std::numeric_limits<std::size_t>::max());
}

TEST(CostModel, LearnsFixedAndPerByteCostFromNoisyBatches) {
  CostModel m;
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::size_t> size(1 << 10, 8 << 20);
  std::normal_distribution<double> noise(0.0, 2000.0);  // 2 us of jitter
  // 20 us + 1 ns per byte (about 1 GB/s).
  for (int i = 0; i < 400; ++i) {
    const std::size_t bytes = size(rng);
    m.observe(bytes, std::chrono::nanoseconds(static_cast<std::int64_t>(20000.0 + bytes + noise(rng))));
  }
  ASSERT_TRUE(m.warm());
  EXPECT_NEAR(static_cast<double>(m.fixed().count()), 20000.0, 3000.0);
  EXPECT_NEAR(m.ns_per_byte(), 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(m.predict(4 << 20).count()), 20000.0 + (4 << 20), 10000.0);
  // 1 ms leaves 980 us for bytes: about 980,000 bytes.
  EXPECT_NEAR(static_cast<double>(m.byte_budget(1ms, 1)), 980000.0, 20000.0);
  // Below the fixed cost no batch meets the budget: uncapped (capping would only cut throughput).
  EXPECT_EQ(m.byte_budget(10us, 4096), std::numeric_limits<std::size_t>::max());
}

// With the offered load known, a cap never goes below the batch size at which the device serves
// 1.25 times what arrives: batches of B bytes are served at B / (fixed + per_byte B).
TEST(CostModel, TheCapKeepsUpWithWhatArrives) {
  CostModel m;
  for (int i = 0; i < 200; ++i) {  // 20 us + 1 ns per byte, sizes 1-8 MiB
    const std::size_t bytes = std::size_t(1 + i % 8) << 20;
    m.observe(bytes, std::chrono::nanoseconds(20000 + static_cast<std::int64_t>(bytes)));
  }
  ASSERT_TRUE(m.warm());
  const double budget_bytes = static_cast<double>(m.byte_budget(100us, 1));  // 80 us of bytes
  EXPECT_NEAR(budget_bytes, 80000.0, 2000.0);
  // 0.5 GB/s arriving: 1.25x needs B >= 0.625 * 20000 / 0.375 = 33,333: the budget binds.
  EXPECT_NEAR(static_cast<double>(m.byte_budget(100us, 1, 0.5e9)), budget_bytes, 1.0);
  // 0.7 GB/s: B >= 0.875 * 20000 / 0.125 = 140,000 bytes, above the budget's 80,000.
  EXPECT_NEAR(static_cast<double>(m.byte_budget(100us, 1, 0.7e9)), 140000.0, 3000.0);
  // 0.9 GB/s: 1.25x that is more than the device moves per byte at any size; no size keeps up.
  EXPECT_EQ(m.byte_budget(100us, 1, 0.9e9), std::numeric_limits<std::size_t>::max());
}

TEST(CostModel, FollowsADeviceThatSlowsDown) {
  CostModel m;
  for (int i = 0; i < 100; ++i) m.observe(std::size_t(1 + i % 10) << 20, std::chrono::nanoseconds((1 + i % 10) << 20));
  EXPECT_NEAR(m.ns_per_byte(), 1.0, 0.05);
  for (int i = 0; i < 100; ++i) m.observe(std::size_t(1 + i % 10) << 20, std::chrono::nanoseconds((3 + 3 * (i % 10)) << 20));
  EXPECT_NEAR(m.ns_per_byte(), 3.0, 0.1);  // forgetting: the old speed no longer counts
}

TEST(CostModel, NeverPredictsNegativeCosts) {
  CostModel m;
  for (int i = 0; i < 50; ++i) m.observe(std::size_t(i) << 20, std::chrono::nanoseconds(1000000 - i * 10000));
  EXPECT_GE(m.fixed().count(), 0);
  EXPECT_GE(m.ns_per_byte(), 0.0);
  EXPECT_GE(m.predict(1 << 20).count(), 0);
}

// 8 threads keep 32 requests of 2 KiB each outstanding on a device that takes 1 ms + 100 us per
// KiB a batch (slow on purpose: a loaded CI machine's scheduling noise, a few ms, stays small
// beside it). Without a target a batch would hold most of the 256 outstanding requests (about
// 50 ms); with target_p99 = 30 ms and one batch in flight a batch is capped at what takes 15 ms
// (target / (1 + 1)): about 140 KiB, 70 requests.
TEST(LatencyTarget, CapsBatchesAtWhatTheDeviceServesInAThirdOfTheTarget) {
  auto device = slow_fake_device(1ms, 100us);
  BatchConfig c = BatchConfig::adaptive();
  c.max_inflight_batches = 1;
  c.target_p99 = 30ms;
  BatchExecutor executor(device, c);
  constexpr int kThreads = 8, kEach = 400, kOutstanding = 32;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto gpu = executor.handle();
      std::vector<std::future<std::vector<float>>> window;
      for (int i = 0; i < kEach; ++i) {
        if (window.size() == kOutstanding) {
          window.front().get();
          window.erase(window.begin());
        }
        window.push_back(gpu.relu(std::vector<float>(256, 1.0f)));
      }
      for (auto& f : window) f.get();
    });
  }
  // The cap while the loop runs (as it winds down the queue drains, and a last backlog whose
  // oldest waited half the target goes uncapped: strand.cpp apply_latency_target).
  std::vector<std::size_t> caps;
  while (executor.stats().completed < static_cast<std::uint64_t>(kThreads * kEach * 3 / 4)) {
    caps.push_back(executor.stats().target_batch_bytes);
    std::this_thread::sleep_for(2ms);
  }
  for (auto& t : threads) t.join();
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, static_cast<std::uint64_t>(kThreads * kEach));
  // The model saw about 100 ns per byte (100 us per KiB); the bounds leave room for a loaded
  // machine's scheduling noise (sanitizers, 2 cores).
  EXPECT_GT(s.cost_ns_per_byte, 20.0);
  EXPECT_LT(s.cost_ns_per_byte, 500.0);
  EXPECT_GT(s.target_batch_bytes, 0u);
  ASSERT_FALSE(caps.empty());
  EXPECT_LT(caps.back(), 400u * 1024);
  const std::string text = to_prometheus(s);
  EXPECT_NE(text.find("gpubatch_target_batch_bytes " + std::to_string(s.target_batch_bytes) + "\n"),
            std::string::npos) << text;
  // Past the warm-up the batches kept to (about) the cap, 70 requests; without it they hold
  // nearly all 256 outstanding. The median, not the largest: the cap rises to what keeps up with
  // a queue that grows (apply_latency_target), and a strand starved of its core lets the queue
  // grow in a closed loop too (under TSan on an overloaded 2-core machine one batch of 256 came).
  // Here, quiet: 1 256 224 224 201 87 169 235, then 64-68 (median 68).
  const std::vector<std::size_t> sizes = device->batch_sizes();
  ASSERT_GT(sizes.size(), CostModel::kWarmUp + 20);
  std::vector<std::size_t> past(sizes.begin() + CostModel::kWarmUp + 4, sizes.end());
  std::nth_element(past.begin(), past.begin() + past.size() / 2, past.end());
  EXPECT_LE(past[past.size() / 2], 120u);
}

}  // namespace
}  // namespace gpubatch::testing

namespace gpubatch::testing {
// A target no batch can meet (the device's fixed cost per batch, 400 us, is above a batch's
// share of it, 500 / 3 us): batches are not capped. Capped at one request, as they once were,
// 4,000 requests waiting would go out one or two at a time.
TEST(LatencyTarget, AnUnreachableTargetDoesNotShrinkBatches) {
  FakeDevice::Options o;
  o.delay = 400us;
  o.delay_per_kib = 1us;
  auto device = std::make_shared<FakeDevice>(o);
  BatchConfig c = BatchConfig::adaptive();
  c.target_p99 = 500us;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  // Sizes that differ, so that the model can tell the fixed cost from the per-byte one.
  for (int i = 0; i < 40; ++i) ASSERT_EQ(gpu.relu(std::vector<float>(64 + 256 * (i % 8), 1.0f)).get().size(), 64u + 256 * (i % 8));
  const std::uint64_t before = executor.stats().batches;
  std::vector<std::future<std::vector<float>>> all;
  for (int i = 0; i < 4000; ++i) all.push_back(gpu.relu(std::vector<float>(256, 1.0f)));
  for (auto& f : all) ASSERT_EQ(f.get().size(), 256u);
  const Stats s = executor.stats();
  EXPECT_GT(s.cost_fixed, std::chrono::nanoseconds(c.target_p99) / 3) << "the model saw the fixed cost";
  EXPECT_LT(s.batches - before, 400u) << "4,000 requests went in batches of ten or more";
}
}  // namespace gpubatch::testing
