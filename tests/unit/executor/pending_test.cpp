// Pending: the strand's small handle to an accepted request, and the body it owns
// (src/executor/pending.hpp).
#include "executor/pending.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "executor/mpsc_queue.hpp"
#include "gpubatch/batch_device.hpp"
#include "gpubatch/executor.hpp"

namespace {

using gpubatch::Request;
using gpubatch::detail::Completion;
using gpubatch::detail::ExpiryCell;
using gpubatch::detail::MpscQueue;
using gpubatch::detail::Pending;

Pending pending_with_promise(std::promise<std::vector<float>>& out_promise_source,
                             std::future<std::vector<float>>& future) {
  future = out_promise_source.get_future();
  return gpubatch::detail::make_pending(Request::relu({1.0f, -2.0f, 3.0f}),
                                        Completion(std::move(out_promise_source)));
}

TEST(Pending, IsSmallAndCheapToMove) {
  // With the queue slot's 8-byte sequence number, one cache line per request.
  EXPECT_LE(sizeof(Pending) + sizeof(std::uint64_t), gpubatch::detail::kCacheLine);
  EXPECT_TRUE(std::is_nothrow_move_constructible_v<Pending>);
  EXPECT_TRUE(std::is_nothrow_move_assignable_v<Pending>);
}

TEST(Pending, MakePendingMovesRequestAndCompletionIntoTheBody) {
  Request r = Request::relu({1.0f, 2.0f});
  const float* data = r.a.data();
  std::promise<std::vector<float>> promise;
  auto future = promise.get_future();
  Pending p = gpubatch::detail::make_pending(std::move(r), Completion(std::move(promise)));
  ASSERT_TRUE(p.body);
  EXPECT_EQ(p.request().a.data(), data);  // the input moved, not copied
  EXPECT_TRUE(r.a.empty());
  EXPECT_EQ(p.body->completion.index(), 1u);  // the promise
  EXPECT_EQ(p.expiry, nullptr);
  EXPECT_EQ(p.cancel, nullptr);
  EXPECT_FALSE(p.resolved);
  EXPECT_EQ(p.deadline, Pending::Clock::time_point::max());
  EXPECT_FALSE(gpubatch::detail::gone(p));
}

// The point of the split: moving the handle leaves the request where its producer put it.
TEST(Pending, MovingTheHandleDoesNotMoveTheRequest) {
  std::promise<std::vector<float>> promise;
  std::future<std::vector<float>> future;
  Pending p = pending_with_promise(promise, future);
  p.bytes = 24;
  p.priority = 2;
  const Request* where = &p.request();
  Pending q = std::move(p);
  EXPECT_EQ(&q.request(), where);
  EXPECT_EQ(p.body, nullptr);
  EXPECT_EQ(q.bytes, 24u);
  EXPECT_EQ(q.priority, 2);
  Pending r;
  r = std::move(q);
  EXPECT_EQ(&r.request(), where);
}

// A handle destroyed unresolved frees its body, and with it the promise: its future learns so.
TEST(Pending, DestroyingTheHandleFreesTheBody) {
  std::promise<std::vector<float>> promise;
  std::future<std::vector<float>> future;
  {
    Pending p = pending_with_promise(promise, future);
    Pending moved = std::move(p);
    // The moved-from husk is destroyed first: it must not touch the body.
  }
  ASSERT_EQ(future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_THROW(future.get(), std::future_error);
}

TEST(Pending, CompletionOfIsTheCellsWhenTheRequestHasADeadline) {
  std::promise<std::vector<float>> promise;
  std::future<std::vector<float>> future;
  Pending p = pending_with_promise(promise, future);
  EXPECT_EQ(&gpubatch::detail::completion_of(p), &p.body->completion);

  auto cell = std::make_shared<ExpiryCell>();
  cell->completion = std::move(p.body->completion);
  p.body->expiry = cell;
  p.expiry = cell.get();
  EXPECT_EQ(&gpubatch::detail::completion_of(p), &cell->completion);
  EXPECT_EQ(cell.use_count(), 2);  // the body keeps the cell alive beside the watch
  EXPECT_FALSE(gpubatch::detail::gone(p));
  ASSERT_TRUE(cell->expire());
  EXPECT_TRUE(gpubatch::detail::gone(p));
  p = Pending{};
  EXPECT_EQ(cell.use_count(), 1);
}

TEST(Pending, ResolvedInTheQueueIsGone) {
  std::promise<std::vector<float>> promise;
  std::future<std::vector<float>> future;
  Pending p = pending_with_promise(promise, future);
  p.resolved = true;
  EXPECT_TRUE(gpubatch::detail::gone(p));
}

// Through the queue the strand pops from: the body arrives untouched, in push order.
TEST(Pending, CrossesTheQueueWithItsBody) {
  MpscQueue<Pending> q(4);
  std::vector<const Request*> where;
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 3; ++i) {
    std::promise<std::vector<float>> promise;
    futures.push_back(promise.get_future());
    Pending p = gpubatch::detail::make_pending(Request::relu({float(i)}), Completion(std::move(promise)));
    where.push_back(&p.request());
    ASSERT_EQ(q.try_push(std::move(p)), gpubatch::detail::PushResult::ok);
  }
  for (int i = 0; i < 3; ++i) {
    Pending out;
    ASSERT_TRUE(q.try_pop(out));
    EXPECT_EQ(&out.request(), where[i]);
    EXPECT_EQ(out.request().a.at(0), float(i));
    std::get<1>(out.body->completion).set_value({float(i)});
    EXPECT_EQ(futures[i].get().at(0), float(i));
  }
}

// A device that computes relu in place in the result it is handed, and checks that it is the
// very buffer it read at submit: the request stays in its body, where the producer put it, from
// the call through the strand's submit to the completion thread's take_result.
class InPlaceReluDevice final : public gpubatch::detail::BatchDevice {
 public:
  std::string name() const override { return "in-place relu"; }
  std::size_t max_request_bytes() const override { return std::size_t{1} << 20; }
  gpubatch::detail::TransferTotals transfers() const override { return {}; }
  std::unique_ptr<gpubatch::detail::InFlightBatch> submit(
      std::span<const Request* const> requests) override {
    std::vector<const float*> seen;
    for (const Request* r : requests) seen.push_back(r->a.data());
    return std::make_unique<Batch>(std::move(seen));
  }

 private:
  struct Batch final : gpubatch::detail::InFlightBatch {
    explicit Batch(std::vector<const float*> s) : seen(std::move(s)) {}
    bool wait_for(std::chrono::nanoseconds) override { return true; }
    void take_result(std::size_t i, gpubatch::Result& out) override {
      if (out.values.data() != seen.at(i)) throw std::runtime_error("not the buffer read at submit");
      for (float& v : out.values) v = std::max(v, 0.0f);
    }
    std::vector<const float*> seen;
  };
};

TEST(PendingFlow, TheBufferTheDeviceReadAtSubmitBecomesTheResult) {
  gpubatch::BatchExecutor executor(std::make_shared<InPlaceReluDevice>(), gpubatch::BatchConfig{});
  constexpr int kThreads = 2, kEach = 3000;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto handle = executor.handle();
      std::vector<std::future<std::vector<float>>> futures;
      std::vector<const float*> inputs;
      for (int i = 0; i < kEach; ++i) {
        std::vector<float> x{float(i), -float(i), float(t)};
        inputs.push_back(x.data());
        futures.push_back(handle.relu(std::move(x)));
      }
      for (int i = 0; i < kEach; ++i) {
        try {
          const std::vector<float> y = futures[i].get();  // fails if the device saw another buffer
          if (y.data() != inputs[i] || y != std::vector<float>{float(i), 0.0f, float(t)}) ++bad[t];
        } catch (const std::exception&) {
          ++bad[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(kThreads, 0));
  EXPECT_EQ(executor.stats().completed, std::uint64_t{kThreads * kEach});
}

}  // namespace
