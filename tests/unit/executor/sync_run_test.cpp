// BatchedGpuHandle::run: the synchronous call on the batching executor.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "config_test_util.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;

ErrorCode code_of_run(const BatchedGpuHandle& gpu, Request r) {
  try {
    gpu.run(std::move(r));
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::internal;  // no error: the caller's assertion fails
}

TEST(SyncRun, ReturnsTheResultAndThrowsTypedErrors) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device);  // adaptive: polls 200 us before sleeping
  auto gpu = executor.handle();
  EXPECT_EQ(gpu.run(Request::relu({1.0f, -2.0f})).values, (std::vector<float>{1.0f, 0.0f}));
  EXPECT_FLOAT_EQ(gpu.run(Request::dot({1, 2}, {3, 4})).values.at(0), 11.0f);
  EXPECT_EQ(code_of_run(gpu, Request::add({1.0f}, {1.0f, 2.0f})), ErrorCode::invalid_argument);
  device->fail_next_submit(ErrorCode::device_lost);
  EXPECT_EQ(code_of_run(gpu, Request::relu({1.0f})), ErrorCode::device_lost);
  EXPECT_EQ(gpu.run(Request::relu({3.0f})).values, std::vector<float>{3.0f}) << "the next call works";
  EXPECT_EQ(code_of_run(BatchedGpuHandle{}, Request::relu({1.0f})), ErrorCode::shut_down);
  executor.shutdown();
  EXPECT_EQ(code_of_run(gpu, Request::relu({1.0f})), ErrorCode::shut_down);
}

// Without polling (throughput: completion_spin 0) the caller sleeps on its result at once, and
// a slow device makes it wait past any spin.
TEST(SyncRun, SleepsUntilASlowResultArrives) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 20ms});
  for (BatchConfig config : {BatchConfig::throughput(), BatchConfig::adaptive()}) {
    config.max_wait = 1ms;
    BatchExecutor executor(device, config);
    EXPECT_EQ(executor.handle().run(Request::scale({2.0f}, 3.0f)).values, std::vector<float>{6.0f});
  }
}

TEST(SyncRun, ManyCallersEachGetTheirOwnResult) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 100us});
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const float x = static_cast<float>(t * 1000 + i);
        if (gpu.run(Request::relu({x, -x})).values != std::vector<float>{x, 0.0f}) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(executor.stats().completed, 8u * 200u);
  EXPECT_GT(executor.stats().mean_batch_size, 1.0) << "synchronous callers are still batched together";
}

// A synchronous caller that finds the executor idle submits its batch itself (no hop to the
// strand's thread), and so does a caller of a future or of a completion handler on an idle
// executor; the handler itself still runs on an executor thread, never inside its call.
// GPUBATCH_INLINE_SUBMIT=off turns all off, GPUBATCH_FUTURE_INLINE=off the future's,
// GPUBATCH_HANDLER_INLINE=off the handler's, for side-by-side runs.
TEST(SyncRun, TheCallerSubmitsItselfWhenTheExecutorIsIdle) {
  auto device = std::make_shared<FakeDevice>();
  const auto me = std::this_thread::get_id();
  {
    BatchExecutor executor(device, BatchConfig::adaptive());
    auto gpu = executor.handle();
    EXPECT_EQ(gpu.run(Request::relu({-1.0f, 2.0f})).values, (std::vector<float>{0.0f, 2.0f}));
    ASSERT_EQ(device->submit_threads().size(), 1u);
    EXPECT_EQ(device->submit_threads()[0], me) << "an idle executor: the caller's own thread submits";
    EXPECT_EQ(gpu.relu({3.0f}).get(), std::vector<float>{3.0f});
    ASSERT_EQ(device->submit_threads().size(), 2u);
    EXPECT_EQ(device->submit_threads()[1], me) << "a future's call on an idle executor submits too";
    std::promise<std::vector<float>> handled;
    std::thread::id handler_thread;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a sparse caller (kHandlerPassGap)
    gpu.relu({4.0f}, [&](std::exception_ptr, std::vector<float> v) {
      handler_thread = std::this_thread::get_id();
      handled.set_value(std::move(v));
    });
    EXPECT_EQ(handled.get_future().get(), std::vector<float>{4.0f});
    ASSERT_EQ(device->submit_threads().size(), 3u);
    EXPECT_EQ(device->submit_threads()[2], me) << "a handler's call on an idle executor submits too";
    EXPECT_NE(handler_thread, me) << "the handler runs on an executor thread, not inside its call";
    for (int i = 0; i < 20; ++i) EXPECT_EQ(gpu.run(Request::relu({float(i)})).values, std::vector<float>{float(i)});
    EXPECT_EQ(executor.stats().completed, 23u);
  }
  {
    EnvGuard off("GPUBATCH_FUTURE_INLINE", "off");
    BatchExecutor executor(device, BatchConfig::adaptive());
    EXPECT_EQ(executor.handle().relu({6.0f}).get(), std::vector<float>{6.0f});
    EXPECT_NE(device->submit_threads().back(), me) << "GPUBATCH_FUTURE_INLINE=off: the strand's thread submits";
  }
  {
    EnvGuard off("GPUBATCH_HANDLER_INLINE", "off");
    BatchExecutor executor(device, BatchConfig::adaptive());
    std::promise<void> handled;
    executor.handle().relu({8.0f}, [&](std::exception_ptr, std::vector<float>) { handled.set_value(); });
    handled.get_future().get();
    EXPECT_NE(device->submit_threads().back(), me) << "GPUBATCH_HANDLER_INLINE=off: the strand's thread submits";
  }
  EnvGuard off("GPUBATCH_INLINE_SUBMIT", "off");
  BatchExecutor executor(device, BatchConfig::adaptive());
  EXPECT_EQ(executor.handle().run(Request::relu({5.0f})).values, std::vector<float>{5.0f});
  EXPECT_NE(device->submit_threads().back(), me) << "GPUBATCH_INLINE_SUBMIT=off: the strand's thread submits";
  EXPECT_EQ(executor.handle().relu({7.0f}).get(), std::vector<float>{7.0f});
  EXPECT_NE(device->submit_threads().back(), me) << "GPUBATCH_INLINE_SUBMIT=off: nor for a future";
  std::promise<void> handled;
  executor.handle().relu({9.0f}, [&](std::exception_ptr, std::vector<float>) { handled.set_value(); });
  handled.get_future().get();
  EXPECT_NE(device->submit_threads().back(), me) << "GPUBATCH_INLINE_SUBMIT=off: nor for a handler";
}

// A thread that sends a burst of futures into an idle executor submits at most the first lone
// batch itself; the rest go to the strand's thread, so the burst's calls stay quick.
TEST(SyncRun, ABurstOfFuturesSubmitsAtMostItsFirstBatchInline) {
  auto device = std::make_shared<FakeDevice>();
  const auto me = std::this_thread::get_id();
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  device->pause();  // no batch completes during the burst: the executor is never idle again
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 200; ++i) futures.push_back(gpu.relu({float(i)}));
  device->resume();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(futures[i].get(), std::vector<float>{float(i)});
  const auto threads = device->submit_threads();
  ASSERT_GE(threads.size(), 2u);
  EXPECT_EQ(threads[0], me) << "the first request found the executor idle";
  for (std::size_t i = 1; i < threads.size(); ++i)
    EXPECT_NE(threads[i], me) << "batch " << i << ": a batch was in flight, so the strand's thread submits";
}

// The same for a burst of completion handlers (an open loop's sender, an io thread's callbacks):
// the first finds the executor idle and submits on its caller's thread, the rest go to the
// strand's, and every handler runs on an executor thread.
TEST(SyncRun, ABurstOfHandlersSubmitsAtMostItsFirstBatchInline) {
  auto device = std::make_shared<FakeDevice>();
  const auto me = std::this_thread::get_id();
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  device->pause();
  std::atomic<int> right{0}, on_caller{0}, calls{0};
  std::promise<void> all;
  for (int i = 0; i < 200; ++i)
    gpu.relu({float(i)}, [&, i](std::exception_ptr e, std::vector<float> v) {
      if (!e && v == std::vector<float>{float(i)}) ++right;
      if (std::this_thread::get_id() == me) ++on_caller;
      if (++calls == 200) all.set_value();
    });
  device->resume();
  all.get_future().get();
  EXPECT_EQ(right.load(), 200);
  EXPECT_EQ(on_caller.load(), 0) << "no handler ran on its caller's thread";
  const auto threads = device->submit_threads();
  ASSERT_GE(threads.size(), 2u);
  EXPECT_EQ(threads[0], me) << "the first request found the executor idle";
  for (std::size_t i = 1; i < threads.size(); ++i)
    EXPECT_NE(threads[i], me) << "batch " << i << ": a batch was in flight, so the strand's thread submits";
}

// A synchronous caller that submitted a lone batch itself also completes it: it waits for the
// batch (polling, then blocking when the device is slow) and resolves it on its own thread, with
// no completion thread woken (Stats::caller_completions).
// GPUBATCH_CALLER_AWAITS=off hands every batch to the completion threads.
TEST(SyncRun, TheCallerCompletesItsOwnLoneBatch) {
  auto run_some = [](std::shared_ptr<FakeDevice> device, int calls) {
    BatchExecutor executor(device, BatchConfig::adaptive());
    auto gpu = executor.handle();
    for (int i = 0; i < calls; ++i)
      EXPECT_EQ(gpu.run(Request::scale({float(i), 1.0f}, 2.0f)).values, (std::vector<float>{2.0f * i, 2.0f}));
    const Stats s = executor.stats();
    EXPECT_EQ(s.completed, static_cast<std::uint64_t>(calls));
    EXPECT_LE(s.caller_completions, s.batches);
    return s.caller_completions;
  };
  EXPECT_GT(run_some(std::make_shared<FakeDevice>(), 50), 0u) << "an idle executor: the caller completes";
  EXPECT_GT(run_some(std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 5ms}), 3), 0u)
      << "not done within the 200 us spin: the caller blocks for it";
  // A device of host cores: completion threads never poll it, but the caller, who waits anyway,
  // polls its own batch as Device::run does.
  auto host = std::make_shared<FakeDevice>(FakeDevice::Options{.host_cpu = true});
  EXPECT_GT(run_some(host, 20), 0u);
  EXPECT_GT(host->polls(), 0u);
  EnvGuard off("GPUBATCH_CALLER_AWAITS", "off");
  EXPECT_EQ(run_some(std::make_shared<FakeDevice>(), 20), 0u);
}

// BatchConfig::lone_future_waits (adaptive, latency, realtime): a future asked of an idle executor
// is submitted and completed by its caller's own call, so it comes back ready and the caller never
// sleeps in get(). The call waits completion_spin at most: a batch not done by then goes to the
// completion threads and the future comes back pending. Off, or in a crowd, nothing waits.
TEST(SyncRun, ALoneFutureComesBackReadyFromItsOwnCall) {
  const auto me = std::this_thread::get_id();
  auto device = std::make_shared<FakeDevice>();
  {
    BatchExecutor executor(device, BatchConfig::adaptive());
    ASSERT_TRUE(executor.config().lone_future_waits);
    auto gpu = executor.handle();
    int ready = 0;
    for (int i = 0; i < 20; ++i) {
      auto f = gpu.relu({float(i), -1.0f});
      if (f.wait_for(0s) == std::future_status::ready) ++ready;
      EXPECT_EQ(f.get(), (std::vector<float>{float(i), 0.0f}));
    }
    // Each call finds the executor idle, unless the strand's thread is still awake from the last.
    EXPECT_GE(ready, 10) << "an idle executor and a quick device: the futures come back ready";
    EXPECT_GE(executor.stats().caller_completions, 10u);
    EXPECT_EQ(device->submit_threads().front(), me);
  }
  {  // A device slower than the spin: the call gives the batch to the completion threads.
    auto slow = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 20ms});
    BatchExecutor executor(slow, BatchConfig::adaptive());
    const auto start = std::chrono::steady_clock::now();
    auto f = executor.handle().relu({2.0f});
    const auto call = std::chrono::steady_clock::now() - start;
    EXPECT_NE(f.wait_for(0s), std::future_status::ready);
    EXPECT_LT(call, 15ms) << "the call waited about completion_spin (200 us), not the device's 20 ms";
    EXPECT_EQ(f.get(), std::vector<float>{2.0f});
    EXPECT_EQ(executor.stats().caller_completions, 0u);
  }
  BatchConfig off = BatchConfig::adaptive();
  off.lone_future_waits = false;
  for (const BatchConfig& config : {off, BatchConfig::throughput()}) {
    BatchExecutor executor(device, config);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(executor.handle().relu({float(i)}).get(), std::vector<float>{float(i)});
    EXPECT_EQ(executor.stats().caller_completions, 0u) << "off: the completion threads resolve every future";
  }
}

// Up to the direct line (4 MiB of input and output) a lone future takes its caller's pass too: a
// 16,384-float one waited 59-61 us for two threads' wake-ups where Device::run took 26 (H100).
TEST(SyncRun, ALoneFutureOfAFewHundredKilobytesComesBackReadyToo) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  int ready = 0;
  for (int i = 0; i < 10; ++i) {
    auto f = gpu.relu(std::vector<float>(100'000, float(i) - 5.0f));  // 800 KB in and out
    if (f.wait_for(0s) == std::future_status::ready) ++ready;
    EXPECT_EQ(f.get(), std::vector<float>(100'000, std::max(0.0f, float(i) - 5.0f)));
  }
  EXPECT_GE(ready, 5);
  EXPECT_EQ(device->submit_threads().front(), std::this_thread::get_id());
}

// A thread that holds its futures is sending a burst: only the first call of the burst waits for
// its own batch (the future it returned is still held), so the others go out together instead of
// one round trip each. Once the caller has let every future go, its next lone call waits again.
TEST(SyncRun, ABurstOfHeldFuturesWaitsOnlyForItsFirst) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 2ms});
  BatchConfig config = BatchConfig::adaptive();
  config.completion_spin = 10ms;  // longer than the device: a call that waits gets its result
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> held;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) held.push_back(gpu.relu({float(i)}));
  const auto calls = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(held.front().wait_for(0s), std::future_status::ready) << "the first call found the executor idle";
  EXPECT_EQ(executor.stats().caller_completions, 1u);
  EXPECT_LT(calls, 20 * 2ms) << "the burst's calls did not wait one device round trip each";
  for (int i = 0; i < 20; ++i) EXPECT_EQ(held[i].get(), std::vector<float>{float(i)});
  EXPECT_EQ(executor.stats().caller_completions, 1u);
  held.clear();  // every future let go: the next lone call waits again (once the executor is idle)
  for (int i = 0; i < 50 && executor.stats().caller_completions == 1; ++i) {
    while (executor.stats().inflight_batches != 0) std::this_thread::sleep_for(100us);
    EXPECT_EQ(gpu.relu({-1.0f}).get(), std::vector<float>{0.0f});
  }
  EXPECT_EQ(executor.stats().caller_completions, 2u);
}

// Synchronous callers racing with each other, with a timer (deadline policy) and with shutdown:
// whoever holds the strand, every call resolves once and the executor drains.
TEST(SyncRun, InlineRunsRaceWithTheTimerAndShutdown) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 50us});
  for (BatchConfig config : {BatchConfig::adaptive(), BatchConfig::latency()}) {
    config.max_wait = 200us;
    BatchExecutor executor(device, config);
    auto gpu = executor.handle();
    std::atomic<int> ok{0}, refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 300; ++i) {
          try {
            const float x = static_cast<float>(t * 1000 + i);
            if (gpu.run(Request::scale({x}, 2.0f)).values == std::vector<float>{2 * x}) ++ok;
          } catch (const Error& e) {
            if (e.code() == ErrorCode::shut_down) ++refused;
          }
        }
      });
    std::this_thread::sleep_for(5ms);
    executor.shutdown(ShutdownMode::drain);
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok.load() + refused.load(), 6 * 300) << "every call resolved, with its own result or shut_down";
    EXPECT_EQ(executor.stats().completed, static_cast<std::uint64_t>(ok.load()));
  }
}

}  // namespace
}  // namespace gpubatch::testing
