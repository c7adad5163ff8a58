// The load generators' own pieces (bench/start_gate.hpp, bench/host_noise.hpp): every figure of
// docs/BENCHMARKS.md rests on them. Runs under TSan with the rest of the unit tests.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "host_noise.hpp"
#include "start_gate.hpp"

namespace gb = gpubatch::bench;
using Clock = std::chrono::steady_clock;

TEST(StartGate, NoSenderPassesBeforeEveryOneArrivedAndTheGateOpened) {
  constexpr int kSenders = 6;
  gb::StartGate gate(kSenders);
  std::atomic<int> arrived{0}, passed{0};
  std::vector<std::thread> senders;
  for (int i = 0; i < kSenders; ++i)
    senders.emplace_back([&] {
      arrived.fetch_add(1);
      gate.arrive_and_wait();
      passed.fetch_add(1);
    });
  gate.wait_ready();
  EXPECT_EQ(arrived.load(), kSenders);  // wait_ready returned only once all had arrived
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(passed.load(), 0);  // and nobody went on before the gate opened
  gate.open();
  for (auto& t : senders) t.join();
  EXPECT_EQ(passed.load(), kSenders);
}

TEST(StartGate, ReserveTouchedLeavesAnEmptyVectorWithTheRoom) {
  std::vector<double> v{1.0, 2.0};
  gb::reserve_touched(v, 100000);
  EXPECT_TRUE(v.empty());
  EXPECT_GE(v.capacity(), 100000u);
  const double* before = v.data();
  for (int i = 0; i < 100000; ++i) v.push_back(i);
  EXPECT_EQ(v.data(), before);  // no reallocation while the samples come in
}

TEST(StartGate, WarmingAThreadHeapFreesWhatItTook) {
  // Nothing to observe but that it runs and returns its memory (LeakSanitizer under ASan).
  std::thread t([] { gb::warm_thread_heap(std::size_t{2} << 20); });
  t.join();
  SUCCEED();
}

TEST(OpenLoopPacing, ASenderAheadOfItsScheduleSleepsAtLeastThePace) {
  gb::precise_timer_slack();
  const auto start = Clock::now();
  gb::sleep_to_next_send(start + std::chrono::microseconds(5), std::chrono::microseconds(150));
  EXPECT_GE(Clock::now() - start, std::chrono::microseconds(150));
}

TEST(OpenLoopPacing, WithoutAPaceItSleepsUntilTheNextSend) {
  gb::precise_timer_slack();
  const auto start = Clock::now();
  gb::sleep_to_next_send(start + std::chrono::microseconds(150), std::chrono::microseconds(0));
  EXPECT_GE(Clock::now() - start, std::chrono::microseconds(150));
}

TEST(OpenLoopPacing, ASleepIsCutAt200UsSoThatResultsAreReaped) {
  // A send 1 s away: the call returns long before it (200 us plus however late the thread wakes;
  // the bound here only has to tell 200 us from 1 s).
  const auto start = Clock::now();
  gb::sleep_to_next_send(start + std::chrono::seconds(1), std::chrono::microseconds(50));
  const auto slept = Clock::now() - start;
  EXPECT_GE(slept, std::chrono::microseconds(200));
  EXPECT_LT(slept, std::chrono::milliseconds(500));
}

// The core's copy speed within L1 (gpubatch-load's caller_l1_copy_ns): eight 4 KiB copies take
// more than 32 KiB at 1 TB/s and less than a millisecond at p50, on every thread that asks.
TEST(HostNoise, L1CopySpeedIsAPlausibleTimeOnEveryThread) {
  std::vector<double> seen(3);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = gb::l1_copy_ns(); });
  for (auto& t : threads) t.join();
  for (double ns : seen) {
    EXPECT_GT(ns, 32.0);
    EXPECT_LT(ns, 1e6);
  }
}
