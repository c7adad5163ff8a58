// Chunked requests through the executor on the real device (DeviceOptions::split_bytes; src/gpu/
// chunked_request.*, ExecutorCore::try_split), under the validation layer: a lone request in chunks, then five
// callers at once (a chunked request only when no batch is in flight and no other is chunked:
// the rest take the other paths), futures and handle.run(), ops that split and ops that do not,
// beside small requests. Every result against
// the CPU reference.
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
#include "gpubatch/stats.hpp"
#include "support/random_data.hpp"
#include "support/reference_tally.hpp"

using namespace gpubatch;

namespace {

TEST(ChunkedExecutor, CallersGetEveryResultWholeOrInChunks) {
  DeviceOptions options;
  options.split_bytes = 128 << 10;  // 16,384-float relu and up
  ::setenv("GPUBATCH_SPLIT_CHUNK_BYTES", "16384", 1);  // 4,096 floats a chunk
  Device device(options);
  ::unsetenv("GPUBATCH_SPLIT_CHUNK_BYTES");
  BatchExecutor executor(device, BatchConfig::preset("adaptive"));
  {  // Alone: in chunks (one at a time, and only beside no batch in flight).
    std::mt19937 rng(299);
    const Request lone = chain(random_floats(70000, rng)).relu().scale(2.0f);
    EXPECT_EQ(reference::check(lone, executor.handle().submit(lone).get()), std::nullopt);
    EXPECT_EQ(executor.stats().split, 1u);
    // Two inputs by ranges, and a dot by partial sums (a std::future<float>).
    const Request add = Request::add(random_floats(50000, rng), random_floats(50000, rng));
    EXPECT_EQ(reference::check(add, executor.handle().submit(add).get()), std::nullopt);
    const std::vector<float> x = random_floats(60001, rng), y = random_floats(60001, rng);
    const Request dot = Request::dot(x, y);
    const float got = executor.handle().dot(x, y).get();
    EXPECT_EQ(reference::check(dot, Result{{got}, {}}), std::nullopt);
    EXPECT_EQ(executor.stats().split, 3u);
  }
  constexpr int kThreads = 5, kRounds = 2;
  gpubatch::testing::ReferenceTally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(300 + t);
      auto gpu = executor.handle();
      for (int round = 0; round < kRounds; ++round) {
        std::vector<Request> requests;
        requests.push_back(Request::unary(Op::relu, random_floats(40000 + t, rng)));
        requests.push_back(chain(random_floats(30001, rng)).gelu().scale(0.5f));
        requests.push_back(Request::clamp(random_floats(50000, rng), -1.0f, 1.5f));
        requests.push_back(Request::add(random_floats(40000, rng), random_floats(40000, rng)));
        requests.push_back(Request::dot(random_floats(33000, rng), random_floats(33000, rng)));
        requests.push_back(Request::matmul(random_floats(128 * 128, rng), random_floats(128 * 128, rng), 128, 128, 128));  // not split
        for (int i = 0; i < 6; ++i) requests.push_back(Request::unary(Op::tanh, random_floats(1 + rng() % 900, rng)));
        const Request sync = Request::unary(Op::swish, random_floats(20000, rng));
        tally.check(sync, [&] { return gpu.run(sync); });
        tally.submit_and_check(gpu, requests);
      }
    });
  }
  for (auto& th : threads) th.join();
  executor.shutdown();
  EXPECT_EQ(tally.mismatches.load(), 0);
  EXPECT_EQ(tally.errors.load(), 0);
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, std::uint64_t{kThreads * kRounds * 13 + 3});
  EXPECT_LE(s.split, std::uint64_t{kThreads * kRounds * 5 + 3});
}

}  // namespace
