// The strand's drain rate (src/executor/drain_rate.hpp) on synthetic runs, time passed in.
#include "executor/drain_rate.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using detail::DrainRate;
using Clock = DrainRate::Clock;

const Clock::time_point t0 = Clock::time_point(std::chrono::seconds(1000));

TEST(DrainRate, PredictsNothingBeforeAWholeWindowOfBacklog) {
  DrainRate r;
  EXPECT_EQ(r.wait_behind(1000, t0).count(), 0);
  r.observe(t0, 0, true);
  r.observe(t0 + 500us, 500, true);  // half a window
  EXPECT_EQ(r.wait_behind(1000, t0 + 500us).count(), 0);
  EXPECT_EQ(r.ns_per_request(), 0);
}

TEST(DrainRate, MeasuresRequestsPerSecondOverABacklog) {
  DrainRate r;
  r.observe(t0, 100, true);
  r.observe(t0 + 2ms, 100 + 2000, true);  // 1 us per request
  EXPECT_EQ(r.ns_per_request(), 1000);
  EXPECT_EQ(r.wait_behind(5000, t0 + 2ms), 5ms);
}

TEST(DrainRate, AnIdleQueueSaysNothingOfTheRate) {
  DrainRate r;
  r.observe(t0, 0, true);
  r.observe(t0 + 1ms, 1000, false);  // the queue ran dry: the window closes unmeasured
  r.observe(t0 + 10ms, 1010, true);  // a new backlog opens a new window
  EXPECT_EQ(r.ns_per_request(), 0);
  r.observe(t0 + 12ms, 1010 + 4000, true);  // 0.5 us per request
  EXPECT_EQ(r.ns_per_request(), 500);
}

TEST(DrainRate, FollowsAChangeOfRateWithinAFewWindows) {
  DrainRate r;
  std::uint64_t taken = 0;
  auto t = t0;
  r.observe(t, taken, true);
  for (int i = 0; i < 4; ++i) r.observe(t += 1ms, taken += 1000, true);  // 1 us each
  EXPECT_EQ(r.ns_per_request(), 1000);
  for (int i = 0; i < 6; ++i) r.observe(t += 1ms, taken += 4000, true);  // 250 ns each
  EXPECT_NEAR(static_cast<double>(r.ns_per_request()), 250.0, 15.0);
}

TEST(DrainRate, AStuckStrandGivesNoRateAndAnOldRatePredictsNothing) {
  DrainRate r;
  r.observe(t0, 0, true);
  r.observe(t0 + 1ms, 1000, true);
  ASSERT_EQ(r.ns_per_request(), 1000);
  r.observe(t0 + 5ms, 1000, true);  // nothing taken: not a rate of zero
  EXPECT_EQ(r.ns_per_request(), 1000);
  EXPECT_EQ(r.wait_behind(10, t0 + 5ms), 10us);  // last measured at 1 ms: still recent
  EXPECT_EQ(r.wait_behind(10, t0 + 1ms + DrainRate::kStale + 1us).count(), 0);
}

TEST(DrainRate, TheShortestRecentWaitOfTheNewestRequestsOfTheLastBatches) {
  DrainRate r;
  for (std::size_t i = 0; i + 1 < DrainRate::kFlushes; ++i) r.flushed(t0, 5ms);
  EXPECT_EQ(r.recent_wait(t0).count(), 0) << "not before kFlushes batches";
  r.flushed(t0 + 1ms, 3ms);
  EXPECT_EQ(r.recent_wait(t0 + 1ms), 3ms);
  r.flushed(t0 + 2ms, 8ms);  // the shortest of the last four still counts
  EXPECT_EQ(r.recent_wait(t0 + 2ms), 3ms);
  for (std::size_t i = 0; i < DrainRate::kFlushes; ++i) r.flushed(t0 + 3ms, 10ms);
  EXPECT_EQ(r.recent_wait(t0 + 3ms), 10ms) << "the short one has left the window";
  EXPECT_EQ(r.recent_wait(t0 + 3ms + DrainRate::kStale + 1us).count(), 0) << "stale";
  r.flushed(t0 + 100ms, -1ms);  // a clock step: never a negative wait
  EXPECT_EQ(r.recent_wait(t0 + 100ms).count(), 0);
}

}  // namespace
}  // namespace gpubatch::testing
