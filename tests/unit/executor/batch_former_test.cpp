// The batch former on its own, with time passed in: flush reasons, the time to look again,
// priority order, aging, byte limits, sweeps. No threads and no clock.
#include "executor/batch_former.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using detail::FlushReason;
using Clock = std::chrono::steady_clock;
using T = Clock::time_point;

struct Item {
  int id = 0;
  T enqueued{};
  T deadline = T::max();
  std::size_t bytes = 8;
  std::uint8_t priority = 0;
};
using Former = detail::BatchFormer<Item>;

const T t0 = T{} + 1h;  // a fake clock's origin

Former::Limits limits(std::size_t size, std::size_t levels = 1,
                      FlushPolicy policy = FlushPolicy::deadline) {
  Former::Limits l;
  l.max_batch_size = size;
  l.max_batch_bytes = 1 << 20;
  l.max_wait = 5ms;
  l.policy = policy;
  l.levels = levels;
  l.aging = 50ms;
  return l;
}

std::vector<int> ids(const std::vector<Item>& items) {
  std::vector<int> v;
  for (const Item& i : items) v.push_back(i.id);
  return v;
}

// A batch whose every request fits (by count and bytes) is handed over whole: the items come in
// arrival order, the former is empty after, and the vector it took them in keeps serving (its
// capacity goes back to the former). One over the byte limit stays behind.
TEST(BatchFormer, ABatchThatFitsIsTakenWholeAndInOrder) {
  Former f(limits(3));
  std::vector<Item> out;
  out.reserve(64);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 3; ++i) f.offer({.id = round * 10 + i, .enqueued = t0}, t0);
    EXPECT_TRUE(f.full());
    f.take(out, t0);
    EXPECT_EQ(ids(out), (std::vector<int>{round * 10, round * 10 + 1, round * 10 + 2}));
    EXPECT_TRUE(f.empty());
    EXPECT_EQ(f.bytes(), 0u);
    EXPECT_EQ(f.earliest_deadline(), T::max());
  }
  Former g(limits(8));
  g.set_byte_limit(20);
  for (int i = 0; i < 3; ++i) g.offer({.id = i, .enqueued = t0, .bytes = 8}, t0);  // 24 > 20 bytes
  g.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.size(), 1u);
  g.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{2}));
}

TEST(BatchFormer, EmptyHasNothingToDoAndNoWakeUp) {
  Former f(limits(4));
  const auto d = f.decide(t0, {});
  EXPECT_FALSE(d.reason);
  EXPECT_EQ(d.wake_at, T::max());
}

TEST(BatchFormer, DeadlinePolicyWaitsMaxWaitFromTheOldest) {
  Former f(limits(4));
  f.offer({.id = 1, .enqueued = t0}, t0);
  f.offer({.id = 2, .enqueued = t0 + 3ms}, t0 + 3ms);
  auto d = f.decide(t0 + 3ms, {});
  EXPECT_FALSE(d.reason);
  EXPECT_EQ(d.wake_at, t0 + 5ms);  // from the oldest, not the newest
  d = f.decide(t0 + 5ms, {});
  ASSERT_TRUE(d.reason);
  EXPECT_EQ(*d.reason, FlushReason::deadline);
}

TEST(BatchFormer, FullByCountFlushesBySize) {
  Former f(limits(2));
  f.offer({.id = 1, .enqueued = t0}, t0);
  EXPECT_TRUE(f.wants(0));
  f.offer({.id = 2, .enqueued = t0}, t0);
  EXPECT_FALSE(f.wants(0));
  ASSERT_TRUE(f.decide(t0, {}).reason);
  EXPECT_EQ(*f.decide(t0, {}).reason, FlushReason::size);
  std::vector<Item> out;
  f.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{1, 2}));
  EXPECT_TRUE(f.empty());
}

TEST(BatchFormer, AdaptiveFlushesAtOnceAndShutdownFlushesWhatIsHeld) {
  Former a(limits(8, 1, FlushPolicy::adaptive));
  a.offer({.id = 1, .enqueued = t0}, t0);
  EXPECT_EQ(a.decide(t0, {}).reason, FlushReason::idle);
  Former d(limits(8));
  d.offer({.id = 1, .enqueued = t0}, t0);
  EXPECT_EQ(d.decide(t0, {.closing = true}).reason, FlushReason::shutdown);
}

TEST(BatchFormer, BlockedOnASlotSetsNoTimer) {
  Former f(limits(8));
  f.offer({.id = 1, .enqueued = t0}, t0);
  const auto d = f.decide(t0 + 1ms, {.blocked_on_slot = true});
  EXPECT_FALSE(d.reason);
  EXPECT_EQ(d.wake_at, T::max());
}

TEST(BatchFormer, ARequestThatWouldPassMaxBatchBytesWaitsForTheNextBatch) {
  Former::Limits l = limits(8);
  l.max_batch_bytes = 100;
  Former f(l);
  f.offer({.id = 1, .enqueued = t0, .bytes = 60}, t0);
  EXPECT_TRUE(f.wants(0));
  f.offer({.id = 2, .enqueued = t0, .bytes = 60}, t0);
  EXPECT_FALSE(f.wants(0));  // over the byte limit: stop pulling
  EXPECT_EQ(f.decide(t0, {}).reason, FlushReason::size);
  std::vector<Item> out;
  f.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{1}));
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.bytes(), 60u);
  f.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{2}));
}

// Bytes read and written in place (a caller's HostBuffers) weigh an eighth against
// max_batch_bytes (kInPlaceShare): eight requests of 100 bytes all in place fill a 100-byte batch
// that one copied request of 100 fills alone; a request partly in place weighs its copied part in
// full. (The held bytes are weights too.)
TEST(BatchFormer, BytesInPlaceWeighAnEighthAgainstMaxBatchBytes) {
  struct Placed {
    int id = 0;
    T enqueued{};
    T deadline = T::max();
    std::size_t bytes = 100;
    std::uint8_t priority = 0;
    std::size_t in_place = 100;
  };
  static_assert(detail::kInPlaceShare == 8);
  detail::BatchFormer<Placed>::Limits l;
  l.max_batch_size = 64;
  l.max_batch_bytes = 100;
  l.policy = FlushPolicy::deadline;
  detail::BatchFormer<Placed> f(l);
  for (int i = 0; i < 9; ++i) f.offer({.id = i, .enqueued = t0}, t0);  // 12 bytes each
  EXPECT_EQ(f.bytes(), 9u * 12u);
  f.offer({.id = 9, .enqueued = t0, .bytes = 40, .in_place = 16}, t0);  // 24 copied + 2
  EXPECT_EQ(f.bytes(), 9u * 12u + 26u);
  std::vector<Placed> out;
  f.take(out, t0);
  EXPECT_EQ(out.size(), 8u);  // 96 of 100; the ninth would pass the limit
  f.take(out, t0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].id, 9);
  EXPECT_EQ(f.bytes(), 0u);
  EXPECT_EQ(detail::weight_of(Item{.bytes = 100}), 100u);  // an item without in_place: its bytes
}

TEST(BatchFormer, ARequestLargerThanMaxBatchBytesGoesAlone) {
  Former::Limits l = limits(8);
  l.max_batch_bytes = 100;
  Former f(l);
  f.offer({.id = 1, .enqueued = t0, .bytes = 500}, t0);
  EXPECT_FALSE(f.full());
  std::vector<Item> out;
  f.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{1}));
}

TEST(BatchFormer, HigherLevelsGoFirstAndEachLevelKeepsItsOrder) {
  Former f(limits(3, 3));
  f.offer({.id = 1, .enqueued = t0, .priority = 0}, t0);
  f.offer({.id = 2, .enqueued = t0, .priority = 0}, t0);
  f.offer({.id = 3, .enqueued = t0, .priority = 2}, t0);
  f.offer({.id = 4, .enqueued = t0, .priority = 1}, t0);
  f.offer({.id = 5, .enqueued = t0, .priority = 2}, t0);
  std::vector<Item> out;
  f.take(out, t0 + 1ms);
  EXPECT_EQ(ids(out), (std::vector<int>{3, 5, 4}));
  f.take(out, t0 + 1ms);
  EXPECT_EQ(ids(out), (std::vector<int>{1, 2}));
  EXPECT_TRUE(f.empty());
}

// An express batch holds only levels above 0, highest first, each in arrival order, within the
// batch's count and byte limits; level 0 stays (aged or not) for take().
TEST(BatchFormer, TakeUpperLeavesLevelZeroAndKeepsOrderAndLimits) {
  Former f(limits(3, 3));
  f.offer({.id = 1, .enqueued = t0, .priority = 0}, t0);
  f.offer({.id = 2, .enqueued = t0, .priority = 1}, t0);
  f.offer({.id = 3, .enqueued = t0, .priority = 2}, t0);
  f.offer({.id = 4, .enqueued = t0, .priority = 1}, t0);
  f.offer({.id = 5, .enqueued = t0, .priority = 1}, t0);
  EXPECT_EQ(f.upper_size(), 4u);
  std::vector<Item> out;
  f.take_upper(out);
  EXPECT_EQ(ids(out), (std::vector<int>{3, 2, 4})) << "max_batch_size 3";
  EXPECT_EQ(f.upper_size(), 1u);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_EQ(f.bytes(), 16u);
  f.take_upper(out);
  EXPECT_EQ(ids(out), (std::vector<int>{5}));
  f.take_upper(out);
  EXPECT_TRUE(out.empty());
  f.take(out, t0 + 60ms);  // aged: still only take() serves level 0
  EXPECT_EQ(ids(out), (std::vector<int>{1}));
  EXPECT_TRUE(f.empty());
  // A request over the byte limit goes alone; the next waits for the next express batch.
  Former g(limits(8, 2));
  g.offer({.id = 7, .enqueued = t0, .bytes = 2u << 20, .priority = 1}, t0);
  g.offer({.id = 8, .enqueued = t0, .priority = 1}, t0);
  g.take_upper(out);
  EXPECT_EQ(ids(out), (std::vector<int>{7}));
  g.take_upper(out);
  EXPECT_EQ(ids(out), (std::vector<int>{8}));
  EXPECT_TRUE(g.empty());
}

// The earliest arrival above level 0 (the express hold counts from it): level 0 does not count,
// every higher level does, and none held is time_point::max().
TEST(BatchFormer, OldestUpperIsTheEarliestArrivalAboveLevelZero) {
  Former f(limits(8, 3));
  EXPECT_EQ(f.oldest_upper(), T::max());
  f.offer({.id = 1, .enqueued = t0, .priority = 0}, t0);
  EXPECT_EQ(f.oldest_upper(), T::max()) << "level 0 alone";
  f.offer({.id = 2, .enqueued = t0 + 3ms, .priority = 2}, t0 + 3ms);
  f.offer({.id = 3, .enqueued = t0 + 2ms, .priority = 1}, t0 + 3ms);
  f.offer({.id = 4, .enqueued = t0 + 1ms, .priority = 2}, t0 + 3ms);  // behind 2 in its level
  EXPECT_EQ(f.oldest_upper(), t0 + 2ms) << "each level's first, the earliest of them";
  EXPECT_EQ(f.oldest(), t0);
  std::vector<Item> out;
  f.take_upper(out);
  EXPECT_EQ(f.oldest_upper(), T::max());
}

// A regular batch of level 0 alone (the express batch in flight will take the higher levels):
// the higher levels stay held, aged or not, in their order, and the limits still apply.
TEST(BatchFormer, Level0OnlyLeavesTheHigherLevelsHeld) {
  Former f(limits(3, 3));
  f.offer({.id = 1, .enqueued = t0, .priority = 2}, t0);
  for (int i = 0; i < 4; ++i) f.offer({.id = 10 + i, .enqueued = t0, .priority = 0}, t0);
  f.offer({.id = 2, .enqueued = t0, .priority = 1}, t0);
  std::vector<Item> out;
  f.take(out, t0 + 60ms, true);  // everything has aged: still level 0 only
  EXPECT_EQ(ids(out), (std::vector<int>{10, 11, 12})) << "max_batch_size 3";
  EXPECT_EQ(f.upper_size(), 2u);
  f.take(out, t0 + 60ms, true);
  EXPECT_EQ(ids(out), (std::vector<int>{13}));
  f.take(out, t0 + 60ms, true);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(f.size(), 2u);
  f.take_upper(out);
  EXPECT_EQ(ids(out), (std::vector<int>{1, 2}));
  EXPECT_TRUE(f.empty());
}

// An item that counts its moves, to see which takes hand a level over whole.
struct Counted {
  static inline int moves = 0;
  int id = 0;
  T enqueued{};
  T deadline = T::max();
  std::size_t bytes = 8;
  std::uint8_t priority = 0;
  Counted() = default;
  Counted(int i, std::uint8_t p, T d = T::max()) : id(i), enqueued(t0), deadline(d), priority(p) {}
  Counted(Counted&& o) noexcept : id(o.id), enqueued(o.enqueued), deadline(o.deadline), bytes(o.bytes), priority(o.priority) { ++moves; }
  Counted& operator=(Counted&& o) noexcept {
    id = o.id, enqueued = o.enqueued, deadline = o.deadline, bytes = o.bytes, priority = o.priority;
    ++moves;
    return *this;
  }
};

// With levels, a batch that is all of level 0 (the levels above empty, or held for the express
// batch) is handed over whole, without a move each, as with one level; what stays held keeps its
// bytes and earliest deadline. Level 0 past the batch's count or bytes goes request by request.
TEST(BatchFormer, WithLevelsAWholeLevelZeroIsHandedOverWithoutAMove) {
  const Former::Limits l = limits(4, 2);
  detail::BatchFormer<Counted>::Limits cl;
  cl.max_batch_size = l.max_batch_size;
  cl.max_batch_bytes = l.max_batch_bytes;
  cl.levels = l.levels;
  detail::BatchFormer<Counted> f(cl);
  std::vector<Counted> out;
  out.reserve(16);
  for (int i = 0; i < 4; ++i) f.offer(Counted(i, 0), t0);
  Counted::moves = 0;
  f.take(out, t0);
  EXPECT_EQ(Counted::moves, 0) << "upper levels empty: level 0 whole";
  ASSERT_EQ(out.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i].id, i);
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(f.bytes(), 0u);
  for (int i = 0; i < 3; ++i) f.offer(Counted(10 + i, 0), t0);
  f.offer(Counted(99, 1, t0 + 7ms), t0);
  Counted::moves = 0;
  f.take(out, t0, true);
  EXPECT_EQ(Counted::moves, 0) << "level 0 only: level 0 whole, the upper level held";
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].id, 10);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.bytes(), 8u);
  EXPECT_EQ(f.earliest_deadline(), t0 + 7ms);
  f.take_upper(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].id, 99);
  EXPECT_EQ(f.earliest_deadline(), T::max());
  for (int i = 0; i < 5; ++i) f.offer(Counted(20 + i, 0), t0);  // past max_batch_size 4
  f.take(out, t0);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].id, 23);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.bytes(), 8u);
  f.take(out, t0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].id, 24);
  EXPECT_EQ(f.bytes(), 0u);
  // Taken into a vector without capacity (a new batch's), level 0 still grows to a batch's worth
  // again without moving what it holds: one move an offer.
  for (int i = 0; i < 4; ++i) f.offer(Counted(30 + i, 0), t0);
  std::vector<Counted> fresh;
  f.take(fresh, t0);
  ASSERT_EQ(fresh.size(), 4u);
  Counted::moves = 0;
  for (int i = 0; i < 4; ++i) f.offer(Counted(40 + i, 0), t0);
  EXPECT_EQ(Counted::moves, 4);
}

TEST(BatchFormer, EachLevelHoldsABatchSoAHigherOneIsAlwaysInView) {
  Former f(limits(2, 2));
  f.offer({.id = 1, .enqueued = t0}, t0);
  f.offer({.id = 2, .enqueued = t0}, t0);
  EXPECT_FALSE(f.wants(0));
  EXPECT_TRUE(f.wants(1));  // level 0 is full, level 1 still takes requests
  f.offer({.id = 3, .enqueued = t0, .priority = 1}, t0);
  std::vector<Item> out;
  f.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{3, 1}));
}

TEST(BatchFormer, AgedRequestsGoFirstWhateverTheirLevel) {
  Former f(limits(2, 2));
  f.offer({.id = 1, .enqueued = t0, .priority = 0}, t0);
  for (int i = 0; i < 2; ++i) {
    const T now = t0 + 60ms;
    f.offer({.id = 10 + i, .enqueued = now, .priority = 1}, now);
  }
  std::vector<Item> out;
  f.take(out, t0 + 60ms);  // id 1 has waited 60 ms > aging 50 ms
  EXPECT_EQ(ids(out), (std::vector<int>{1, 10}));
  f.take(out, t0 + 60ms);
  EXPECT_EQ(ids(out), (std::vector<int>{11}));
}

TEST(BatchFormer, AgedRequestsTakeAtMostAQuarterOfABatch) {
  Former f(limits(8, 2));
  for (int i = 0; i < 8; ++i) f.offer({.id = i, .enqueued = t0, .priority = 0}, t0);  // all aged later
  const T now = t0 + 60ms;
  for (int i = 0; i < 8; ++i) f.offer({.id = 100 + i, .enqueued = now, .priority = 1}, now);
  std::vector<Item> out;
  f.take(out, now);
  // Two aged (a quarter of 8), then the higher level.
  EXPECT_EQ(ids(out), (std::vector<int>{0, 1, 100, 101, 102, 103, 104, 105}));
  f.take(out, now);
  EXPECT_EQ(ids(out), (std::vector<int>{2, 3, 106, 107, 4, 5, 6, 7}));
}

TEST(BatchFormer, WithoutAgingALowerLevelWaitsBehindHigherOnes) {
  Former f(limits(2, 2));
  f.offer({.id = 1, .enqueued = t0, .priority = 0}, t0);
  f.offer({.id = 10, .enqueued = t0, .priority = 1}, t0);
  f.offer({.id = 11, .enqueued = t0, .priority = 1}, t0);
  std::vector<Item> out;
  f.take(out, t0 + 10ms);
  EXPECT_EQ(ids(out), (std::vector<int>{10, 11}));
}

TEST(BatchFormer, APredictedDeviceTimeFlushesADeadlineEarly) {
  Former f(limits(8));
  f.offer({.id = 1, .enqueued = t0, .deadline = t0 + 3ms}, t0);
  Former::Input in;
  in.predicted_device_time = 1ms;
  auto d = f.decide(t0, in);
  EXPECT_FALSE(d.reason);
  EXPECT_EQ(d.wake_at, t0 + 2ms);  // the deadline minus the predicted device time
  d = f.decide(t0 + 2ms, in);
  EXPECT_EQ(d.reason, FlushReason::deadline);
  // Without a prediction, only max_wait counts.
  EXPECT_FALSE(f.decide(t0 + 2ms, {}).reason);
}

TEST(BatchFormer, RemoveIfKeepsOrderBytesAndTheEarliestDeadline) {
  Former f(limits(8, 2));
  f.offer({.id = 1, .enqueued = t0, .deadline = t0 + 1ms, .bytes = 10}, t0);
  f.offer({.id = 2, .enqueued = t0, .deadline = t0 + 9ms, .bytes = 20}, t0);
  f.offer({.id = 3, .enqueued = t0, .deadline = t0 + 4ms, .bytes = 30, .priority = 1}, t0);
  f.offer({.id = 4, .enqueued = t0, .bytes = 40}, t0);
  EXPECT_EQ(f.earliest_deadline(), t0 + 1ms);
  f.remove_if([](const Item& i) { return i.id == 1 || i.id == 3; });
  EXPECT_EQ(f.size(), 2u);
  EXPECT_EQ(f.bytes(), 60u);
  EXPECT_EQ(f.earliest_deadline(), t0 + 9ms);
  std::vector<Item> out;
  f.take(out, t0);
  EXPECT_EQ(ids(out), (std::vector<int>{2, 4}));
}

TEST(BatchFormer, PartialTakesOfALongLevelKeepArrivalOrder) {
  Former f(limits(100, 2));
  int next = 0;
  std::vector<int> taken;
  std::vector<Item> out;
  // Interleave offers and partial takes (level 1 always holds some, so level 0 is taken in part).
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 90 && f.wants(0); ++i) f.offer({.id = next++, .enqueued = t0}, t0);
    f.offer({.id = -1, .enqueued = t0, .priority = 1}, t0);
    f.take(out, t0);
    for (const Item& it : out)
      if (it.id >= 0) taken.push_back(it.id);
  }
  while (!f.empty()) {
    f.take(out, t0);
    for (const Item& it : out)
      if (it.id >= 0) taken.push_back(it.id);
  }
  ASSERT_EQ(taken.size(), static_cast<std::size_t>(next));
  for (int i = 0; i < next; ++i) ASSERT_EQ(taken[static_cast<std::size_t>(i)], i);
}

}  // namespace
}  // namespace gpubatch::testing

namespace gpubatch::testing {
namespace {

// set_count_limit: full(), wants() and take() follow the lower limit (never above
// max_batch_size, never 0); a level held beyond it (the limit fell) is taken in parts, in order.
TEST(BatchFormer, ACountLimitCapsBatchesBelowMaxBatchSize) {
  Former f(limits(8, 1, FlushPolicy::adaptive));
  f.set_count_limit(3);
  EXPECT_EQ(f.count_limit(), 3u);
  for (int i = 0; i < 2; ++i) f.offer({.id = i, .enqueued = t0}, t0);
  EXPECT_TRUE(f.wants(0));
  EXPECT_FALSE(f.full());
  f.offer({.id = 2, .enqueued = t0}, t0);
  EXPECT_FALSE(f.wants(0));
  EXPECT_TRUE(f.full());
  EXPECT_EQ(f.decide(t0, {}).reason, FlushReason::size);
  f.set_count_limit(8);  // raised: takes more
  for (int i = 3; i < 7; ++i) f.offer({.id = i, .enqueued = t0}, t0);
  f.set_count_limit(2);  // lowered with 7 held
  std::vector<Item> out;
  std::vector<int> taken;
  while (!f.empty()) {
    f.take(out, t0);
    EXPECT_LE(out.size(), 2u);
    for (const Item& it : out) taken.push_back(it.id);
  }
  EXPECT_EQ(taken, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  f.set_count_limit(100);
  EXPECT_EQ(f.count_limit(), 8u);
  f.set_count_limit(0);
  EXPECT_EQ(f.count_limit(), 1u);
}

}  // namespace
}  // namespace gpubatch::testing
