// Asio completion tokens on the handle: callbacks, use_future, use_awaitable, deferred,
// bind_executor; errors reach the handler as an exception_ptr.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

BatchConfig quick() {
  BatchConfig c;
  c.max_batch_size = 8;
  c.max_wait = 500us;
  return c;
}

std::optional<ErrorCode> code_of(std::exception_ptr e) {
  if (!e) return std::nullopt;
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code();
  } catch (...) {
    return ErrorCode::internal;
  }
}

TEST(HandleTokens, Callback) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  std::promise<std::pair<std::exception_ptr, float>> got;
  gpu.dot({1.0f, 2.0f}, {3.0f, 4.0f},
          [&](std::exception_ptr e, float v) { got.set_value({e, v}); });
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  auto [e, v] = f.get();
  EXPECT_FALSE(e);
  EXPECT_FLOAT_EQ(v, 11.0f);
}

TEST(HandleTokens, CallbackGetsTheErrorOfABadRequest) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  std::promise<std::exception_ptr> got;
  gpu.add({1.0f}, {1.0f, 2.0f}, [&](std::exception_ptr e, std::vector<float>) { got.set_value(e); });
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(code_of(f.get()), ErrorCode::invalid_argument);
}

TEST(HandleTokens, UseFuture) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  std::future<std::vector<float>> f = gpu.scale({1.0f, -2.0f}, 3.0f, asio::use_future);
  EXPECT_EQ(f.get(), (std::vector<float>{3.0f, -6.0f}));
  std::future<std::vector<std::uint8_t>> s =
      gpu.interpolate(std::vector<std::uint8_t>(16, 0x80), std::vector<std::uint8_t>(16, 0x80),
                      0.5f, InterpolationMode::lerp, asio::use_future);
  EXPECT_EQ(s.get().size(), 16u);
  std::future<Result> r = gpu.submit(Request::relu({-1.0f}), asio::use_future);
  EXPECT_EQ(r.get().values, (std::vector<float>{0.0f}));
  auto bad = gpu.relu({}, asio::use_future);
  EXPECT_EQ(error_code(bad), ErrorCode::invalid_argument);
}

TEST(HandleTokens, UseAwaitable) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  asio::io_context io;
  std::vector<float> relu;
  float dot = 0;
  std::optional<ErrorCode> error;
  std::thread::id resumed_on;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // (Named vectors: GCC 12 rejects braced lists inside co_await expressions.)
        std::vector<float> x{-1.0f, 5.0f}, a{2.0f}, b{4.0f}, one{1.0f};
        relu = co_await gpu.relu(x, asio::use_awaitable);
        dot = co_await gpu.dot(a, b, SubmitOptions::within(60s), asio::use_awaitable);
        resumed_on = std::this_thread::get_id();
        try {
          co_await gpu.matmul(one, one, 2, 2, 2, asio::use_awaitable);
        } catch (const Error& e) {
          error = e.code();
        }
      },
      asio::detached);
  io.run();  // returns only when the coroutine is done: the operations keep work on `io`
  EXPECT_EQ(relu, (std::vector<float>{0.0f, 5.0f}));
  EXPECT_FLOAT_EQ(dot, 8.0f);
  EXPECT_EQ(error, ErrorCode::invalid_argument);
  EXPECT_EQ(resumed_on, std::this_thread::get_id());  // resumed on the io_context's thread
}

TEST(HandleTokens, Deferred) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  auto op = gpu.relu({-3.0f, 3.0f}, asio::deferred);  // nothing submitted yet
  EXPECT_EQ(executor.stats().submitted, 0u);
  std::future<std::vector<float>> f = std::move(op)(asio::use_future);
  EXPECT_EQ(f.get(), (std::vector<float>{0.0f, 3.0f}));
  EXPECT_EQ(executor.stats().submitted, 1u);
}

// A deferred call keeps what it needs of the handle that made it: the call borrows the handle's
// pointer to the executor only while it runs (detail::CoreRef) and a deferred token copies it
// into a reference of its own. ASan sees a use after free if it did not.
TEST(HandleTokens, ADeferredCallOutlivesTheHandleThatMadeIt) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto op = [&] {
    auto gpu = executor.handle();
    auto deferred = gpu.relu({-2.0f, 2.0f}, asio::deferred);
    gpu = BatchedGpuHandle{};  // the handle's own reference goes before the call is launched
    return deferred;
  }();
  std::promise<std::vector<float>> got;
  std::move(op)([&](std::exception_ptr e, std::vector<float> v) {
    if (e) got.set_exception(e);
    else got.set_value(std::move(v));
  });
  EXPECT_EQ(got.get_future().get(), (std::vector<float>{0.0f, 2.0f}));
}

// The borrowing reference itself: copies and moves own the executor, the original borrows it.
TEST(HandleTokens, ACoreReferenceBorrowsUntilItIsCopiedOrMoved) {
  auto core = std::make_shared<int>(0);  // stands in for the executor: only the counts matter
  auto as_core = std::reinterpret_pointer_cast<detail::ExecutorCore>(core);
  {
    detail::CoreRef borrowed(as_core);
    EXPECT_TRUE(borrowed.borrowed());
    EXPECT_EQ(as_core.use_count(), 2) << "borrowing takes no reference";
    detail::CoreRef copied(borrowed);
    EXPECT_FALSE(copied.borrowed());
    EXPECT_EQ(copied.get(), borrowed.get());
    EXPECT_EQ(as_core.use_count(), 3);
    detail::CoreRef moved(std::move(borrowed));
    EXPECT_FALSE(moved.borrowed());
    EXPECT_EQ(as_core.use_count(), 4);
    detail::CoreRef moved_again(std::move(moved));
    EXPECT_EQ(as_core.use_count(), 4) << "moving an owning reference hands it over";
    EXPECT_EQ(moved_again.get(), as_core.get());
  }
  EXPECT_EQ(as_core.use_count(), 2);
}

TEST(HandleTokens, BoundExecutorRunsTheHandlerThereAndKeepsItsWork) {
  BatchExecutor executor(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor.handle();
  asio::io_context io;
  std::thread::id ran_on;
  std::vector<float> value;
  gpu.tanh({0.0f}, asio::bind_executor(io, [&](std::exception_ptr e, std::vector<float> v) {
             EXPECT_FALSE(e);
             ran_on = std::this_thread::get_id();
             value = std::move(v);
           }));
  io.run();  // outstanding work keeps run() going until the handler ran
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(value, (std::vector<float>{0.0f}));
}

TEST(HandleTokens, AfterShutdownTheHandlerStillRuns) {
  auto executor = std::make_unique<BatchExecutor>(std::make_shared<FakeDevice>(), quick());
  auto gpu = executor->handle();
  executor.reset();
  std::promise<std::exception_ptr> got;
  gpu.gelu({1.0f}, [&](std::exception_ptr e, std::vector<float>) { got.set_value(e); });
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(code_of(f.get()), ErrorCode::shut_down);
}

TEST(HandleTokens, ManyThreadsWithCallbacksAllComplete) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, quick());
  asio::thread_pool pool(4);
  constexpr int kThreads = 8, kEach = 300;
  std::atomic<int> done{0}, good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, gpu = executor.handle()] {
      auto strand = asio::make_strand(pool);
      for (int i = 0; i < kEach; ++i) {
        const float x = static_cast<float>(t * kEach + i);
        gpu.relu({x}, asio::bind_executor(strand, [&, x](std::exception_ptr e, std::vector<float> v) {
                   if (!e && v == std::vector<float>{x}) ++good;
                   ++done;
                 }));
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(eventually([&] { return done.load() == kThreads * kEach; }));
  EXPECT_EQ(good.load(), kThreads * kEach);
  pool.join();
}

}  // namespace
}  // namespace gpubatch::testing
