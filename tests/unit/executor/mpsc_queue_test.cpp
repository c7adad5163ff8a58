// The bounded MPSC queue, tested as a library of its own.
#include "executor/mpsc_queue.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using gpubatch::detail::BlockingMpscQueue;
using gpubatch::detail::MpscQueue;
using gpubatch::detail::PushResult;
using namespace std::chrono_literals;

// The queue's pushes report the position; these tests mostly do not need it.
template <typename Q, typename T>
PushResult push_wait(Q& q, T item) {
  std::uint64_t position;
  return q.push_wait(std::move(item), position);
}
template <typename Q, typename T>
PushResult try_push(Q& q, T item) {
  std::uint64_t position;
  return q.try_push(std::move(item), position);
}
template <typename Q, typename T>
PushResult push_until(Q& q, T item, std::chrono::steady_clock::time_point deadline) {
  std::uint64_t position;
  return q.push_until(std::move(item), deadline, position);
}
template <typename Q, typename T>
PushResult push_for(Q& q, T item, std::chrono::steady_clock::duration timeout) {
  return push_until(q, std::move(item), std::chrono::steady_clock::now() + timeout);
}

TEST(MpscQueue, SingleThreadFifoFullAndEmpty) {
  MpscQueue<int> q(4);
  EXPECT_EQ(q.capacity(), 4u);
  int out = -1;
  EXPECT_FALSE(q.try_pop(out));
  EXPECT_FALSE(q.published(0));
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(q.try_push(int{i}), PushResult::ok);
  EXPECT_EQ(q.size_approx(), 4u);
  EXPECT_EQ(q.try_push(5), PushResult::full);
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(q.try_pop(out));
    EXPECT_EQ(out, i);
  }
  EXPECT_FALSE(q.try_pop(out));
  EXPECT_EQ(q.size_approx(), 0u);
  EXPECT_TRUE(q.size_approx() == 0);
}

TEST(MpscQueue, CapacityOneAlternates) {
  MpscQueue<int> q(1);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(q.try_push(int{i}), PushResult::ok);
    ASSERT_EQ(q.try_push(int{-1}), PushResult::full);
    int out = -1;
    ASSERT_TRUE(q.try_pop(out));
    ASSERT_EQ(out, i);
    ASSERT_FALSE(q.try_pop(out));
  }
}

TEST(MpscQueue, ZeroCapacityIsRefused) { EXPECT_THROW(MpscQueue<int>(0), std::invalid_argument); }

class MpscQueueWrap : public ::testing::TestWithParam<std::size_t> {};

TEST_P(MpscQueueWrap, WrapsAroundManyTimes) {
  const std::size_t cap = GetParam();
  MpscQueue<std::uint64_t> q(cap);
  std::uint64_t next_in = 0, next_out = 0;
  // Vary the fill level so that head and tail cross the end of the ring at every offset.
  for (int round = 0; round < 2000; ++round) {
    const std::size_t fill = 1 + static_cast<std::size_t>(round) % cap;
    for (std::size_t i = 0; i < fill; ++i) {
      std::uint64_t pos = 0;
      ASSERT_EQ(q.try_push(std::uint64_t{next_in}, pos), PushResult::ok);
      ASSERT_EQ(pos, next_in);
      ++next_in;
    }
    if (fill == cap) {
      EXPECT_EQ(q.try_push(std::uint64_t{0}), PushResult::full);
    }
    for (std::size_t i = 0; i < fill; ++i) {
      EXPECT_TRUE(q.published(next_out));
      std::uint64_t v = ~std::uint64_t{0};
      ASSERT_TRUE(q.try_pop(v));
      ASSERT_EQ(v, next_out);
      ++next_out;
    }
    std::uint64_t none = 0;
    ASSERT_FALSE(q.try_pop(none));
  }
  EXPECT_EQ(q.pushed_approx(), next_in);
  EXPECT_EQ(q.popped_approx(), next_out);
}

INSTANTIATE_TEST_SUITE_P(Capacities, MpscQueueWrap, ::testing::Values(1, 2, 3, 4, 7, 8, 100, 128));

TEST(MpscQueue, MoveOnlyPayloadAndFailedPushKeepsItem) {
  MpscQueue<std::unique_ptr<int>> q(2);
  EXPECT_EQ(q.try_push(std::make_unique<int>(1)), PushResult::ok);
  EXPECT_EQ(q.try_push(std::make_unique<int>(2)), PushResult::ok);
  auto keep = std::make_unique<int>(3);
  EXPECT_EQ(q.try_push(std::move(keep)), PushResult::full);
  ASSERT_NE(keep, nullptr);  // a failed push moves nothing
  EXPECT_EQ(*keep, 3);
  std::unique_ptr<int> out;
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(*out, 1);
  EXPECT_EQ(q.try_push(std::move(keep)), PushResult::ok);
  EXPECT_EQ(keep, nullptr);
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(*out, 2);
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(*out, 3);
}

struct Counted {
  static inline std::atomic<int> live{0};
  int value = 0;
  explicit Counted(int v = 0) noexcept : value(v) { ++live; }
  Counted(Counted&& o) noexcept : value(o.value) { ++live; }
  Counted& operator=(Counted&& o) noexcept {
    value = o.value;
    return *this;
  }
  ~Counted() { --live; }
};

TEST(MpscQueue, DestroysRemainingItems) {
  Counted::live = 0;
  {
    MpscQueue<Counted> q(8);
    for (int i = 0; i < 6; ++i) ASSERT_EQ(q.try_push(Counted(i)), PushResult::ok);
    EXPECT_EQ(Counted::live.load(), 6);
    {
      Counted out;
      ASSERT_TRUE(q.try_pop(out));
      EXPECT_EQ(out.value, 0);
    }
    EXPECT_EQ(Counted::live.load(), 5);
    ASSERT_TRUE(q.try_consume([](Counted&& c) { EXPECT_EQ(c.value, 1); }));
    EXPECT_EQ(Counted::live.load(), 4);
  }
  EXPECT_EQ(Counted::live.load(), 0);
}

TEST(MpscQueue, ConsumeReleasesTheSlotWhenTheConsumerThrows) {
  Counted::live = 0;
  MpscQueue<Counted> q(2);
  ASSERT_EQ(q.try_push(Counted(1)), PushResult::ok);
  ASSERT_EQ(q.try_push(Counted(2)), PushResult::ok);
  EXPECT_THROW(q.try_consume([](Counted&&) { throw std::runtime_error("x"); }), std::runtime_error);
  EXPECT_EQ(Counted::live.load(), 1);
  EXPECT_EQ(q.try_push(Counted(3)), PushResult::ok);
  std::vector<int> seen;
  while (q.try_consume([&](Counted&& c) { seen.push_back(c.value); })) {
  }
  EXPECT_EQ(seen, (std::vector<int>{2, 3}));
}

TEST(MpscQueue, CloseRefusesPushesAndReportsTheAcceptedCount) {
  MpscQueue<int> q(4);
  ASSERT_EQ(q.try_push(1), PushResult::ok);
  ASSERT_EQ(q.try_push(2), PushResult::ok);
  EXPECT_FALSE(q.closed());
  EXPECT_EQ(q.close(), 2u);
  EXPECT_TRUE(q.closed());
  EXPECT_EQ(q.close(), 2u);  // idempotent
  EXPECT_EQ(q.try_push(3), PushResult::closed);
  EXPECT_FALSE(q.drained());
  EXPECT_TRUE(q.has_claimed());
  int out;
  ASSERT_TRUE(q.try_pop(out));
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(out, 2);
  EXPECT_TRUE(q.drained());
  EXPECT_FALSE(q.has_claimed());
}

TEST(MpscQueue, ClosingAFullQueueSaysClosedNotFull) {
  MpscQueue<int> q(1);
  ASSERT_EQ(q.try_push(1), PushResult::ok);
  ASSERT_EQ(q.try_push(2), PushResult::full);
  q.close();
  EXPECT_EQ(q.try_push(2), PushResult::closed);
}

TEST(BlockingMpscQueue, ClaimsAfterTheCloseAreRefusedAndNotCounted) {
  BlockingMpscQueue<int> q(2);
  std::uint64_t pos = 99;
  ASSERT_EQ(q.push_wait(7, pos), PushResult::ok);  // push_wait claims with one add
  EXPECT_EQ(pos, 0u);
  EXPECT_EQ(q.close(), 1u);
  // Each refused push_wait still bumps the tail: the count taken at the close must not move.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(push_wait(q, 8), PushResult::closed);
  EXPECT_EQ(q.close(), 1u);
  EXPECT_EQ(q.pushed_approx(), 1u);
  EXPECT_EQ(q.size_approx(), 1u);
  int out = 0;
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(out, 7);
  EXPECT_TRUE(q.drained());
  EXPECT_FALSE(q.has_claimed());
}

// push_wait claims its position with one add even when the queue is full, then waits for its
// slot: with tiny capacities and many producers, every item still comes out once, in each
// producer's order.
TEST(BlockingMpscQueue, PushWaitOnAFullQueueKeepsEveryItemAndEachProducersOrder) {
  for (std::size_t capacity : {1u, 3u, 8u}) {
    constexpr int kProducers = 8;
    constexpr std::uint64_t kEach = 3000;
    BlockingMpscQueue<std::uint64_t> q(capacity);
    std::vector<std::thread> producers;
    for (std::uint64_t p = 0; p < kProducers; ++p)
      producers.emplace_back([&q, p] {
        for (std::uint64_t i = 0; i < kEach; ++i) ASSERT_EQ(push_wait(q, p << 32 | i), PushResult::ok);
      });
    std::vector<std::uint64_t> next(kProducers, 0);
    std::uint64_t popped = 0, v = 0;
    while (popped < kProducers * kEach) {
      if (!q.try_pop(v)) {
        std::this_thread::yield();
        continue;
      }
      const std::uint64_t p = v >> 32, i = v & 0xffffffffu;
      ASSERT_LT(p, static_cast<std::uint64_t>(kProducers));
      ASSERT_EQ(i, next[p]) << "capacity " << capacity << ", producer " << p;
      ++next[p];
      ++popped;
    }
    for (auto& t : producers) t.join();
    EXPECT_FALSE(q.try_pop(v));
  }
}

// Many producers, one consumer: every item is seen exactly once, and each producer's items come
// out in the order it pushed them.
TEST(MpscQueue, ManyProducersEveryItemOnceInPerProducerOrder) {
  constexpr int kProducers = 8;
  constexpr std::uint64_t kPerProducer = 40000;
  MpscQueue<std::uint64_t> q(256);  // small, so producers find it full often
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load()) std::this_thread::yield();
      for (std::uint64_t i = 0; i < kPerProducer; ++i) {
        const std::uint64_t v = (static_cast<std::uint64_t>(p) << 32) | i;
        while (q.try_push(std::uint64_t{v}) != PushResult::ok) std::this_thread::yield();
      }
    });
  }
  std::vector<std::uint64_t> next(kProducers, 0);
  std::uint64_t total = 0;
  go = true;
  while (total < kProducers * kPerProducer) {
    std::uint64_t v;
    if (!q.try_pop(v)) {
      std::this_thread::yield();
      continue;
    }
    const auto p = static_cast<std::size_t>(v >> 32);
    const std::uint64_t i = v & 0xffffffffu;
    ASSERT_LT(p, static_cast<std::size_t>(kProducers));
    ASSERT_EQ(i, next[p]) << "producer " << p << " out of order or duplicated";
    ++next[p];
    ++total;
  }
  for (auto& t : producers) t.join();
  std::uint64_t extra;
  EXPECT_FALSE(q.try_pop(extra));
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
}

TEST(BlockingMpscQueue, PushWaitBlocksUntilThereIsRoom) {
  BlockingMpscQueue<int> q(1);
  ASSERT_EQ(try_push(q, 1), PushResult::ok);
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    EXPECT_EQ(push_wait(q, 2), PushResult::ok);
    pushed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(pushed.load());
  int out;
  ASSERT_TRUE(q.try_pop(out));  // wakes the waiter
  producer.join();
  EXPECT_TRUE(pushed.load());
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(out, 2);
}

TEST(BlockingMpscQueue, PushUntilGivesUpWithFull) {
  BlockingMpscQueue<int> q(1);
  ASSERT_EQ(try_push(q, 1), PushResult::ok);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(push_for(q, 2, 30ms), PushResult::full);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  EXPECT_EQ(q.waiters(), 0u);
}

// A timed waiter gives up at its deadline while other waiters stay blocked and the consumer keeps
// waking them all (no mutex that the timed one would queue behind), and every other waiter still
// gets in once there is room. The caller's timer slack, tightened for the wait, is restored.
TEST(BlockingMpscQueue, ATimedWaiterGivesUpAmongOthersAndTheRestGetIn) {
  BlockingMpscQueue<int> q(1);
  ASSERT_EQ(try_push(q, 0), PushResult::ok);
  std::vector<std::thread> waiters;
  std::atomic<int> in{0};
  for (int i = 0; i < 8; ++i)
    waiters.emplace_back([&, i] {
      EXPECT_EQ(push_until(q, i + 1, std::chrono::steady_clock::now() + 60s), PushResult::ok);
      ++in;
    });
  while (q.waiters() < 8) std::this_thread::yield();
  std::atomic<bool> stop{false};
  std::thread waker([&] {  // wakes every waiter again and again without making room
    while (!stop) {
      q.notify_space();
      std::this_thread::sleep_for(100us);
    }
  });
  const long slack = ::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(push_for(q, 99, 20ms), PushResult::full);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
  EXPECT_EQ(::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), slack) << "the caller's timer slack is restored";
  stop = true;
  waker.join();
  EXPECT_EQ(in.load(), 0);
  std::vector<int> popped;
  int out = 0;
  while (popped.size() < 9) {
    if (q.try_pop(out)) popped.push_back(out);
    else std::this_thread::yield();
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(in.load(), 8);
  std::sort(popped.begin(), popped.end());
  EXPECT_EQ(popped, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(q.waiters(), 0u);
}

// While push_until waits, the producer's thread has the slice the queue was given (Linux 6.12+
// custom slices; where the kernel keeps none, only the restore is checked), and after it the
// slice it had. A wait without a deadline (push_wait) and a queue given 0 leave it alone.
TEST(BlockingMpscQueue, ATimedWaitAsksForTheQueuesSliceAndGivesItBack) {
  using gpubatch::detail::request_thread_slice;
  using gpubatch::detail::SliceOutcome;
  using gpubatch::detail::thread_slice_ns;
  SliceOutcome probe{};
  std::thread([&] { probe = request_thread_slice(300us); }).join();
  const bool custom_slices = probe == SliceOutcome::applied;
  for (const auto given : {std::chrono::microseconds(150), std::chrono::microseconds(0)}) {
    BlockingMpscQueue<int> q(1);
    q.set_timed_wait_slice(given);
    ASSERT_EQ(try_push(q, 0), PushResult::ok);
    std::atomic<pid_t> tid{0};
    std::atomic<long long> before{-2};
    long long after = -3;
    std::thread producer([&] {
      before = thread_slice_ns();
      tid = ::gettid();
      EXPECT_EQ(push_until(q, 1, std::chrono::steady_clock::now() + 60s), PushResult::ok);
      after = thread_slice_ns();
    });
    while (q.waiters() == 0 || tid.load() == 0) std::this_thread::yield();
    const long long want = given.count() != 0 && custom_slices ? 150'000 : before.load();
    const auto t0 = std::chrono::steady_clock::now();
    long long during = thread_slice_ns(tid);
    while (during != want && std::chrono::steady_clock::now() - t0 < 10s) {
      std::this_thread::sleep_for(1ms);
      during = thread_slice_ns(tid);
    }
    EXPECT_EQ(during, want) << "given " << given.count() << " us";
    if (given.count() == 0) {
      std::this_thread::sleep_for(20ms);
      EXPECT_EQ(thread_slice_ns(tid), want) << "a queue given 0 leaves the slice alone";
    }
    int out;
    ASSERT_TRUE(q.try_pop(out));
    producer.join();
    EXPECT_EQ(after, before.load()) << "the slice the thread had is given back";
    ASSERT_TRUE(q.try_pop(out));
    EXPECT_EQ(out, 1);
  }
}

// The thread's nice value and its reset-on-fork flag come through a timed wait as they were.
TEST(BlockingMpscQueue, ATimedWaitKeepsTheThreadsNiceAndResetOnFork) {
  BlockingMpscQueue<int> q(1);
  q.set_timed_wait_slice(200us);
  ASSERT_EQ(try_push(q, 0), PushResult::ok);
  int policy_after = -1, nice_after = -100;
  std::thread producer([&] {
    sched_param param{};
    ASSERT_EQ(::sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &param), 0);
    ASSERT_EQ(::setpriority(PRIO_PROCESS, 0, 7), 0);  // this thread only (Linux)
    EXPECT_EQ(push_for(q, 1, 5ms), PushResult::full);
    policy_after = ::sched_getscheduler(0);
    nice_after = ::getpriority(PRIO_PROCESS, 0);
  });
  producer.join();
  EXPECT_EQ(policy_after, SCHED_OTHER | SCHED_RESET_ON_FORK);
  EXPECT_EQ(nice_after, 7);
}

TEST(BlockingMpscQueue, CloseWakesWaitingProducers) {
  // push_until waits without a position: the close refuses it. push_wait already holds its
  // position: it is accepted, and publishes once the consumer (draining) frees its slot.
  BlockingMpscQueue<int> q(1);
  ASSERT_EQ(try_push(q, 1), PushResult::ok);
  std::vector<std::thread> producers;
  std::atomic<int> closed{0}, accepted{0};
  for (int i = 0; i < 4; ++i)
    producers.emplace_back([&, i] {
      const auto r = i % 2 ? push_until(q, 7, std::chrono::steady_clock::now() + 60s) : push_wait(q, 8);
      if (r == PushResult::closed) ++closed;
      if (r == PushResult::ok) ++accepted;
    });
  while (q.waiters() < 4) std::this_thread::yield();
  EXPECT_EQ(q.close(), 3u) << "the first item and the two push_wait claims";
  EXPECT_EQ(push_wait(q, 9), PushResult::closed);
  int out = 0, popped = 0;
  while (!q.drained()) {
    if (q.try_pop(out)) {
      ++popped;
      if (popped > 1) EXPECT_EQ(out, 8);
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(closed.load(), 2);
  EXPECT_EQ(accepted.load(), 2);
  EXPECT_EQ(popped, 3);
}

TEST(BlockingMpscQueue, QuietPopsThenOneNotify) {
  BlockingMpscQueue<int> q(2);
  ASSERT_EQ(try_push(q, 1), PushResult::ok);
  ASSERT_EQ(try_push(q, 2), PushResult::ok);
  std::thread producer([&] { EXPECT_EQ(push_wait(q, 3), PushResult::ok); });
  while (q.waiters() < 1) std::this_thread::yield();
  int out;
  ASSERT_TRUE(q.try_consume_quiet([&](int v) { out = v; }));
  ASSERT_TRUE(q.try_consume_quiet([&](int v) { out = v; }));
  q.notify_space();
  producer.join();
  ASSERT_TRUE(q.try_pop(out));
  EXPECT_EQ(out, 3);
}

// Producers block on a small queue while the consumer drains, then the queue closes in the
// middle: every push that said ok is popped exactly once; the others said closed.
TEST(BlockingMpscQueue, CloseWhileProducersPushEveryAcceptedItemIsPopped) {
  constexpr int kProducers = 6;
  BlockingMpscQueue<std::uint64_t> q(16);
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> refused{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (std::uint64_t i = 0;; ++i) {
        const auto r = (i % 3 == 0) ? push_for(q, std::uint64_t{i}, 1ms) : push_wait(q, std::uint64_t{i});
        if (r == PushResult::ok) ++accepted;
        else if (r == PushResult::closed) {
          ++refused;
          return;
        }
        (void)p;
      }
    });
  }
  std::uint64_t popped = 0;
  const auto until = std::chrono::steady_clock::now() + 100ms;
  std::uint64_t v;
  while (std::chrono::steady_clock::now() < until) {
    if (q.try_pop(v)) ++popped;
  }
  const std::uint64_t final_count = q.close();
  // Drain what was accepted before the close, including positions still being published.
  while (!q.drained()) {
    if (q.try_pop(v)) ++popped;
    else std::this_thread::yield();
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(refused.load(), static_cast<std::uint64_t>(kProducers));
  EXPECT_EQ(popped, accepted.load());
  EXPECT_EQ(popped, final_count);
  EXPECT_FALSE(q.try_pop(v));
}

}  // namespace
