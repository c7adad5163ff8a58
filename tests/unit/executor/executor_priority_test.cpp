// Priorities on the executor (fake device): a higher level goes into the next batch before lower
// ones, each level has its own queue and default deadline, a level the executor lacks is refused
// alone, and every accepted future resolves.
#include "gpubatch/executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config_test_util.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/stats.hpp"
#include "hold_strand.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

BatchConfig two_levels(std::size_t batch) {
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = batch;
  c.max_inflight_batches = 1;
  c.completion_threads = 1;
  c.priority_levels = 2;
  return c;
}

SubmitOptions high() { return SubmitOptions::with_priority(1); }

// A ready future's error code (none for a value) and message, from its one get().
struct Outcome {
  std::optional<ErrorCode> code;
  std::string message;
};
template <typename T>
Outcome outcome(std::future<T>& f) {
  try {
    f.get();
    return {};
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
}

// Without the express slot (GPUBATCH_EXPRESS=off), the former's order alone: the high requests
// lead the next batch.
TEST(Priority, AHigherLevelGoesIntoTheNextBatchBeforeLowerOnes) {
  auto device = std::make_shared<FakeDevice>();
  device->pause();
  EnvGuard off("GPUBATCH_EXPRESS", "off");
  BatchExecutor executor(device, two_levels(4));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> all;
  all.push_back(gpu.relu({100.0f}));  // takes the only slot and stays there (paused)
  ASSERT_TRUE(device->wait_for_batches(1));
  for (int i = 0; i < 8; ++i) all.push_back(gpu.relu({static_cast<float>(i)}));
  all.push_back(gpu.relu({50.0f}, high()));
  all.push_back(gpu.relu({51.0f}, high()));
  // The low requests are in the former or the queue by now; either way the high ones lead.
  ASSERT_TRUE(eventually([&] { return executor.stats().queue_depth == 10; }));
  device->resume();
  for (auto& f : all) ASSERT_TRUE(ready_within(f, 30s));
  const std::vector<float> order = device->markers();
  ASSERT_EQ(order.size(), 11u);
  EXPECT_EQ(order[0], 100.0f);
  EXPECT_EQ(order[1], 50.0f);
  EXPECT_EQ(order[2], 51.0f);
  // Each level keeps its own arrival order.
  std::vector<float> low;
  for (std::size_t i = 3; i < order.size(); ++i) low.push_back(order[i]);
  EXPECT_EQ(low, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  const std::vector<std::size_t> sizes = device->batch_sizes();
  EXPECT_EQ(sizes.front(), 1u);
  EXPECT_EQ(sizes[1], 4u);  // the two high requests and the two oldest low ones
}

// The express slot: with every in-flight slot taken by level 0, requests of a higher level go to
// the device at once, in a batch of their own (highest level first); one express batch at a
// time, so level 0 keeps its slots. Every future resolves; Stats counts the express batches.
// On an idle executor (a slot free, few level-0 requests held) the regular batch serves them.
TEST(Priority, HigherLevelsGoAtOnceInAnExpressBatchBesideFullSlots) {
  EnvGuard one("GPUBATCH_EXPRESS_DEPTH", "1");  // one express slot, taken below
  auto device = std::make_shared<FakeDevice>();
  BatchConfig c = two_levels(4);
  c.priority_levels = 3;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  EXPECT_EQ(gpu.relu({-1.0f}, high()).get(), std::vector<float>{0.0f});
  EXPECT_EQ(executor.stats().express_batches, 0u) << "idle: no express batch needed";
  device->pause();
  std::vector<std::future<std::vector<float>>> all;
  all.push_back(gpu.relu({100.0f}));  // takes the only slot and stays there (paused)
  ASSERT_TRUE(device->wait_for_batches(2));
  for (int i = 0; i < 6; ++i) all.push_back(gpu.relu({static_cast<float>(i)}));
  ASSERT_TRUE(eventually([&] { return executor.stats().queue_depth == 6; }));
  all.push_back(gpu.relu({50.0f}, high()));
  ASSERT_TRUE(device->wait_for_batches(3)) << "the high request did not wait for the slot";
  EXPECT_EQ(device->markers(), (std::vector<float>{-1.0f, 100.0f, 50.0f}));
  // The express slot is taken now: later high requests wait for it, the top level first.
  all.push_back(gpu.relu({60.0f}, high()));
  all.push_back(gpu.relu({70.0f}, SubmitOptions::with_priority(2)));
  ASSERT_TRUE(eventually([&] { return executor.stats().queue_depth == 8; }));
  EXPECT_FALSE(device->wait_for_batches(4, 20ms)) << "one express batch at a time";
  EXPECT_EQ(device->inflight(), 2u);
  device->resume();
  for (auto& f : all) ASSERT_TRUE(ready_within(f, 30s));
  const std::vector<float> order = device->markers();
  ASSERT_EQ(order.size(), 11u);
  const auto at = [&](float m) { return std::find(order.begin(), order.end(), m) - order.begin(); };
  EXPECT_LT(at(70.0f), at(60.0f)) << "level 2 before level 1";
  EXPECT_LT(at(60.0f), at(5.0f)) << "ahead of the level-0 backlog";
  for (int i = 1; i < 6; ++i) EXPECT_LT(at(float(i - 1)), at(float(i))) << "level 0 keeps its order";
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, 11u);
  // [50], then [70, 60] in the express slot, or at the head of the next regular batch when the
  // regular slot came free first after resume().
  EXPECT_GE(s.express_batches, 1u);
  EXPECT_LE(s.express_batches, 2u);
  EXPECT_NE(to_prometheus(s).find("gpubatch_express_batches_total " + std::to_string(s.express_batches)),
            std::string::npos);
}

// Every regular slot taken and few level-0 requests held, a high request waits the express hold
// (GPUBATCH_EXPRESS_HOLD_US) for a regular slot: when one frees first it rides at the head of the
// regular batch and no express batch goes; when none does, the express batch goes once the hold
// has passed, not before.
TEST(Priority, AtFullSlotsAHighRequestWaitsTheHoldForARegularSlotFirst) {
  EnvGuard hold("GPUBATCH_EXPRESS_HOLD_US", "60000");
  {
    auto device = std::make_shared<FakeDevice>();
    BatchExecutor executor(device, two_levels(4));
    auto gpu = executor.handle();
    device->hold(1000.0f);
    auto first = gpu.relu({1000.0f});  // the only regular slot, held
    ASSERT_TRUE(device->wait_for_batches(1));
    auto high_one = gpu.relu({50.0f}, high());
    EXPECT_FALSE(device->wait_for_batches(2, 20ms)) << "an express batch went within the hold";
    device->release(1000.0f);  // the regular slot frees before the hold ends
    ASSERT_TRUE(ready_within(high_one, 30s));
    EXPECT_EQ(high_one.get(), std::vector<float>{50.0f});
    EXPECT_EQ(first.get(), std::vector<float>{1000.0f});
    EXPECT_EQ(executor.stats().express_batches, 0u) << "it rode in the regular batch";
  }
  {
    auto device = std::make_shared<FakeDevice>();
    BatchExecutor executor(device, two_levels(4));
    auto gpu = executor.handle();
    device->pause();
    auto first = gpu.relu({1000.0f});  // the only regular slot, paused
    ASSERT_TRUE(device->wait_for_batches(1));
    const auto start = Clock::now();
    auto high_one = gpu.relu({50.0f}, high());
    ASSERT_TRUE(device->wait_for_batches(2)) << "the express batch never went";
    EXPECT_GE(Clock::now() - start, 60ms) << "the express batch went before the hold ended";
    EXPECT_EQ(executor.stats().express_batches, 1u);
    device->resume();
    EXPECT_EQ(high_one.get(), std::vector<float>{50.0f});
    EXPECT_EQ(first.get(), std::vector<float>{1000.0f});
  }
}

// A regular batch about to go beside a large crowd of level 0 (GPUBATCH_EXPRESS_SPLIT requests
// or more) sends the higher levels ahead of it in an express batch, within the hold; beside a
// smaller crowd, or with the split off, they ride at the regular batch's head as before.
TEST(Priority, BesideALargeCrowdARegularBatchSendsTheHigherLevelsAheadOfIt) {
  EnvGuard hold("GPUBATCH_EXPRESS_HOLD_US", "60000000");  // the hold never ends in this test
  for (const char* split : {"8", "off", "12"}) {
    EnvGuard at("GPUBATCH_EXPRESS_SPLIT", split);
    auto device = std::make_shared<FakeDevice>();
    BatchExecutor executor(device, two_levels(16));
    auto gpu = executor.handle();
    device->hold(1000.0f);
    std::vector<std::future<std::vector<float>>> all;
    all.push_back(gpu.relu({1000.0f}));  // the only regular slot, held
    ASSERT_TRUE(device->wait_for_batches(1));
    for (int i = 0; i < 10; ++i) all.push_back(gpu.relu({static_cast<float>(i)}));
    all.push_back(gpu.relu({50.0f}, high()));
    ASSERT_TRUE(eventually([&] { return executor.stats().queue_depth == 11; }));
    EXPECT_FALSE(device->wait_for_batches(2, 20ms)) << "a batch went before the slot freed";
    device->release(1000.0f);
    for (auto& f : all) ASSERT_TRUE(ready_within(f, 30s));
    const bool splits = std::string(split) == "8";  // 10 level-0 requests held: at or past 8, not 12
    std::vector<float> want{1000.0f, 50.0f};
    for (int i = 0; i < 10; ++i) want.push_back(static_cast<float>(i));
    EXPECT_EQ(device->markers(), want) << "GPUBATCH_EXPRESS_SPLIT=" << split;
    EXPECT_EQ(device->batch_sizes(), splits ? (std::vector<std::size_t>{1, 1, 10}) : (std::vector<std::size_t>{1, 11}))
        << "GPUBATCH_EXPRESS_SPLIT=" << split;
    EXPECT_EQ(executor.stats().express_batches, splits ? 1u : 0u) << "GPUBATCH_EXPRESS_SPLIT=" << split;
  }
}

// Two express batches go at once by default (GPUBATCH_EXPRESS_DEPTH): the next one does not wait
// for the round trip of the one on the device; a third waits for one of them.
TEST(Priority, TwoExpressBatchesGoAtOnceAndAThirdWaits) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, two_levels(4));
  auto gpu = executor.handle();
  device->pause();
  std::vector<std::future<std::vector<float>>> all;
  all.push_back(gpu.relu({100.0f}));  // the only regular slot
  ASSERT_TRUE(device->wait_for_batches(1));
  all.push_back(gpu.relu({50.0f}, high()));
  ASSERT_TRUE(device->wait_for_batches(2));
  all.push_back(gpu.relu({60.0f}, high()));
  ASSERT_TRUE(device->wait_for_batches(3)) << "the second express batch waited for the first";
  all.push_back(gpu.relu({70.0f}, high()));
  EXPECT_FALSE(device->wait_for_batches(4, 20ms)) << "a third express batch went";
  EXPECT_EQ(device->inflight(), 3u);
  device->resume();
  for (auto& f : all) ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_EQ(device->markers(), (std::vector<float>{100.0f, 50.0f, 60.0f, 70.0f}));
  // 70 in a third express batch, or in a regular one when the regular slot came free first.
  EXPECT_GE(executor.stats().express_batches, 2u);
  EXPECT_LE(executor.stats().express_batches, 3u);
}

// While the express batch is in flight and a crowd of level-0 requests is held, a regular batch
// that frees up leaves the higher levels to the next express batch instead of carrying them behind
// the crowd; once the express slot is free they go (here in a regular batch: it is then quick).
TEST(Priority, BesideACrowdAHighRequestWaitsForTheExpressSlotNotARegularBatch) {
  EnvGuard one("GPUBATCH_EXPRESS_DEPTH", "1");  // one express slot, taken below
  auto device = std::make_shared<FakeDevice>();
  BatchConfig c = two_levels(128);
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  device->hold(1000.0f);
  device->hold(500.0f);
  auto first = gpu.relu({1000.0f});  // the only regular slot, held
  ASSERT_TRUE(device->wait_for_batches(1));
  // The completion thread waits for it now (as on a GPU, where the express batch submitted after
  // it finishes after it too): its release below frees the regular slot while the express
  // batch is still held.
  ASSERT_TRUE(eventually([&] { return device->blocking_waits() >= 1; }));
  std::vector<std::future<std::vector<float>>> low;
  for (int i = 0; i < 100; ++i) low.push_back(gpu.relu({static_cast<float>(i)}));
  ASSERT_TRUE(eventually([&] { return executor.stats().queue_depth == 100; }));
  auto express = gpu.relu({500.0f}, high());  // the express slot, held
  ASSERT_TRUE(device->wait_for_batches(2));
  ASSERT_EQ(executor.stats().express_batches, 1u);
  auto later = gpu.relu({600.0f}, high());
  ASSERT_TRUE(eventually([&] { return executor.stats().queue_depth == 101; }));
  device->release(1000.0f);  // the regular slot frees: level 0 goes, 600 stays for the express slot
  ASSERT_TRUE(device->wait_for_batches(3));
  EXPECT_FALSE(device->wait_for_batches(4, 20ms)) << "600 went on while the express slot was taken";
  const std::vector<float> seen = device->markers();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 600.0f), 0) << "600 rode in a regular batch";
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{1, 1, 100}));
  device->release(500.0f);
  ASSERT_TRUE(ready_within(later, 30s));
  EXPECT_EQ(later.get(), std::vector<float>{600.0f});
  EXPECT_EQ(express.get(), std::vector<float>{500.0f});
  EXPECT_EQ(first.get(), std::vector<float>{1000.0f});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(low[i].get(), std::vector<float>{static_cast<float>(i)});
}

// An express batch is awaited beside the completion thread that waits for a regular batch: its
// request resolves while the regular batch is still held (on a GPU its end is seen when the
// device reaches it, not when the waiter for an earlier full batch wakes up). With
// GPUBATCH_EXPRESS_BESIDE=off it waits behind the regular batch, as before.
TEST(Priority, AnExpressBatchIsAwaitedBesideARegularOneStillRunning) {
  for (const bool beside : {true, false}) {
    SCOPED_TRACE(beside ? "beside" : "off");
    std::optional<EnvGuard> off;
    if (!beside) off.emplace("GPUBATCH_EXPRESS_BESIDE", "off");
    auto device = std::make_shared<FakeDevice>();
    BatchConfig c = two_levels(128);
    c.completion_threads = 2;
    BatchExecutor executor(device, c);
    auto gpu = executor.handle();
    device->hold(1000.0f);
    auto first = gpu.relu({1000.0f});  // the only regular slot, held on the device
    ASSERT_TRUE(device->wait_for_batches(1));
    ASSERT_TRUE(eventually([&] { return device->blocking_waits() >= 1; }));  // its waiter is in
    auto express = gpu.relu({500.0f}, high());
    ASSERT_TRUE(device->wait_for_batches(2));
    EXPECT_EQ(executor.stats().express_batches, 1u);
    EXPECT_EQ(ready_within(express, beside ? 30s : 50ms), beside)
        << (beside ? "the express request waited for the regular batch" : "resolved beside it while off");
    EXPECT_EQ(first.wait_for(0s), std::future_status::timeout) << "the regular batch is still held";
    device->release(1000.0f);
    ASSERT_TRUE(ready_within(express, 30s));
    ASSERT_TRUE(ready_within(first, 30s));
    EXPECT_EQ(express.get(), std::vector<float>{500.0f});
    EXPECT_EQ(first.get(), std::vector<float>{1000.0f});
  }
}

// With the express slot free and a regular slot free, a high request under the deadline policy
// waits for max_wait like any other; the strand sleeps meanwhile (it ran thousands of times in
// those 30 ms when a free express slot counted as something to wake it for).
TEST(Priority, AHighRequestUnderTheDeadlinePolicyWaitsWithoutSpinningTheStrand) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig c = BatchConfig::balanced();
  c.priority_levels = 2;
  c.max_wait = 30ms;
  BatchExecutor executor(device, c);
  const auto start = Clock::now();
  auto f = executor.handle().relu({-2.0f}, high());
  ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_EQ(f.get(), std::vector<float>{0.0f});
  EXPECT_GE(Clock::now() - start, 30ms) << "held for max_wait";
  const Stats s = executor.stats();
  EXPECT_LT(s.strand_runs, 50u);
  EXPECT_EQ(s.express_batches, 0u);
}

TEST(Priority, ALevelTheExecutorLacksFailsAloneWithInvalidArgument) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, two_levels(8));
  auto gpu = executor.handle();
  auto bad = gpu.relu({1.0f}, SubmitOptions::with_priority(2));
  auto good = gpu.relu({-1.0f}, high());
  ASSERT_TRUE(ready_within(bad, 30s));
  const Outcome o = outcome(bad);
  EXPECT_EQ(o.code, ErrorCode::invalid_argument);
  EXPECT_NE(o.message.find("priority 2"), std::string::npos) << o.message;
  ASSERT_TRUE(ready_within(good, 30s));
  EXPECT_EQ(good.get(), (std::vector<float>{0.0f}));
  // One level (the default): any priority above 0 is refused the same way.
  BatchExecutor plain(device, BatchConfig{});
  auto refused = plain.handle().relu({1.0f}, high());
  EXPECT_EQ(error_code(refused), ErrorCode::invalid_argument);
}

TEST(Priority, EachLevelHasItsOwnQueueCapacity) {
  EnvGuard one("GPUBATCH_EXPRESS_DEPTH", "1");  // the room counted below has one express slot
  auto device = std::make_shared<FakeDevice>();
  device->pause();
  BatchConfig c = two_levels(1);
  c.overflow = OverflowPolicy::reject;
  c.level_queue_capacity[1] = 2;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  // Level 1 holds at most 2 in its queue, 1 in the former and 1 in the express slot (paused):
  // of 6, at least 2 are refused.
  std::vector<std::future<std::vector<float>>> highs;
  for (int i = 0; i < 6; ++i) highs.push_back(gpu.relu({static_cast<float>(i)}, high()));
  // Level 0 still has its own room.
  std::vector<std::future<std::vector<float>>> lows;
  for (int i = 0; i < 5; ++i) lows.push_back(gpu.relu({static_cast<float>(i)}));
  device->resume();
  int refused = 0;
  for (auto& f : highs) {
    ASSERT_TRUE(ready_within(f, 30s));
    const Outcome o = outcome(f);
    if (o.code) {
      EXPECT_EQ(o.code, ErrorCode::queue_full);
      EXPECT_NE(o.message.find("at priority 1"), std::string::npos) << o.message;
      ++refused;
    }
  }
  EXPECT_GE(refused, 2);
  for (auto& f : lows) {
    ASSERT_TRUE(ready_within(f, 30s));
    EXPECT_FALSE(error_code(f));
  }
  ASSERT_TRUE(ready_within(first, 30s));
}

TEST(Priority, ALevelsTimeoutIsTheDeadlineOfItsRequestsThatNameNone) {
  EnvGuard one("GPUBATCH_EXPRESS_DEPTH", "1");  // one express slot, taken below
  auto device = std::make_shared<FakeDevice>();
  device->pause();
  BatchConfig c = two_levels(4);
  c.level_timeout[1] = 30ms;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  auto express = gpu.relu({5.0f}, SubmitOptions::within(60s).prioritised(1));  // the express slot
  ASSERT_TRUE(device->wait_for_batches(2));
  const auto start = Clock::now();
  auto timed = gpu.relu({2.0f}, high());
  auto own = gpu.relu({3.0f}, SubmitOptions::within(60s).prioritised(1));  // its own deadline wins
  auto low = gpu.relu({4.0f});
  ASSERT_TRUE(ready_within(timed, 30s));
  EXPECT_GE(Clock::now() - start, 30ms);
  EXPECT_EQ(error_code(timed), ErrorCode::deadline_exceeded);
  EXPECT_FALSE(ready(own));
  EXPECT_FALSE(ready(low));
  device->resume();
  for (auto* f : {&first, &express, &own, &low}) {
    ASSERT_TRUE(ready_within(*f, 30s));
    EXPECT_FALSE(error_code(*f));
  }
}

TEST(Priority, ManyThreadsOnThreeLevelsAllResolveCorrectly) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 100us});
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = 64;
  c.priority_levels = 3;
  c.priority_aging = 2ms;
  BatchExecutor executor(device, c);
  constexpr int kThreads = 8, kEach = 300;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto gpu = executor.handle();
      std::vector<std::pair<float, std::future<std::vector<float>>>> mine;
      for (int i = 0; i < kEach; ++i) {
        const float x = static_cast<float>(t * kEach + i) - 1000.0f;
        mine.emplace_back(x, gpu.relu({x}, SubmitOptions::with_priority(static_cast<std::uint32_t>(i % 3))));
      }
      for (auto& [x, f] : mine)
        if (f.get() != std::vector<float>{std::max(0.0f, x)}) ++wrong;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const Stats s = executor.stats();
  EXPECT_EQ(s.submitted, static_cast<std::uint64_t>(kThreads * kEach));
  EXPECT_EQ(s.completed, static_cast<std::uint64_t>(kThreads * kEach));
  EXPECT_EQ(s.queue_depth, 0u);
}

TEST(Priority, StatsAndPrometheusBreakLatencyDownByLevelAndOperation) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, two_levels(16));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> all;
  for (int i = 0; i < 5; ++i) all.push_back(gpu.relu({1.0f}, high()));
  for (int i = 0; i < 3; ++i) all.push_back(gpu.add({1.0f}, {2.0f}));
  for (auto& f : all) ASSERT_TRUE(ready_within(f, 30s));
  const Stats s = executor.stats();
  ASSERT_EQ(s.end_to_end_by_priority.size(), 2u);
  EXPECT_EQ(s.end_to_end_by_priority[0].label, "0");
  EXPECT_EQ(s.end_to_end_by_priority[0].summary.count, 3u);
  EXPECT_EQ(s.end_to_end_by_priority[1].summary.count, 5u);
  ASSERT_EQ(s.end_to_end_by_op.size(), 2u);  // only the operations that ran
  for (const LatencyClass& c : s.end_to_end_by_op) {
    EXPECT_TRUE(c.label == "relu" || c.label == "add") << c.label;
    EXPECT_EQ(c.summary.count, c.label == "relu" ? 5u : 3u);
    std::uint64_t last = 0;
    for (const auto& [le, n] : c.buckets) {
      EXPECT_GE(n, last) << "buckets are cumulative";
      last = n;
    }
    EXPECT_LE(last, c.summary.count);
  }
  const std::string text = to_prometheus(s);
  EXPECT_NE(text.find("# TYPE gpubatch_priority_end_to_end_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("gpubatch_priority_end_to_end_seconds_bucket{priority=\"1\",le=\"+Inf\"} 5\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("gpubatch_op_end_to_end_seconds_count{op=\"add\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpubatch_op_end_to_end_seconds_bucket{op=\"relu\",le=\"0.001\"}"), std::string::npos)
      << text;
}

// A pass spends at most a budget of pulls (the count limit and 1,024 more), requests the watch
// already failed included. One that ends at its budget with requests left above level 0 runs
// again (ExecutorCore::note_upper_left): here the strand, held, comes back to more than two
// passes' worth of level-1 requests the watch has failed, with live ones behind them. Before,
// the second pass cleared the only signal for the levels above 0 and the live ones waited for a
// push that never came (CI's TSan run hung on ManyThreadsOnThreeLevelsAllResolveCorrectly so).
TEST(Priority, LiveRequestsBehindTwoPassesOfExpiredOnesAboveLevelZeroAreServed) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = 16;
  c.priority_levels = 2;
  c.deadline_admission = false;  // queue them all, however late they will be
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  auto first = hold_the_strand(*device, gpu);
  constexpr int kExpiring = 2 * (16 + 1024) + 100;
  SubmitOptions expiring = SubmitOptions::within(200ms);  // all queued by then, even under TSan
  expiring.priority = 1;
  std::vector<std::future<std::vector<float>>> failed, live;
  for (int i = 0; i < kExpiring; ++i) failed.push_back(gpu.relu({-1.0f}, expiring));
  for (int i = 0; i < 5; ++i) live.push_back(gpu.relu({float(i)}, SubmitOptions::with_priority(1)));
  for (auto& f : failed) {  // while the strand is held: the watch fails them in the queue
    ASSERT_TRUE(ready_within(f, 60s));
    ASSERT_EQ(error_code(f), ErrorCode::deadline_exceeded);
  }
  device->release_submits();
  EXPECT_EQ(first.get(), std::vector<float>{1.0f});
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(ready_within(live[i], 30s)) << i << ": a live request left above level 0";
    EXPECT_EQ(live[i].get(), std::vector<float>{float(i)});
  }
}

}  // namespace
}  // namespace gpubatch::testing
