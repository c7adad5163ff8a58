// Imported host memory (Device::import_host) through the executor on the real device: threads
// submit requests that read one imported buffer and deliver into another, beside plain requests,
// with futures and with the synchronous run(), on the direct path and with the copy engine forced
// for every batch (on lavapipe the default keeps the direct path). Every result against the CPU
// reference; once the executor has shut down, nothing holds the imports and the memory is freed.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gpubatch/config.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "support/caller_memory.hpp"
#include "support/random_data.hpp"

using namespace gpubatch;

namespace {

class HostImportExecutor : public ::testing::TestWithParam<std::uint64_t> {};

struct Tally {
  std::atomic<int> mismatches{0}, errors{0};
};

// One thread's rounds on its own imported buffers: one request in flight on them at a time.
void rounds(BatchedGpuHandle handle, HostBuffer& in, HostBuffer& out, std::mt19937 rng, Tally& tally) {
  for (int round = 0; round < 4; ++round) {
    const auto x = random_floats(in.size(), rng);
    std::copy(x.begin(), x.end(), in.begin());
    std::vector<Request> requests;
    requests.push_back(Request::from_host(Op::relu, in).deliver_to(out));
    for (int i = 0; i < 6; ++i) {
      const std::size_t m = 1 + rng() % 3000;
      requests.push_back(Request::add(random_floats(m, rng), random_floats(m, rng)));
    }
    std::vector<std::future<Result>> futures;
    for (const auto& r : requests) futures.push_back(handle.submit(r));
    for (std::size_t i = 0; i < requests.size(); ++i) {
      try {
        if (reference::check(requests[i], futures[i].get())) ++tally.mismatches;
      } catch (const std::exception&) {
        ++tally.errors;
      }
    }
    const Request sync = Request::from_host(Op::gelu, in);  // the synchronous path, read in place
    try {
      if (reference::check(sync, handle.run(sync))) ++tally.mismatches;
    } catch (const std::exception&) {
      ++tally.errors;
    }
  }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Paths, HostImportExecutor,
                         ::testing::Values(std::numeric_limits<std::uint64_t>::max(), std::uint64_t{0}),
                         [](const auto& info) { return info.param == 0 ? "CopyEngine" : "Direct"; });

TEST_P(HostImportExecutor, ThreadsReadAndDeliverInPlaceAndLetGoAtShutdown) {
  DeviceOptions options;
  options.copy_engine_bytes = GetParam();
  Device device(options);
  if (device.host_import_alignment() == 0) GTEST_SKIP() << "the device cannot import host memory";
  constexpr int kThreads = 3;
  const std::size_t n = 50000;  // no multiple of the alignment: the buffers are a prefix of it
  std::vector<CallerMemory> ins, outs;  // the caller's memory outlives the executor
  for (int t = 0; t < kThreads; ++t) {
    ins.push_back(caller_memory(device, n));
    outs.push_back(caller_memory(device, n));
  }
  std::vector<std::weak_ptr<detail::HostMemory>> held(2 * kThreads);
  Tally tally;
  {
    BatchExecutor executor(device, BatchConfig::preset("adaptive"));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        HostBuffer in = device.import_host(ins[t].span, n), out = device.import_host(outs[t].span, n);
        held[2 * t] = in.memory();
        held[2 * t + 1] = out.memory();
        rounds(executor.handle(), in, out, std::mt19937(400 + t), tally);
      });
    for (auto& t : threads) t.join();
    executor.shutdown();
    for (std::size_t i = 0; i < held.size(); ++i) EXPECT_TRUE(held[i].expired()) << "import " << i << " still held";
  }
  EXPECT_EQ(tally.mismatches.load(), 0);
  EXPECT_EQ(tally.errors.load(), 0);
  if (GetParam() == 0) EXPECT_GT(device.counters().copy_submissions, 0u) << "the copy engine was forced";
}
