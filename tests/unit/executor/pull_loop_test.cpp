// The strand's pull loop (executor/pull_loop.hpp): it takes while the former wants and the queue
// has items, counts what it took across calls, and asks whether to stop for an express batch
// before every `every`-th item, stopping there when told to; never past its budget.
#include "executor/pull_loop.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpubatch::detail {
namespace {

struct FakePull {
  std::uint64_t wanted = 0, queued = 0, taken = 0;
  std::vector<std::uint64_t> looks;  // n at each look
  std::uint64_t stop_at_look = 0;    // the look (1-based) that says stop; 0: none does
  std::uint64_t budget = UINT64_MAX;
  bool drops = false;                // the former drops every item (expired): it never fills
  PullEnd run(std::uint64_t& n, std::uint64_t every) {
    return pull_with_looks(
        n, every, budget, [&] { return taken < wanted; },
        [&] {
          if (queued == 0) return false;
          --queued;
          taken += drops ? 0 : 1;
          return true;
        },
        [&] {
          looks.push_back(n);
          return looks.size() == stop_at_look;
        });
  }
};

TEST(PullLoop, TakesUntilTheFormerIsFullOrTheQueueEmpty) {
  FakePull full{.wanted = 10, .queued = 50};
  std::uint64_t n = 0;
  EXPECT_EQ(full.run(n, 0), PullEnd::filled);
  EXPECT_EQ(n, 10u);
  FakePull empty{.wanted = 100, .queued = 7};
  n = 0;
  EXPECT_EQ(empty.run(n, 0), PullEnd::empty);
  EXPECT_EQ(n, 7u);
  EXPECT_TRUE(full.looks.empty() && empty.looks.empty()) << "every 0: no looks";
}

TEST(PullLoop, LooksBeforeEveryNthItemAndStopsWhenTold) {
  FakePull p{.wanted = 100, .queued = 100, .stop_at_look = 3};
  std::uint64_t n = 0;
  EXPECT_EQ(p.run(n, 4), PullEnd::looked_up);
  EXPECT_EQ(p.looks, (std::vector<std::uint64_t>{3, 7, 11}));
  EXPECT_EQ(n, 11u) << "stopped before the twelfth item";
  EXPECT_EQ(p.taken, 11u);
  // Pulled on after the express batch: the count carries on, and so do the looks.
  p.stop_at_look = 0;
  EXPECT_EQ(p.run(n, 4), PullEnd::filled);
  EXPECT_EQ(n, 100u);
  // It asks again before the item it stopped at (n = 11), then at n = 15, 19, ..., 99.
  EXPECT_EQ(p.looks.size(), 3u + 1u + 22u);
  EXPECT_EQ(p.looks[3], 11u);
  EXPECT_EQ(p.looks.back(), 99u);
}

TEST(PullLoop, AnEmptyQueueEndsThePullBetweenLooks) {
  FakePull p{.wanted = 100, .queued = 5};
  std::uint64_t n = 0;
  EXPECT_EQ(p.run(n, 4), PullEnd::empty);
  EXPECT_EQ(p.looks, (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(n, 5u);
}

// Items the former drops (expired) never fill it: without the budget this pull would take all
// 1,000,000; with it, it ends at the budget and the next pull goes on from there.
TEST(PullLoop, ABudgetEndsAPullOfDroppedItems) {
  FakePull p{.wanted = 10, .queued = 1000000, .budget = 100, .drops = true};
  std::uint64_t n = 0;
  EXPECT_EQ(p.run(n, 0), PullEnd::budget);
  EXPECT_EQ(n, 100u);
  EXPECT_EQ(p.queued, 1000000u - 100u);
  n = 0;  // the next pass
  EXPECT_EQ(p.run(n, 4), PullEnd::budget);
  EXPECT_EQ(p.queued, 1000000u - 200u);
  // Items that fill the former end it first, as before.
  FakePull live{.wanted = 10, .queued = 50, .budget = 100};
  n = 0;
  EXPECT_EQ(live.run(n, 0), PullEnd::filled);
  EXPECT_EQ(n, 10u);
}

}  // namespace
}  // namespace gpubatch::detail
