// The kernel cache (gpu::Kernels) builds pipelines outside its lookups' lock, one at a time:
// threads building different kernels at once all succeed, and threads racing for one kernel wait
// for its one build (RELIABILITY.md "A copy-engine batch that never completes": on the H100,
// duplicate builds of one kernel by racing threads preceded the hang).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <latch>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/kernels.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::gpu {
extern const std::pair<std::string_view, std::span<const std::uint32_t>> kEmbeddedShaders[];
extern const std::size_t kEmbeddedShaderCount;
}  // namespace gpubatch::gpu

using namespace gpubatch;

namespace {

DeviceOptions uncached() {
  DeviceOptions o;
  o.pipeline_cache_dir = "none";  // every build is the driver's, not a cache hit
  return o;
}

}  // namespace

TEST(KernelCache, ThreadsBuildingDistinctKernelsAllSucceed) {
  Device device(uncached());  // its own Kernels: nothing built yet
  auto& kernels = device.context()->kernels();
  ASSERT_GE(gpu::kEmbeddedShaderCount, 4u);
  const std::size_t before = kernels.size();
  constexpr int kThreads = 2;
  std::latch start(kThreads);
  std::vector<std::vector<std::pair<std::string, VkPipeline>>> built(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      // Thread t builds the kernels t, t + 2, t + 4, ... under their own keys.
      for (std::size_t i = t; i < gpu::kEmbeddedShaderCount && i < 8; i += kThreads) {
        const std::string key = "test/" + std::string(gpu::kEmbeddedShaders[i].first);
        built[t].emplace_back(key, kernels.get_or_build(key, gpu::kEmbeddedShaders[i].second));
      }
    });
  for (auto& th : threads) th.join();
  std::set<VkPipeline> distinct;
  std::size_t count = 0;
  for (auto& per_thread : built)
    for (auto& [key, pipeline] : per_thread) {
      EXPECT_NE(pipeline, VK_NULL_HANDLE) << key;
      EXPECT_EQ(kernels.get_or_build(key, {}), pipeline) << key << " maps to one pipeline";
      distinct.insert(pipeline);
      ++count;
    }
  EXPECT_EQ(distinct.size(), count);
  EXPECT_EQ(kernels.size(), before + count);
}

TEST(KernelCache, ThreadsRacingForOneKeyGetOnePipeline) {
  Device device(uncached());
  auto& kernels = device.context()->kernels();
  const std::size_t before = kernels.size();
  const auto built_before = device.counters().pipelines_created;
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::vector<VkPipeline> got(kThreads, VK_NULL_HANDLE);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      got[t] = kernels.get_or_build("test/race", gpu::kEmbeddedShaders[0].second);
    });
  for (auto& th : threads) th.join();
  for (VkPipeline p : got) EXPECT_EQ(p, got[0]);
  EXPECT_NE(got[0], VK_NULL_HANDLE);
  EXPECT_EQ(kernels.size(), before + 1);
  EXPECT_EQ(device.counters().pipelines_created, built_before + 1)
      << "the key is built once: the threads that missed on it waited for that build";
  EXPECT_EQ(kernels.get_or_build("test/race", {}), got[0]);
}

// A pipeline is built while nothing is submitted (GpuContext::pause_submissions): on the H100,
// every batch that never finished had a kernel built while other threads submitted.
TEST(KernelCache, ABuildWaitsForSubmissionsToPauseAndHoldsThemMeanwhile) {
  if (const char* env = std::getenv("GPUBATCH_BUILD_EXCLUSIVE"); env && std::string(env) == "off")
    GTEST_SKIP() << "GPUBATCH_BUILD_EXCLUSIVE=off";
  Device device(uncached());
  auto context = device.context();
  std::atomic<bool> built{false};
  std::thread builder;
  {
    auto pause = context->pause_submissions();  // as a submission in progress would hold them
    builder = std::thread([&] {
      context->kernels().get_or_build("test/paused", gpu::kEmbeddedShaders[0].second);
      built = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(built.load()) << "the build did not wait for the submission locks";
  }
  builder.join();
  EXPECT_TRUE(built.load());
}

TEST(KernelCache, PausedSubmissionsWaitAndThenRun) {
  Device device(uncached());
  device.run(Request::relu({1.0f}));  // its pipeline is built: only the submission can wait now
  std::atomic<bool> ran{false};
  std::thread caller;
  {
    auto pause = device.context()->pause_submissions();
    caller = std::thread([&] {
      EXPECT_EQ(device.run(Request::relu({-1.0f, 2.0f})).values, (std::vector<float>{0.0f, 2.0f}));
      ran = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(ran.load()) << "a batch was submitted while submissions were paused";
  }
  caller.join();
  EXPECT_TRUE(ran.load());
}
