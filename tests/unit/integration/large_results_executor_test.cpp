// Large results taken in parts by several threads (VulkanInFlight::take_result over the
// executor's completion threads, ExecutorCore::run_parallel) on the real device, under the
// validation layer: lone large requests (a completion thread or the caller takes the result,
// the idle completion threads help), a crowd of them beside small ones (the strand's copies in
// and the results' copies out want the helpers at once), through futures and handle.run().
// Every result against the CPU reference.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "gpubatch/config.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "support/reference_tally.hpp"

using namespace gpubatch;

namespace {

// Four completion threads also on a device of host cores (lavapipe caps them at half the cores).
BatchExecutor four_helpers(Device& device) {
  BatchConfig config = BatchConfig::preset("adaptive");
  config.completion_threads = 4;
  ::setenv("GPUBATCH_HOST_THREAD_CAP", "off", 1);
  BatchExecutor executor(device, config);
  ::unsetenv("GPUBATCH_HOST_THREAD_CAP");
  return executor;
}

TEST(LargeResults, ALoneLargeRequestComesBackWhole) {
  Device device;
  BatchExecutor executor = four_helpers(device);
  ASSERT_EQ(executor.config().completion_threads, 4u);
  auto gpu = executor.handle();
  std::mt19937 rng(31);
  for (std::size_t n : {std::size_t{262144}, std::size_t{262145}, std::size_t{700001}}) {
    const Request r = Request::unary(Op::gelu, random_floats(n, rng));
    Request moved = r;
    const float* input = moved.a.data();
    const Result got = gpu.submit(std::move(moved)).get();
    EXPECT_EQ(reference::check(r, got), std::nullopt) << n << " floats, future";
    EXPECT_EQ(got.values.data(), input) << "the result came back in the input's buffer";
    const Request c = chain(random_floats(n, rng)).relu().scale(0.25f);
    EXPECT_EQ(reference::check(c, gpu.run(c)), std::nullopt) << n << " floats, run()";
  }
}

TEST(LargeResults, ACrowdOfLargeAndSmallRequests) {
  Device device;
  BatchExecutor executor = four_helpers(device);
  constexpr int kThreads = 3, kRounds = 3;
  gpubatch::testing::ReferenceTally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(700 + t);
      auto gpu = executor.handle();
      for (int round = 0; round < kRounds; ++round) {
        std::vector<Request> requests;
        requests.push_back(Request::unary(Op::relu, random_floats(300000 + t, rng)));
        requests.push_back(Request::add(random_floats(270000, rng), random_floats(270000, rng)));
        for (int i = 0; i < 10; ++i) requests.push_back(Request::unary(Op::relu, random_floats(1 + rng() % 700, rng)));
        tally.submit_and_check(gpu, requests);
      }
    });
  }
  for (auto& th : threads) th.join();
  executor.shutdown();
  EXPECT_EQ(tally.mismatches.load(), 0);
  EXPECT_EQ(tally.errors.load(), 0);
  EXPECT_EQ(executor.stats().completed, std::uint64_t{kThreads * kRounds * 12});
}

}  // namespace
