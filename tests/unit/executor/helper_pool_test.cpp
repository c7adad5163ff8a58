// HelperPool (src/executor/helper_pool.hpp): every part of a job runs once, on the calling thread
// and the helpers; a stopped pool, or a job handed over while another runs, runs on its caller
// alone; idle helpers are started once, at the first job.
#include "executor/helper_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace gpubatch::testing {
namespace {

using detail::HelperPool;
using namespace std::chrono_literals;

struct Seen {
  std::mutex m;
  std::set<std::thread::id> threads;
  void note() {
    std::lock_guard lock(m);
    threads.insert(std::this_thread::get_id());
  }
};

TEST(HelperPool, EveryPartRunsOnceOnSeveralThreads) {
  std::atomic<int> started{0};
  HelperPool pool(3, [&] { ++started; });
  EXPECT_EQ(pool.threads(), 0u) << "none before the first job";
  for (int round = 0; round < 20; ++round) {
    std::vector<std::atomic<int>> runs(64);
    Seen seen;
    pool.run(runs.size(), [&](std::size_t i) {
      seen.note();
      std::this_thread::sleep_for(100us);
      ++runs[i];
    });
    for (auto& r : runs) ASSERT_EQ(r.load(), 1) << "round " << round;
    if (round == 19) EXPECT_GE(seen.threads.size(), 2u);
  }
  EXPECT_EQ(pool.threads(), 3u);
  EXPECT_EQ(started.load(), 3);
}

TEST(HelperPool, AStoppedPoolRunsOnItsCaller) {
  HelperPool pool(2);
  pool.run(4, [](std::size_t) {});
  pool.stop();
  EXPECT_EQ(pool.threads(), 0u);
  Seen seen;
  std::atomic<int> n{0};
  pool.run(32, [&](std::size_t) {
    seen.note();
    ++n;
  });
  EXPECT_EQ(n.load(), 32);
  EXPECT_EQ(seen.threads, (std::set<std::thread::id>{std::this_thread::get_id()}));
  pool.stop();  // again: nothing left to end
}

// Two owners at once: the second job runs on its caller alone; both complete. (The first job's
// three parts all wait for the release: its owner holds one of them, so it is still handed over.)
TEST(HelperPool, AJobBesideAnotherRunsAlone) {
  HelperPool pool(2);
  std::atomic<bool> inside{false}, release{false};
  std::thread first([&] {
    pool.run(3, [&](std::size_t) {
      inside = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!inside) std::this_thread::yield();
  Seen seen;
  std::atomic<int> n{0};
  pool.run(16, [&](std::size_t) {
    seen.note();
    ++n;
  });
  EXPECT_EQ(n.load(), 16);
  EXPECT_EQ(seen.threads, (std::set<std::thread::id>{std::this_thread::get_id()}));
  release = true;
  first.join();
}

TEST(HelperPool, WithoutHelpersTheCallerRunsEverything) {
  HelperPool pool(0);
  std::atomic<int> n{0};
  pool.run(10, [&](std::size_t) { ++n; });
  EXPECT_EQ(n.load(), 10);
  EXPECT_EQ(pool.threads(), 0u);
}

}  // namespace
}  // namespace gpubatch::testing
