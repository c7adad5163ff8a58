// The bulk lane (src/executor/bulk_lane.cpp): a completion handler's large request made while the
// executor is busy is submitted, awaited and resolved by a thread of the lane, beside the batches;
// its caller's call returns at once. GPUBATCH_BULK_LANE=off, and every request the direct lane's
// rules keep out, take the batched path.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "busy_executor.hpp"
#include "config_test_util.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "gpubatch/stats.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using Floats = std::vector<float>;


std::string this_thread_name() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

struct Outcome {
  std::optional<Floats> value;
  std::optional<ErrorCode> error;
  std::string thread;
};

// A handler that keeps what it got and the name of the thread it ran on.
auto keeping(std::promise<Outcome>& into) {
  return [&into](std::exception_ptr e, Floats v) {
    Outcome o;
    o.thread = this_thread_name();
    try {
      if (e) std::rethrow_exception(e);
      o.value = std::move(v);
    } catch (const Error& x) {
      o.error = x.code();
    }
    into.set_value(std::move(o));
  };
}


TEST(BulkLane, AHandlersLargeRequestRunsOnALaneThreadAndItsCallReturnsAtOnce) {
  BusyExecutor busy;
  std::promise<Outcome> got;
  busy.executor.handle().relu(large_input(-2.0f), keeping(got));  // returns: the test goes on
  ASSERT_TRUE(busy.device->wait_for_submits_entered(2, 30s)) << "the lane submitted it";
  auto outcome = got.get_future();
  EXPECT_EQ(outcome.wait_for(20ms), std::future_status::timeout) << "the device is paused";
  busy.device->resume();
  ASSERT_EQ(outcome.wait_for(30s), std::future_status::ready);
  const Outcome o = outcome.get();
  ASSERT_TRUE(o.value.has_value());
  EXPECT_EQ(*o.value, relu_of(large_input(-2.0f)));
  EXPECT_EQ(o.thread, "gpubatch-bulk");
  EXPECT_EQ(busy.small.get(), Floats{0.0f});
  busy.executor.shutdown();
  const Stats s = busy.executor.stats();
  EXPECT_EQ(s.direct, 1u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(s.batches, 1u) << "the lane's request is no batch of the strand's";
}

// Off, below the line, with a deadline, or on an idle executor: the batched path.
TEST(BulkLane, EverythingElseTakesTheBatchedPath) {
  auto batched = [](BusyExecutor& busy, auto send) {
    std::promise<Outcome> got;
    send(busy.executor.handle(), keeping(got));
    busy.device->resume();
    auto outcome = got.get_future();
    EXPECT_EQ(outcome.wait_for(30s), std::future_status::ready);
    const Outcome o = outcome.get();
    EXPECT_NE(o.thread, "gpubatch-bulk");
    EXPECT_TRUE(o.value.has_value());
    EXPECT_EQ(busy.executor.stats().direct, 0u);
  };
  {
    std::optional<BusyExecutor> busy;
    {
      EnvGuard off("GPUBATCH_BULK_LANE", "off");  // read when the executor is made
      busy.emplace();
    }
    batched(*busy, [](BatchedGpuHandle gpu, auto h) { gpu.relu(large_input(3.0f), h); });
  }
  {
    BatchConfig higher = BatchConfig::adaptive();
    higher.direct_bytes = std::size_t{16} << 20;
    BusyExecutor busy(std::make_shared<FakeDevice>(), higher);
    batched(busy, [](BatchedGpuHandle gpu, auto h) { gpu.relu(large_input(4.0f), h); });
  }
  {
    BusyExecutor busy;
    batched(busy, [](BatchedGpuHandle gpu, auto h) { gpu.relu(large_input(5.0f), SubmitOptions::within(60s), h); });
  }
  {
    auto device = std::make_shared<FakeDevice>();
    BatchExecutor idle(device, BatchConfig::adaptive());
    std::promise<Outcome> got;
    idle.handle().relu(large_input(6.0f), keeping(got));
    const Outcome o = got.get_future().get();
    EXPECT_NE(o.thread, "gpubatch-bulk");
    EXPECT_EQ(idle.stats().direct, 0u) << "an idle executor batches it";
  }
}

// More large requests at once than the lane holds: the rest are batched; every one resolves with
// its own right result, and shutdown (drain) waits for those still in the lane.
TEST(BulkLane, ACrowdOfLargeRequestsAllResolveRightAndShutdownWaitsForThem) {
  BatchConfig line = BatchConfig::adaptive();
  line.direct_bytes = 65536;  // 16,384 floats in and out: "large" here, and cheap
  BusyExecutor busy(std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 200us}), line);
  constexpr int kRequests = 300;
  auto input = [](int i) { return Floats(16'384, static_cast<float>(i % 2 ? -i : i)); };
  std::vector<std::promise<Outcome>> got(kRequests);
  for (int i = 0; i < kRequests; ++i) busy.executor.handle().relu(input(i), keeping(got[i]));
  busy.device->resume();
  busy.executor.shutdown(ShutdownMode::drain);
  int on_lane = 0;
  for (int i = 0; i < kRequests; ++i) {
    auto f = got[i].get_future();
    ASSERT_EQ(f.wait_for(0s), std::future_status::ready) << "resolved before shutdown returned";
    const Outcome o = f.get();
    ASSERT_TRUE(o.value.has_value()) << i;
    EXPECT_EQ(*o.value, relu_of(input(i))) << i;
    on_lane += o.thread == "gpubatch-bulk";
  }
  const Stats s = busy.executor.stats();
  EXPECT_EQ(s.completed, static_cast<std::uint64_t>(kRequests + 1));
  EXPECT_EQ(s.direct, static_cast<std::uint64_t>(on_lane));
  EXPECT_GE(on_lane, 1);
  EXPECT_LT(on_lane, kRequests) << "the lane holds 256 at most; the rest were batched";
}

// Shutdown in cancel mode fails the requests still waiting in the lane with shut_down; every
// request resolves once, and shutdown returns after all of them.
TEST(BulkLane, ShutdownInCancelModeFailsTheRequestsStillWaiting) {
  BusyExecutor busy;
  constexpr int kRequests = 8;  // four threads take four; four wait
  std::vector<std::promise<Outcome>> got(kRequests);
  for (int i = 0; i < kRequests; ++i) busy.executor.handle().relu(large_input(static_cast<float>(i)), keeping(got[i]));
  ASSERT_TRUE(busy.device->wait_for_submits_entered(1 + 4, 30s)) << "the small batch and four lane threads";
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(busy.device->submit_threads().size(), 5u) << "the other four wait for a thread";
  auto closing = std::async(std::launch::async, [&] { busy.executor.shutdown(ShutdownMode::cancel); });
  std::this_thread::sleep_for(10ms);
  busy.device->resume();
  ASSERT_EQ(closing.wait_for(30s), std::future_status::ready);
  int shut = 0, served = 0;
  for (int i = 0; i < kRequests; ++i) {
    auto f = got[i].get_future();
    ASSERT_EQ(f.wait_for(0s), std::future_status::ready) << i;
    const Outcome o = f.get();
    if (o.value) {
      EXPECT_EQ(*o.value, relu_of(large_input(static_cast<float>(i))));
      ++served;
    } else {
      EXPECT_EQ(o.error, ErrorCode::shut_down) << i;
      ++shut;
    }
  }
  EXPECT_GE(shut, 4) << "those not yet submitted";
  EXPECT_EQ(busy.device->submit_threads().size(), 5u) << "nothing submitted after the cancel";
  const Stats s = busy.executor.stats();
  EXPECT_EQ(s.direct, static_cast<std::uint64_t>(served));
  EXPECT_EQ(s.queue_depth, 0u);
}

// A submit the device refuses fails that request alone, with the device's error; the executor
// recovers the device and goes on.
TEST(BulkLane, ARefusedSubmitFailsItsRequestWithTheDevicesError) {
  BusyExecutor busy;
  busy.device->fail_next_submit(ErrorCode::device_lost, 1);
  std::promise<Outcome> got;
  busy.executor.handle().relu(large_input(-1.0f), keeping(got));
  busy.device->resume();
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  const Outcome o = f.get();
  EXPECT_EQ(o.error, ErrorCode::device_lost);
  EXPECT_GE(busy.device->recoveries(), 1);
  EXPECT_EQ(busy.small.get(), Floats{0.0f});
  std::promise<Outcome> again;
  busy.executor.handle().relu(large_input(-3.0f), keeping(again));
  const Outcome o2 = again.get_future().get();
  ASSERT_TRUE(o2.value.has_value());
  EXPECT_EQ(*o2.value, relu_of(large_input(-3.0f)));
}

// The watchdog counts from a job's submission, not from its arrival: jobs that waited in the lane
// longer than batch_timeout (behind two rounds of four) are served, not failed as device_lost.
// 16,384-float requests are "large" here (cheap under a sanitizer); each takes 400 ms, so the
// last round ends ~1.2 s after its arrival, against a 1 s watchdog with 0.6 s to spare.
TEST(BulkLane, AJobsWaitInTheLaneIsNotCountedAgainstItsWatchdog) {
  BatchConfig config = BatchConfig::adaptive();
  config.direct_bytes = 65536;
  config.batch_timeout = std::chrono::milliseconds(1000);
  BusyExecutor busy(std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 400ms}), config);
  constexpr int kRequests = 12;  // three rounds of the lane's four threads
  auto input = [](int i) { return Floats(16'384, static_cast<float>(i % 2 ? -i : i)); };
  std::vector<std::promise<Outcome>> got(kRequests);
  for (int i = 0; i < kRequests; ++i) busy.executor.handle().relu(input(i), keeping(got[i]));
  ASSERT_TRUE(busy.device->wait_for_submits_entered(1 + 4, 30s));
  busy.device->resume();
  for (int i = 0; i < kRequests; ++i) {
    auto f = got[i].get_future();
    ASSERT_EQ(f.wait_for(30s), std::future_status::ready) << i;
    const Outcome o = f.get();
    EXPECT_FALSE(o.error.has_value()) << i << ": " << static_cast<int>(o.error.value_or(ErrorCode::internal));
    ASSERT_TRUE(o.value.has_value()) << i;
    EXPECT_EQ(*o.value, relu_of(input(i))) << i;
  }
  const Stats s = busy.executor.stats();
  EXPECT_EQ(s.device_errors, 0u);
  EXPECT_EQ(s.direct, static_cast<std::uint64_t>(kRequests)) << "all took the lane";
}

}  // namespace
}  // namespace gpubatch::testing
