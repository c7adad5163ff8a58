// Express batches on the real device (DESIGN.md "Priorities"): while callers keep the regular slot
// busy with level-0 requests, level-1 requests go out in express batches beside them, under the
// validation layer. Every result against the CPU reference.
#include <gtest/gtest.h>

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

TEST(ExpressExecutor, HighPriorityRequestsGoInExpressBatchesBesideACrowdAndAllAreRight) {
  Device device;
  BatchConfig config = BatchConfig::preset("adaptive");
  config.priority_levels = 2;
  config.max_inflight_batches = 1;  // the regular slot is busy most of the time
  BatchExecutor executor(device, config);
  constexpr int kThreads = 4, kRounds = 6, kEach = 120;
  gpubatch::testing::ReferenceTally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(4100 + t);
      auto gpu = executor.handle();
      for (int round = 0; round < kRounds; ++round) {
        std::vector<Request> requests;
        std::vector<std::future<Result>> futures;
        for (int i = 0; i < kEach; ++i) {
          requests.push_back(sample_request(i % 3 ? Op::relu : Op::gelu, 64 + rng() % 4000, rng));
          const bool high = i % 10 == 0;
          futures.push_back(high ? gpu.submit(requests.back(), SubmitOptions::with_priority(1))
                                 : gpu.submit(requests.back()));
        }
        for (int i = 0; i < kEach; ++i) tally.check(requests[i], [&] { return futures[i].get(); });
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(tally.mismatches.load(), 0);
  EXPECT_EQ(tally.errors.load(), 0);
  executor.shutdown();
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, std::uint64_t{kThreads} * kRounds * kEach);
  EXPECT_GT(s.express_batches, 0u) << "the crowd kept the regular slot busy: level 1 went express";
  EXPECT_EQ(s.failed, 0u);
}
