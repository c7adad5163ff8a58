// The adaptive policy's count cap on its own, with time passed in (src/executor/count_cap.hpp):
// the small cap until batch after batch fills it for `sustain`, the full one until a batch does
// not fill even the small cap.
#include "executor/count_cap.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Cap = detail::CountCap<Clock>;
const Clock::time_point t0 = Clock::time_point{} + 1h;

TEST(CountCap, StartsAtTheSmallCap) {
  Cap c(1024, 4096, 10ms);
  EXPECT_EQ(c.limit(), 1024u);
  EXPECT_FALSE(c.raised());
}

// Full batches for less than `sustain` keep the small cap; from `sustain` on, the full one.
TEST(CountCap, FullBatchesForTheSustainRaiseIt) {
  Cap c(1024, 4096, 10ms);
  for (int ms = 0; ms < 10; ++ms) {
    c.taken(1024, t0 + std::chrono::milliseconds(ms));
    EXPECT_EQ(c.limit(), 1024u) << ms;
  }
  c.taken(1024, t0 + 10ms);
  EXPECT_EQ(c.limit(), 4096u);
  EXPECT_TRUE(c.raised());
}

// A burst: full batches for a few milliseconds, then one that takes what waits whole. The run of
// full batches starts again from there.
TEST(CountCap, ABatchUnderTheSmallCapEndsTheRun) {
  Cap c(1024, 4096, 10ms);
  for (int ms = 0; ms < 8; ++ms) c.taken(1024, t0 + std::chrono::milliseconds(ms));
  c.taken(300, t0 + 8ms);
  for (int ms = 9; ms < 18; ++ms) c.taken(1024, t0 + std::chrono::milliseconds(ms));
  EXPECT_EQ(c.limit(), 1024u);  // 9 ms of full batches since the drained one
  c.taken(1024, t0 + 19ms);
  EXPECT_EQ(c.limit(), 4096u);
}

// Raised, a batch between the caps keeps it raised (a saturated crowd's batches are not all
// full); batches under the small cap lower it once they have gone on for `sustain`, and the next
// raise needs a whole sustain of full ones again.
TEST(CountCap, RaisedItFallsAfterASustainOfBatchesUnderTheSmallCap) {
  Cap c(1024, 4096, 10ms);
  c.taken(1024, t0);
  c.taken(1024, t0 + 10ms);
  ASSERT_EQ(c.limit(), 4096u);
  c.taken(2000, t0 + 11ms);
  c.taken(1023, t0 + 12ms);  // now and then a light batch at saturation: stays raised
  c.taken(4096, t0 + 13ms);
  c.taken(100, t0 + 14ms);
  c.taken(3000, t0 + 20ms);  // between the caps: the light run starts again
  c.taken(100, t0 + 21ms);
  c.taken(100, t0 + 30ms);
  EXPECT_EQ(c.limit(), 4096u);
  c.taken(100, t0 + 31ms);
  EXPECT_EQ(c.limit(), 1024u);
  c.taken(1024, t0 + 32ms);
  c.taken(1024, t0 + 41ms);
  EXPECT_EQ(c.limit(), 1024u);
  c.taken(1024, t0 + 42ms);
  EXPECT_EQ(c.limit(), 4096u);
}

// 0, or a small cap at or above the full one: always the full cap.
TEST(CountCap, OffWhenZeroOrNotSmaller) {
  for (std::size_t small : {std::size_t{0}, std::size_t{4096}, std::size_t{8192}}) {
    Cap c(small, 4096, 10ms);
    EXPECT_EQ(c.limit(), 4096u);
    c.taken(1, t0);
    EXPECT_EQ(c.limit(), 4096u);
    EXPECT_FALSE(c.raised());
  }
}

// A sustain of 0: the first full batch raises it.
TEST(CountCap, ZeroSustainRaisesAtTheFirstFullBatch) {
  Cap c(64, 256, 0ms);
  c.taken(63, t0);
  EXPECT_EQ(c.limit(), 64u);
  c.taken(64, t0);
  EXPECT_EQ(c.limit(), 256u);
}

}  // namespace
}  // namespace gpubatch::testing
