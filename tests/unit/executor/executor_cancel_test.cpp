// Per-request cancellation through the completion handler's associated cancellation slot: a
// request cancelled before its batch is submitted leaves it and fails with
// ErrorCode::cancelled; after submission it completes; each handler runs exactly once and the
// slot is cleared before it runs.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "handler_test_util.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Floats = std::vector<float>;
using Outcome = std::pair<std::exception_ptr, Floats>;

// One batch in flight at a time; a paused device keeps it there, so later requests wait in the
// forming batch (and, past max_batch_size, in the queue).
BatchConfig one_in_flight(std::size_t batch = 8) {
  BatchConfig c;
  c.max_batch_size = batch;
  c.max_wait = 200us;
  c.max_inflight_batches = 1;
  return c;
}

bool saw_marker(const FakeDevice& device, float marker) {
  for (float m : device.markers())
    if (m == marker) return true;
  return false;
}

// A handler that hands its outcome to a future.
auto to_promise(std::shared_ptr<std::promise<Outcome>> p) {
  return [p](std::exception_ptr e, Floats v) { p->set_value({std::move(e), std::move(v)}); };
}

TEST(HandlerCancel, BeforeSubmissionTheRequestLeavesItsBatchForEachCancellationType) {
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    auto device = std::make_shared<FakeDevice>();
    BatchExecutor executor(device, one_in_flight());
    auto gpu = executor.handle();
    device->pause();
    auto first = gpu.relu({1.0f});
    ASSERT_TRUE(device->wait_for_batches(1));  // in flight; the slot is taken

    AllocationCounts counts;
    asio::cancellation_signal signal;
    auto got = std::make_shared<std::promise<Outcome>>();
    auto outcome = got->get_future();
    gpu.relu({2.0f}, asio::bind_cancellation_slot(
                         signal.slot(), asio::bind_allocator(CountingAllocator<void>(&counts),
                                                             to_promise(got))));
    auto other = gpu.relu({3.0f});  // same forming batch, not cancelled
    EXPECT_TRUE(signal.slot().has_handler());
    signal.emit(asio::cancellation_type::none);  // no type: nothing happens
    EXPECT_FALSE(ready_within(outcome, 20ms));
    signal.emit(type);

    // Resolved while the device is still paused: it left its batch at once.
    ASSERT_TRUE(ready_within(outcome, 30s));
    auto [error, value] = outcome.get();
    EXPECT_EQ(code_of(error), ErrorCode::cancelled);
    EXPECT_TRUE(value.empty());
    EXPECT_FALSE(signal.slot().has_handler());  // cleared before the handler ran
    {
      const Stats s = executor.stats();
      EXPECT_EQ(s.cancelled, 1u) << "expired " << s.expired << ", rejected " << s.rejected
                                 << ", failed " << s.failed << ", submitted " << s.submitted;
    }

    device->resume();
    EXPECT_EQ(first.get(), Floats{1.0f});
    EXPECT_EQ(other.get(), Floats{3.0f});
    EXPECT_FALSE(saw_marker(*device, 2.0f));  // never sent to the device
    EXPECT_EQ(device->requests_seen(), 2u);
    signal.emit(type);  // after it resolved: nothing installed, nothing happens
    executor.shutdown();
    const Stats s = executor.stats();
    EXPECT_EQ(s.completed + s.failed, s.submitted);
    EXPECT_EQ(s.cancelled, 1u);
    EXPECT_GE(counts.allocations.load(), 1);
    EXPECT_EQ(counts.live(), 0);
  }
}

TEST(HandlerCancel, AfterSubmissionTheRequestCompletes) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, one_in_flight());
  auto gpu = executor.handle();
  device->pause();
  asio::cancellation_signal signal;
  auto got = std::make_shared<std::promise<Outcome>>();
  auto outcome = got->get_future();
  gpu.relu({-4.0f, 4.0f}, asio::bind_cancellation_slot(signal.slot(), to_promise(got)));
  ASSERT_TRUE(device->wait_for_batches(1));  // submitted: too late to take it out
  signal.emit(asio::cancellation_type::terminal);
  EXPECT_FALSE(ready_within(outcome, 20ms));
  device->resume();
  ASSERT_TRUE(ready_within(outcome, 30s));
  auto [error, value] = outcome.get();
  EXPECT_FALSE(error);
  EXPECT_EQ(value, (Floats{0.0f, 4.0f}));
  EXPECT_FALSE(signal.slot().has_handler());
  EXPECT_EQ(executor.stats().cancelled, 0u);
}

TEST(HandlerCancel, RequestsWaitingInTheQueueBehindAFullBatchLeaveToo) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, one_in_flight(/*batch=*/2));
  auto gpu = executor.handle();
  device->pause();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  // Two fill the forming batch, three more wait in the queue; one of each kind is cancelled.
  std::vector<asio::cancellation_signal> signals(5);
  std::vector<std::future<Outcome>> outcomes;
  for (int i = 0; i < 5; ++i) {
    auto got = std::make_shared<std::promise<Outcome>>();
    outcomes.push_back(got->get_future());
    gpu.relu({10.0f + static_cast<float>(i)},
             asio::bind_cancellation_slot(signals[i].slot(), to_promise(got)));
  }
  ASSERT_TRUE(eventually([&] { return executor.stats().queue_depth == 5; }));
  signals[1].emit(asio::cancellation_type::terminal);  // in the forming batch
  signals[3].emit(asio::cancellation_type::terminal);  // in the queue
  for (int i : {1, 3}) {
    ASSERT_TRUE(ready_within(outcomes[i], 30s)) << i;
    EXPECT_EQ(code_of(outcomes[i].get().first), ErrorCode::cancelled) << i;
  }
  EXPECT_EQ(device->batches(), 1u);  // still paused: nothing else was submitted
  device->resume();
  EXPECT_EQ(first.get(), Floats{1.0f});
  for (int i : {0, 2, 4}) {
    ASSERT_TRUE(ready_within(outcomes[i], 30s)) << i;
    auto [error, value] = outcomes[i].get();
    EXPECT_FALSE(error) << i;
    EXPECT_EQ(value, Floats{10.0f + static_cast<float>(i)});
  }
  EXPECT_FALSE(saw_marker(*device, 11.0f));
  EXPECT_FALSE(saw_marker(*device, 13.0f));
  EXPECT_EQ(executor.stats().cancelled, 2u);
}

TEST(HandlerCancel, ShutdownCancelResolvesACancellableRequestOnceAndClearsItsSlot) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, one_in_flight());
  auto gpu = executor.handle();
  device->pause();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  AllocationCounts counts;
  asio::cancellation_signal signal;
  std::atomic<int> calls{0};
  std::promise<std::exception_ptr> got;
  gpu.relu({2.0f}, asio::bind_cancellation_slot(
                       signal.slot(), asio::bind_allocator(CountingAllocator<void>(&counts),
                                                           [&](std::exception_ptr e, Floats) {
                                                             ++calls;
                                                             got.set_value(e);
                                                           })));
  std::thread stopper([&] { executor.shutdown(ShutdownMode::cancel); });
  auto f = got.get_future();
  ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_EQ(code_of(f.get()), ErrorCode::shut_down);
  EXPECT_FALSE(signal.slot().has_handler());
  signal.emit(asio::cancellation_type::terminal);  // nothing left to cancel
  device->resume();
  stopper.join();
  EXPECT_EQ(first.get(), Floats{1.0f});
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(counts.live(), 0);
  EXPECT_GE(counts.allocations.load(), 1);
}

// The signal is emitted on the io_context the handlers are bound to (as Asio requires of a
// cancellation signal and its operation), at random moments around the strand claiming the
// batch on its own thread: every handler runs once, with its value or `cancelled`.
TEST(HandlerCancel, CancellationRacingWithCompletionResolvesEachRequestOnce) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = BatchConfig::adaptive();
  config.max_batch_size = 16;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  asio::io_context io;
  constexpr int kRounds = 40, kEach = 64;
  std::vector<std::atomic<int>> calls(kRounds * kEach);
  std::atomic<int> cancelled{0}, completed{0}, wrong{0};
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  for (int i = 0; i < kRounds * kEach; ++i)
    signals.push_back(std::make_unique<asio::cancellation_signal>());
  std::mt19937 rng(7);
  AllocationCounts counts;
  for (int round = 0; round < kRounds; ++round) {
    device->set_delay(std::chrono::microseconds(rng() % 200));
    asio::post(io, [&, round] {
      for (int j = 0; j < kEach; ++j) {
        const int id = round * kEach + j;
        const float x = static_cast<float>(id);
        gpu.relu({x}, asio::bind_cancellation_slot(
                          signals[id]->slot(),
                          asio::bind_executor(
                              io, asio::bind_allocator(
                                      CountingAllocator<void>(&counts),
                                      [&, id, x](std::exception_ptr e, Floats v) {
                                        ++calls[id];
                                        if (!e && v == Floats{x}) ++completed;
                                        else if (code_of(e) == ErrorCode::cancelled) ++cancelled;
                                        else ++wrong;
                                      }))));
      }
    });
    // Cancel about half, some at once, some after a short spin (the strand is forming or
    // submitting meanwhile).
    for (int j = 0; j < kEach; ++j) {
      if (rng() % 2) continue;
      const int id = round * kEach + j;
      const int spin = static_cast<int>(rng() % 2000);
      asio::post(io, [&, id, spin] {
        for (int k = 0; k < spin; ++k) std::atomic_signal_fence(std::memory_order_seq_cst);
        signals[id]->emit(asio::cancellation_type::terminal);
      });
    }
    io.run();  // until every handler of the round ran (each keeps work on io)
    io.restart();
  }
  for (int i = 0; i < kRounds * kEach; ++i) ASSERT_EQ(calls[i].load(), 1) << i;
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(completed.load() + cancelled.load(), kRounds * kEach);
  executor.shutdown();
  const Stats s = executor.stats();
  EXPECT_EQ(s.cancelled, static_cast<std::uint64_t>(cancelled.load()));
  EXPECT_EQ(s.completed, static_cast<std::uint64_t>(completed.load()));
  EXPECT_EQ(device->requests_seen(), static_cast<std::size_t>(completed.load()));
  EXPECT_EQ(counts.live(), 0);
  for (auto& sig : signals) EXPECT_FALSE(sig->slot().has_handler());
  std::printf("cancelled %d of %d racing requests\n", cancelled.load(), kRounds * kEach);
}

// `a || b` (awaitable operators) cancels the slower operation: here the request, held back by a
// paused device, loses to a timer and leaves its batch.
TEST(HandlerCancel, AwaitableOperatorsCancelTheLosingRequest) {
  using namespace asio::experimental::awaitable_operators;
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, one_in_flight());
  auto gpu = executor.handle();
  device->pause();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  asio::io_context io;
  std::optional<std::size_t> winner;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(io, 20ms);
        Floats x{5.0f};
        auto result =
            co_await (gpu.relu(x, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
        winner = result.index();
      },
      asio::detached);
  io.run();
  EXPECT_EQ(winner, 1u);  // the timer
  EXPECT_EQ(executor.stats().cancelled, 1u);
  device->resume();
  EXPECT_EQ(first.get(), Floats{1.0f});
  EXPECT_FALSE(saw_marker(*device, 5.0f));
}

}  // namespace
}  // namespace gpubatch::testing
