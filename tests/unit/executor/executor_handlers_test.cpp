// Completion handlers as Asio asks of an asynchronous operation: the request's state comes from
// the handler's associated allocator and is returned before the handler runs; a handler that
// throws on an executor thread is caught, logged and counted (the thread goes on serving); one
// bound to the user's executor throws out of that executor's run().
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/stats.hpp"
#include "handler_test_util.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Floats = std::vector<float>;

BatchConfig quick() {
  BatchConfig c;
  c.max_batch_size = 8;
  c.max_wait = 200us;
  return c;
}

// ---- the associated allocator ----

// What a handler saw when it ran: its error, and how many of the allocator's blocks were live.
struct Seen {
  std::exception_ptr error;
  long live_at_call = -1;
};

auto counting_handler(AllocationCounts& counts, std::shared_ptr<std::promise<Seen>> seen) {
  return asio::bind_allocator(CountingAllocator<void>(&counts),
                              [&counts, seen](std::exception_ptr e, Floats) {
                                seen->set_value({std::move(e), counts.live()});
                              });
}

TEST(HandlerAllocator, StateComesFromTheAssociatedAllocatorAndIsReturnedBeforeTheCall) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  AllocationCounts counts;
  // Success, on a completion thread.
  auto ok = std::make_shared<std::promise<Seen>>();
  auto ok_seen = ok->get_future();
  gpu.relu({1.0f}, counting_handler(counts, ok));
  ASSERT_TRUE(ready_within(ok_seen, 30s));
  // An invalid request: the handler is posted (system_executor).
  auto bad = std::make_shared<std::promise<Seen>>();
  auto bad_seen = bad->get_future();
  gpu.add({1.0f}, {1.0f, 2.0f}, counting_handler(counts, bad));
  ASSERT_TRUE(ready_within(bad_seen, 30s));

  const Seen a = ok_seen.get(), b = bad_seen.get();
  EXPECT_FALSE(a.error);
  EXPECT_EQ(code_of(b.error), ErrorCode::invalid_argument);
  EXPECT_EQ(a.live_at_call, 0);  // freed before the handler ran
  EXPECT_EQ(b.live_at_call, 0);
  EXPECT_GE(counts.allocations.load(), 2);  // at least the state of each request
  EXPECT_TRUE(eventually([&] { return counts.live() == 0; }));
}

TEST(HandlerAllocator, ThroughTheUsersExecutorEveryBlockIsReturned) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  asio::io_context io;
  AllocationCounts counts;
  int ran = 0;
  long live_at_call = -1;
  auto handler = [&](std::exception_ptr e, Floats v) {
    EXPECT_FALSE(e);
    EXPECT_EQ(v, Floats{2.0f});
    live_at_call = counts.live();
    ++ran;
  };
  gpu.relu({2.0f}, asio::bind_executor(io, asio::bind_allocator(CountingAllocator<void>(&counts),
                                                                handler)));
  io.run();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(live_at_call, 0);
  // The request's state and the function posted to io both came from the allocator.
  EXPECT_GE(counts.allocations.load(), 2);
  EXPECT_EQ(counts.live(), 0);
}

TEST(HandlerAllocator, AFailureFromTheDeviceReturnsEveryBlock) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, quick());
  auto gpu = executor.handle();
  device->fail_next_submit(ErrorCode::device_lost);
  AllocationCounts counts;
  auto p = std::make_shared<std::promise<Seen>>();
  auto seen = p->get_future();
  gpu.relu({3.0f}, counting_handler(counts, p));
  ASSERT_TRUE(ready_within(seen, 30s));
  const Seen s = seen.get();
  EXPECT_EQ(code_of(s.error), ErrorCode::device_lost);
  EXPECT_EQ(s.live_at_call, 0);
  EXPECT_EQ(counts.live(), 0);
  EXPECT_GE(counts.allocations.load(), 1);
}

// ---- handlers that throw ----

TEST(HandlerExceptions, AThrowOnACompletionThreadIsCaughtCountedAndTheThreadGoesOn) {
  BatchConfig config = quick();
  config.completion_threads = 1;  // the one thread that must survive
  BatchExecutor executor(std::make_shared<FakeDevice>(), config);
  auto gpu = executor.handle();
  std::atomic<int> threw{0};
  gpu.relu({1.0f}, [&](std::exception_ptr, Floats) {
    ++threw;
    throw std::runtime_error("handler failure on purpose");
  });
  ASSERT_TRUE(eventually([&] { return executor.stats().handler_exceptions == 1; }));
  EXPECT_EQ(threw.load(), 1);
  // The completion thread still serves futures and callbacks.
  std::vector<std::future<Floats>> futures;
  std::atomic<int> callbacks{0};
  for (int i = 0; i < 100; ++i) {
    futures.push_back(gpu.relu({static_cast<float>(i)}));
    gpu.relu({static_cast<float>(i)}, [&](std::exception_ptr e, Floats) {
      if (!e) ++callbacks;
    });
  }
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(ready_within(futures[i], 30s)) << i;
    EXPECT_EQ(futures[i].get(), Floats{static_cast<float>(i)});
  }
  EXPECT_TRUE(eventually([&] { return callbacks.load() == 100; }));
  const Stats s = executor.stats();
  EXPECT_EQ(s.handler_exceptions, 1u);
  EXPECT_NE(to_prometheus(s).find("gpubatch_handler_exceptions_total 1\n"), std::string::npos);
}

// Before: a handler posted to system_executor that threw ended the process (std::terminate).
TEST(HandlerExceptions, AThrowFromTheHandlerOfACallThatFailedAtOnceIsCaught) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  std::atomic<int> threw{0};
  gpu.relu({}, [&](std::exception_ptr e, Floats) {  // empty: invalid_argument
    if (code_of(e) == ErrorCode::invalid_argument) ++threw;
    throw std::runtime_error("handler failure on purpose");
  });
  ASSERT_TRUE(eventually([&] { return executor.stats().handler_exceptions == 1; }));
  EXPECT_EQ(threw.load(), 1);
  EXPECT_EQ(gpu.relu({-1.0f}).get(), Floats{0.0f});

  // A detached handle has no executor to count it in: logged only, and the process goes on.
  BatchedGpuHandle detached;
  std::atomic<int> ran{0};
  detached.relu({1.0f}, [&](std::exception_ptr e, Floats) {
    if (code_of(e) == ErrorCode::shut_down) ++ran;
    throw 42;  // not even a std::exception
  });
  EXPECT_TRUE(eventually([&] { return ran.load() == 1; }));
}

// Requests the strand fails (an expired deadline here) have their handlers posted, not run on
// the strand; a throw there is caught and counted too, and batching goes on.
TEST(HandlerExceptions, AThrowFromTheHandlerOfAnExpiredRequestIsCaught) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = quick();
  config.max_inflight_batches = 1;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->pause();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  std::atomic<int> expired{0};
  gpu.relu({2.0f}, SubmitOptions::within(5ms), [&](std::exception_ptr e, Floats) {
    if (code_of(e) == ErrorCode::deadline_exceeded) ++expired;
    throw std::runtime_error("handler failure on purpose");
  });
  ASSERT_TRUE(eventually([&] { return executor.stats().handler_exceptions == 1; }));
  EXPECT_EQ(expired.load(), 1);
  device->resume();
  EXPECT_EQ(first.get(), Floats{1.0f});
  EXPECT_EQ(gpu.relu({3.0f}).get(), Floats{3.0f});
}

// As with any Asio operation, a handler bound to the user's executor throws out of its run().
TEST(HandlerExceptions, AHandlerBoundToTheUsersExecutorThrowsOutOfItsRun) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  asio::io_context io;
  auto thrower = asio::bind_executor(io, [](std::exception_ptr, Floats) {
    throw std::runtime_error("thrown to the user");
  });
  gpu.relu({1.0f}, thrower);
  EXPECT_THROW(io.run(), std::runtime_error);
  io.restart();
  gpu.relu({}, thrower);  // fails at once: posted to io, thrown out of run() all the same
  EXPECT_THROW(io.run(), std::runtime_error);
  io.restart();
  // io and the executor go on.
  Floats got;
  gpu.relu({4.0f}, asio::bind_executor(io, [&](std::exception_ptr e, Floats v) {
             EXPECT_FALSE(e);
             got = std::move(v);
           }));
  io.run();
  EXPECT_EQ(got, Floats{4.0f});
  EXPECT_EQ(executor.stats().handler_exceptions, 0u);
}

}  // namespace
}  // namespace gpubatch::testing
