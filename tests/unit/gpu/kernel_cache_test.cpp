// The kernel cache (gpu::Kernels) builds pipelines outside its lock: threads building different
// kernels at once all succeed, and threads racing to build one kernel end up with one pipeline.
#include <gtest/gtest.h>

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
  EXPECT_EQ(kernels.size(), before + 1) << "the losers' pipelines are not kept";
  EXPECT_EQ(kernels.get_or_build("test/race", {}), got[0]);
}
