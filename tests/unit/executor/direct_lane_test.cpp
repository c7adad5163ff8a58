// The direct lane (BatchConfig::direct_bytes; src/executor/direct_lane.cpp): a std::future's
// large request made while the executor is busy runs on its caller's thread, beside the batches,
// and comes back ready. Everything else keeps the batched path.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
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

// Host memory of the test's own (the fake device reads it through the reference).
struct TestHostMemory : detail::HostMemory {
  explicit TestHostMemory(Floats v) : storage(std::move(v)) {
    data = storage.data();
    floats = storage.size();
  }
  Floats storage;
};
HostBuffer host_memory(Floats values) { return HostBuffer(std::make_shared<TestHostMemory>(std::move(values))); }


TEST(DirectLane, ALargeFutureOfABusyExecutorRunsOnItsCallersThreadAndComesBackReady) {
  BusyExecutor busy;
  std::thread::id caller;
  std::atomic<bool> returned{false};
  std::future<Floats> large;
  std::thread t([&] {
    caller = std::this_thread::get_id();
    large = busy.executor.handle().relu(large_input(-2.0f));
    returned = true;
  });
  ASSERT_TRUE(busy.device->wait_for_submits_entered(2, 30s));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(returned.load()) << "the call waits for its own batch";
  busy.device->resume();
  t.join();
  EXPECT_EQ(busy.device->submit_threads().at(1), caller) << "the caller's own thread submitted it";
  ASSERT_EQ(large.wait_for(0s), std::future_status::ready) << "the future comes back ready";
  EXPECT_EQ(large.get(), relu_of(large_input(-2.0f)));
  EXPECT_EQ(busy.small.get(), Floats{0.0f});
  const Stats s = busy.executor.stats();
  EXPECT_EQ(s.direct, 1u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.submitted, 2u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(s.batches, 1u) << "the lane's request is no batch of the strand's";
  EXPECT_NE(to_prometheus(s).find("gpubatch_direct_requests_total 1"), std::string::npos);
}

// The request goes through the strand when: the lane is off, the executor is idle, the request
// is below the line, carries a deadline or a priority, or is a completion handler's (other than
// handle.run()'s, whose caller waits; the bulk lane's threads take those: bulk_lane_test.cpp).
TEST(DirectLane, EverythingElseTakesTheBatchedPath) {
  auto via_strand = [](BusyExecutor& busy, auto submit) {
    const std::size_t before = busy.device->submit_threads().size();
    std::thread::id caller = std::this_thread::get_id();
    auto result = submit(busy.executor.handle());
    EXPECT_TRUE(busy.device->wait_for_submits_entered(before + 1, 30s));
    std::this_thread::sleep_for(10ms);
    const auto threads = busy.device->submit_threads();
    for (std::size_t i = before; i < threads.size(); ++i) EXPECT_NE(threads[i], caller);
    return result;
  };
  {
    BatchConfig off = BatchConfig::adaptive();
    off.direct_bytes = 0;
    BusyExecutor busy(off);
    auto f = via_strand(busy, [](BatchedGpuHandle gpu) { return gpu.relu(large_input(3.0f)); });
    EXPECT_NE(f.wait_for(0s), std::future_status::ready) << "a batched future comes back pending";
    busy.device->resume();
    EXPECT_EQ(f.get(), large_input(3.0f));
    EXPECT_EQ(busy.executor.stats().direct, 0u);
  }
  {
    BatchConfig higher = BatchConfig::adaptive();
    higher.direct_bytes = std::size_t{16} << 20;
    BusyExecutor busy(higher);
    auto f = via_strand(busy, [](BatchedGpuHandle gpu) { return gpu.relu(large_input(4.0f)); });
    busy.device->resume();
    EXPECT_EQ(f.get(), large_input(4.0f)) << "below the configured line";
  }
  {
    BusyExecutor busy;
    auto f = via_strand(busy, [](BatchedGpuHandle gpu) {
      return gpu.relu(large_input(5.0f), SubmitOptions::within(60s));
    });
    busy.device->resume();
    EXPECT_EQ(f.get(), large_input(5.0f)) << "with a deadline";
    EXPECT_EQ(busy.executor.stats().direct, 0u);
  }
  {
    BatchConfig levels = BatchConfig::adaptive();
    levels.priority_levels = 2;
    BusyExecutor busy(levels);
    auto f = via_strand(busy, [](BatchedGpuHandle gpu) {
      return gpu.relu(large_input(6.0f), SubmitOptions::with_priority(1));
    });
    busy.device->resume();
    EXPECT_EQ(f.get(), large_input(6.0f)) << "at priority 1";
    EXPECT_EQ(busy.executor.stats().direct, 0u);
  }
  {
    BusyExecutor busy;
    std::promise<Floats> got;
    via_strand(busy, [&](BatchedGpuHandle gpu) {
      gpu.relu(large_input(7.0f), [&](std::exception_ptr e, Floats v) {
        if (e) got.set_exception(e);
        else got.set_value(std::move(v));
      });
      return 0;
    });
    busy.device->resume();
    EXPECT_EQ(got.get_future().get(), large_input(7.0f)) << "a handler's call never waits";
    EXPECT_EQ(busy.executor.stats().direct, 1u) << "a lane thread's: bulk_lane_test.cpp";
  }
  {
    // Data all in HostBuffers: no copy for the lanes to take off the strand (a future, a handler).
    BusyExecutor busy;
    HostBuffer in = host_memory(large_input(9.0f)), out = host_memory(Floats(600'000));
    auto f = via_strand(busy, [&](BatchedGpuHandle gpu) { return gpu.submit(Request::from_host(Op::relu, in).deliver_to(out)); });
    std::promise<Result> got;
    via_strand(busy, [&](BatchedGpuHandle gpu) {
      gpu.submit(Request::from_host(Op::relu, in).deliver_to(out), [&](std::exception_ptr e, Result r) {
        if (e) got.set_exception(e);
        else got.set_value(std::move(r));
      });
      return 0;
    });
    busy.device->resume();
    f.get();
    got.get_future().get();
    EXPECT_EQ(busy.executor.stats().direct, 0u) << "from HostBuffers";
  }
  {
    EnvGuard on("GPUBATCH_LANES_FOR_HOST_BUFFERS", "on");  // the rule before, for side-by-side runs
    BusyExecutor busy;
    HostBuffer in = host_memory(large_input(9.0f)), out = host_memory(Floats(600'000));
    std::thread caller([&] { busy.executor.handle().submit(Request::from_host(Op::relu, in).deliver_to(out)).get(); });
    ASSERT_TRUE(busy.device->wait_for_submits_entered(2, 30s));
    busy.device->resume();
    caller.join();
    EXPECT_EQ(busy.executor.stats().direct, 1u) << "from HostBuffers, with the switch on";
  }
  {
    auto device = std::make_shared<FakeDevice>();
    BatchExecutor idle(device, BatchConfig::adaptive());
    EXPECT_EQ(idle.handle().relu(large_input(8.0f)).get(), large_input(8.0f));
    EXPECT_EQ(idle.stats().direct, 0u) << "an idle executor batches it (its inline pass sends it at once)";
  }
}

// A submit the device refuses (a lost device, out of memory) leaves the request to the batched
// path, which handles it as it always has: here the retry there succeeds.
TEST(DirectLane, ARefusedSubmitLeavesTheRequestToTheBatchedPath) {
  BusyExecutor busy;
  busy.device->fail_next_submit(ErrorCode::device_lost, 1);
  std::future<Floats> large;
  std::thread t([&] { large = busy.executor.handle().relu(large_input(-1.0f)); });
  ASSERT_TRUE(busy.device->wait_for_submits_entered(3, 30s)) << "the lane's try, then the strand's";
  busy.device->resume();
  t.join();
  EXPECT_EQ(large.get(), relu_of(large_input(-1.0f)));
  EXPECT_EQ(busy.device->submit_faults(), 1);
  EXPECT_EQ(busy.executor.stats().direct, 0u);
  EXPECT_EQ(busy.small.get(), Floats{0.0f});
}

// A batch that fails on the device fails the lane's request alone, with the batch's error, and
// the executor recovers the device as for any batch.
TEST(DirectLane, AFailedBatchFailsItsRequestWithTheDevicesError) {
  BusyExecutor busy;
  busy.device->fail_next_wait(ErrorCode::device_lost, 1);
  std::future<Floats> large;
  std::thread t([&] { large = busy.executor.handle().relu(large_input(-1.0f)); });
  ASSERT_TRUE(busy.device->wait_for_submits_entered(2, 30s));
  busy.device->resume();
  t.join();
  ASSERT_EQ(large.wait_for(0s), std::future_status::ready);
  std::vector<ErrorCode> codes;
  for (auto* f : {&large, &busy.small}) {
    try {
      f->get();
    } catch (const Error& e) {
      codes.push_back(e.code());
    }
  }
  ASSERT_EQ(codes.size(), 1u) << "one of the two batches met the injected fault";
  EXPECT_EQ(codes[0], ErrorCode::device_lost);
  EXPECT_GE(busy.device->recoveries(), 1);
  const Stats s = busy.executor.stats();
  EXPECT_EQ(s.completed + s.device_errors, 2u);
}

// shutdown() waits for a request in the lane; one made after shutdown began is refused.
TEST(DirectLane, ShutdownWaitsForTheLaneAndRefusesLaterRequests) {
  BusyExecutor busy;
  std::future<Floats> large;
  std::thread t([&] { large = busy.executor.handle().relu(large_input(2.0f)); });
  ASSERT_TRUE(busy.device->wait_for_submits_entered(2, 30s));
  std::atomic<bool> shut{false};
  std::thread s([&] {
    busy.executor.shutdown(ShutdownMode::drain);
    shut = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(shut.load()) << "shutdown waits for both requests";
  busy.device->resume();
  t.join();
  s.join();
  EXPECT_EQ(large.get(), large_input(2.0f));
  auto late = busy.executor.handle().relu(large_input(1.0f));
  try {
    late.get();
    ADD_FAILURE() << "a request after shutdown was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::shut_down);
  }
}

// Many callers mixing large and small requests against a device that takes its time: every
// result is right, every future resolves, and the counts add up (TSan runs this in CI).
TEST(DirectLane, ManyCallersMixingLargeAndSmallRequestsGetEveryResult) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 200us});
  BatchConfig config = BatchConfig::adaptive();
  config.direct_bytes = 64 << 10;  // 16,384 floats and up
  BatchExecutor executor(device, config);
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      auto gpu = executor.handle();
      std::vector<std::pair<Floats, std::future<Floats>>> pending;
      for (int i = 0; i < kEach; ++i) {
        Floats x = random_floats(i % 3 == 0 ? 20'000 : 64, rng);
        auto f = gpu.relu(x);
        pending.emplace_back(std::move(x), std::move(f));
      }
      for (auto& [x, f] : pending)
        if (f.get() != relu_of(x)) ++wrong;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, std::uint64_t{kThreads * kEach});
  EXPECT_EQ(s.submitted, std::uint64_t{kThreads * kEach});
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_LE(s.direct, std::uint64_t{kThreads * ((kEach + 2) / 3)});
  EXPECT_GT(s.direct, 0u) << "a burst of callers keeps the executor busy: large ones take the lane";
}

// A device of host cores (lavapipe) keeps its large requests batched: the device's work on those
// cores, not the strand's copy, is what limits them there. GPUBATCH_HOST_DIRECT=on lifts that.
TEST(DirectLane, IsOffOnADeviceOfHostCoresUnlessAsked) {
  for (const char* env : {"", "on"}) {
    EnvGuard guard("GPUBATCH_HOST_DIRECT", env);
    auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.host_cpu = true});
    BatchExecutor executor(device, BatchConfig::adaptive());
    device->pause();
    auto small = executor.handle().relu({1.0f});
    ASSERT_TRUE(device->wait_for_inflight(1, 30s));
    std::future<Floats> large;
    std::thread t([&] { large = executor.handle().relu(large_input(1.0f)); });
    ASSERT_TRUE(device->wait_for_submits_entered(2, 30s));
    device->resume();
    t.join();
    EXPECT_EQ(large.get(), large_input(1.0f));
    EXPECT_EQ(executor.stats().direct, *env ? 1u : 0u) << "GPUBATCH_HOST_DIRECT='" << env << "'";
  }
}

// handle.run() waits for its result anyway: its large request takes the lane too.
TEST(DirectLane, ASynchronousRunTakesTheLaneToo) {
  BusyExecutor busy;
  std::thread::id caller;
  Result result;
  std::thread t([&] {
    caller = std::this_thread::get_id();
    result = busy.executor.handle().run(Request::unary(Op::relu, large_input(-3.0f)));
  });
  ASSERT_TRUE(busy.device->wait_for_submits_entered(2, 30s));
  busy.device->resume();
  t.join();
  EXPECT_EQ(busy.device->submit_threads().at(1), caller);
  EXPECT_EQ(result.values, relu_of(large_input(-3.0f)));
  EXPECT_EQ(busy.executor.stats().direct, 1u);
}

// A request the device takes in chunks (BatchDevice::submit_split, from its split_bytes()) on an
// idle executor runs on its caller's thread and counts as split and as direct; a refused split,
// and what the lane never takes (handlers, deadlines, priorities), go to the strand.
TEST(DirectLane, ALoneRequestTheDeviceSplitsRunsOnItsCallersThread) {
  FakeDevice::Options options;
  options.split_bytes = 64 << 10;
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  std::future<Floats> f = gpu.relu(Floats(20'000, -1.5f));
  EXPECT_EQ(f.wait_for(0s), std::future_status::ready) << "ran in the call";
  EXPECT_EQ(f.get(), Floats(20'000, 0.0f));
  EXPECT_EQ(gpu.run(Request::unary(Op::relu, Floats(20'000, 2.0f))).values, Floats(20'000, 2.0f));
  EXPECT_EQ(device->splits(), 2);
  EXPECT_EQ(device->submit_threads(), (std::vector<std::thread::id>(2, std::this_thread::get_id())));
  EXPECT_EQ(gpu.relu(Floats(1000, -1.0f)).get(), Floats(1000, 0.0f)) << "below the line: batched";
  std::promise<Floats> handled;
  gpu.relu(Floats(20'000, 3.0f), [&](std::exception_ptr e, Floats v) {
    if (e) handled.set_exception(e);
    else handled.set_value(std::move(v));
  });
  EXPECT_EQ(handled.get_future().get(), Floats(20'000, 3.0f)) << "a handler: batched";
  SubmitOptions high;
  high.deadline = std::chrono::steady_clock::now() + 10s;
  EXPECT_EQ(gpu.submit(Request::unary(Op::relu, Floats(20'000, -4.0f)), high).get().values, Floats(20'000, 0.0f));
  EXPECT_EQ(device->splits(), 2) << "neither the handler's nor the deadline's request split";
  const Stats s = executor.stats();
  EXPECT_EQ(s.split, 2u);
  EXPECT_EQ(s.direct, 2u) << "split requests are the lane's";
  EXPECT_EQ(s.completed, 5u);
  EXPECT_EQ(s.batches, 3u);
  EXPECT_NE(to_prometheus(s).find("gpubatch_split_requests_total 2"), std::string::npos);
}

// Beside a batch in flight the chunks' helpers and the device are busy: the large request takes
// the direct lane whole instead.
TEST(DirectLane, ABusyExecutorDoesNotSplit) {
  FakeDevice::Options options;
  options.split_bytes = 64 << 10;
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, BatchConfig::adaptive());
  device->pause();
  auto small = executor.handle().relu({-1.0f});
  ASSERT_TRUE(device->wait_for_inflight(1, 30s));
  std::future<Floats> large;
  std::thread t([&] { large = executor.handle().relu(large_input(-2.0f)); });
  ASSERT_TRUE(device->wait_for_submits_entered(2, 30s));
  device->resume();
  t.join();
  EXPECT_EQ(large.get(), relu_of(large_input(-2.0f)));
  EXPECT_EQ(small.get(), Floats{0.0f});
  EXPECT_EQ(device->splits(), 0);
  const Stats s = executor.stats();
  EXPECT_EQ(s.split, 0u);
  EXPECT_EQ(s.direct, 1u) << "the direct lane took it whole";
}

// On a paused device: caller A's large request goes alone (in chunks: nothing else runs), then
// caller B's comes beside it; both results are checked. The executor's stats after.
Stats chunked_then_beside(FakeDevice& device, BatchExecutor& executor) {
  auto gpu = executor.handle();
  device.pause();
  std::future<Floats> first, second;
  std::thread a([&] { first = gpu.relu(large_input(-1.0f)); });
  EXPECT_TRUE(device.wait_for_inflight(1, 30s));
  std::thread b([&] { second = gpu.relu(large_input(-2.0f)); });
  EXPECT_TRUE(device.wait_for_inflight(2, 30s));
  device.resume();
  a.join();
  b.join();
  EXPECT_EQ(first.get(), relu_of(large_input(-1.0f)));
  EXPECT_EQ(second.get(), relu_of(large_input(-2.0f)));
  EXPECT_EQ(device.splits(), 1) << "the first alone in chunks, the second never beside it";
  return executor.stats();
}

// A large request running alone (in chunks, or whole on the lane) makes the executor busy for
// the lanes: another caller's large request then takes the direct lane whole, never the strand
// (which would copy its input alone) and never chunks beside it.
TEST(DirectLane, ALargeRequestRunningKeepsTheNextOnTheLaneWhole) {
  FakeDevice::Options options;
  options.split_bytes = 64 << 10;
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  Stats s = chunked_then_beside(*device, executor);
  EXPECT_EQ(s.direct, 2u);
  EXPECT_EQ(s.batches, 0u) << "the second waited for the strand";

  // One on the lane whole (it came beside a batch, which then finished), a next one beside it.
  device->hold(-3.0f);
  device->hold(-4.0f);
  auto small = gpu.relu({-3.0f});
  ASSERT_TRUE(device->wait_for_inflight(1, 30s));
  std::future<Floats> lane, next;
  std::thread c([&] { lane = gpu.relu(large_input(-4.0f)); });
  ASSERT_TRUE(device->wait_for_inflight(2, 30s));
  device->release(-3.0f);
  ASSERT_TRUE(ready_within(small, 30s));
  EXPECT_EQ(small.get(), Floats{0.0f});
  ASSERT_TRUE(eventually([&] { return executor.stats().inflight_batches == 0; }));
  std::thread d([&] { next = gpu.relu(large_input(-5.0f)); });
  ASSERT_TRUE(device->wait_for_submits_entered(5, 30s));
  device->release(-4.0f);
  c.join();
  d.join();
  EXPECT_EQ(lane.get(), relu_of(large_input(-4.0f)));
  EXPECT_EQ(next.get(), relu_of(large_input(-5.0f)));
  EXPECT_EQ(device->splits(), 1) << "the next went in chunks beside the lane's request";
  s = executor.stats();
  EXPECT_EQ(s.direct, 4u);
  EXPECT_EQ(s.completed, 5u);
}

// GPUBATCH_LANES_BUSY=batches: the rule before, for side-by-side runs: beside a request in chunks
// (no batch in flight) the next large request counts the executor idle and is batched.
TEST(DirectLane, TheOldBusyRuleBatchesTheNextBesideAChunkedRequest) {
  EnvGuard old("GPUBATCH_LANES_BUSY", "batches");
  FakeDevice::Options options;
  options.split_bytes = 64 << 10;
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, BatchConfig::adaptive());
  const Stats s = chunked_then_beside(*device, executor);
  EXPECT_EQ(s.direct, 1u);
  EXPECT_EQ(s.batches, 1u);
}

TEST(DirectLane, ASplitTheDeviceRefusesIsBatched) {
  FakeDevice::Options options;
  options.split_bytes = 64 << 10;
  options.split_refuses = true;
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, BatchConfig::adaptive());
  EXPECT_EQ(executor.handle().relu(Floats(20'000, -1.0f)).get(), Floats(20'000, 0.0f));
  const Stats s = executor.stats();
  EXPECT_EQ(s.split, 0u);
  EXPECT_EQ(s.batches, 1u);
  EXPECT_EQ(s.completed, 1u);
  EXPECT_EQ(s.device_errors, 0u);
}

}  // namespace
}  // namespace gpubatch::testing
