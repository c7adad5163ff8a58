// The direct lane on the real device (BatchConfig::direct_bytes; src/executor/direct_lane.cpp):
// callers' threads submit their large requests themselves while the strand submits batches of
// small ones, on the direct path and with the copy engine forced for every batch, under the
// validation layer. Every result against the CPU reference.
#include <gtest/gtest.h>

#include <cstdlib>
#include <atomic>
#include <future>
#include <limits>
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

class DirectLaneExecutor : public ::testing::TestWithParam<std::uint64_t> {};

INSTANTIATE_TEST_SUITE_P(Paths, DirectLaneExecutor,
                         ::testing::Values(std::numeric_limits<std::uint64_t>::max(), std::uint64_t{0}),
                         [](const auto& info) { return info.param == 0 ? "CopyEngine" : "Direct"; });

TEST_P(DirectLaneExecutor, CallersSubmitTheirLargeRequestsBesideTheStrandsBatches) {
  DeviceOptions options;
  options.copy_engine_bytes = GetParam();
  Device device(options);
  BatchConfig config = BatchConfig::preset("adaptive");
  config.direct_bytes = 256 << 10;  // 40,000-float requests take the lane (lavapipe is slow)
  // A device of host cores (lavapipe) keeps the lane off unless asked (src/executor/executor.cpp).
  ::setenv("GPUBATCH_HOST_DIRECT", "on", 1);
  BatchExecutor executor(device, config);
  ::unsetenv("GPUBATCH_HOST_DIRECT");
  constexpr int kThreads = 4, kRounds = 3;
  gpubatch::testing::ReferenceTally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(900 + t);
      auto gpu = executor.handle();
      HostBuffer in = device.allocate_host(40000), out = device.allocate_host(40000);
      for (int round = 0; round < kRounds; ++round) {
        const auto x = random_floats(in.size(), rng);
        std::copy(x.begin(), x.end(), in.begin());
        std::vector<Request> requests;
        requests.push_back(Request::unary(Op::relu, random_floats(40000, rng)));
        requests.push_back(Request::add(random_floats(40000, rng), random_floats(40000, rng)));
        requests.push_back(Request::dot(random_floats(40000, rng), random_floats(40000, rng)));
        requests.push_back(Request::from_host(Op::gelu, in).deliver_to(out));
        for (int i = 0; i < 12; ++i) requests.push_back(Request::unary(Op::relu, random_floats(1 + rng() % 500, rng)));
        tally.submit_and_check(gpu, requests);
      }
    });
  }
  for (auto& th : threads) th.join();
  executor.shutdown();
  EXPECT_EQ(tally.mismatches.load(), 0);
  EXPECT_EQ(tally.errors.load(), 0);
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, std::uint64_t{kThreads * kRounds * 16});
  EXPECT_GT(s.direct, 0u) << "four callers keep the executor busy: large requests take the lane";
  if (GetParam() == 0) EXPECT_GT(device.counters().copy_submissions, 0u) << "the copy engine was forced";
}

}  // namespace
