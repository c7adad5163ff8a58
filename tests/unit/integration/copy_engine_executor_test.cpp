// The copy-engine path and HostBuffers through the executor on the real device: threads submit
// small and large requests at once (futures), every batch takes the copy engine (forced: on
// lavapipe the default keeps the direct path), and every result matches the CPU reference.
#include <gtest/gtest.h>

#include <atomic>
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

TEST(CopyEngineExecutor, ThreadsOfMixedSizesAndHostBuffersMatchTheReference) {
  DeviceOptions options;
  options.copy_engine_bytes = 64 * 1024;  // most batches through the copy engine, small ones not
  Device device(options);
  BatchExecutor executor(device, BatchConfig::preset("adaptive"));
  auto handle = executor.handle();
  gpubatch::testing::ReferenceTally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(200 + t);
      // Each thread's own buffers: one request in flight on them at a time.
      HostBuffer in = device.allocate_host(50000), out = device.allocate_host(50000);
      for (int round = 0; round < 4; ++round) {
        std::vector<Request> requests;
        for (int i = 0; i < 12; ++i) {
          const std::size_t n = i % 4 == 0 ? 100000 + rng() % 50000 : 1 + rng() % 2000;
          requests.push_back(i % 2 ? Request::relu(random_floats(n, rng))
                                   : Request::add(random_floats(n, rng), random_floats(n, rng)));
        }
        const auto x = random_floats(in.size(), rng);
        std::copy(x.begin(), x.end(), in.begin());
        requests.push_back(Request::from_host(Op::tanh, in).deliver_to(out));
        tally.submit_and_check(handle, requests);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(tally.mismatches.load(), 0);
  EXPECT_EQ(tally.errors.load(), 0);
}

// A batch holds eight times the bytes of HostBuffer requests that it holds of copied ones
// (src/executor/batch_former.hpp, kInPlaceShare): with max_batch_bytes at 64 KiB, sixteen relu
// requests of 2,048 floats (16 KiB in and out) from and into HostBuffers go out as one batch,
// where the same requests as vectors take four. Every result matches the CPU reference.
TEST(HostBufferExecutor, BytesInPlaceWeighAnEighthOfMaxBatchBytes) {
  Device device;
  BatchConfig config = BatchConfig::preset("adaptive");
  config.policy = FlushPolicy::deadline;  // flush on count or bytes, or after max_wait
  config.max_batch_size = 16;
  config.max_wait = std::chrono::milliseconds(100);
  config.max_batch_bytes = 64 * 1024;
  std::mt19937 rng(31);
  for (const bool in_place : {true, false}) {
    BatchExecutor executor(device, config);
    auto handle = executor.handle();
    std::vector<HostBuffer> ins, outs;
    std::vector<Request> requests;
    for (int i = 0; i < 16; ++i) {
      const auto x = random_floats(2048, rng);
      if (in_place) {
        ins.push_back(device.allocate_host(x.size()));
        outs.push_back(device.allocate_host(x.size()));
        std::copy(x.begin(), x.end(), ins.back().begin());
        requests.push_back(Request::from_host(Op::relu, ins.back()).deliver_to(outs.back()));
      } else {
        requests.push_back(Request::relu(x));
      }
    }
    std::vector<std::future<Result>> futures;
    for (const Request& r : requests) futures.push_back(handle.submit(Request(r)));
    for (std::size_t i = 0; i < futures.size(); ++i) {
      Result r = futures[i].get();
      if (in_place) r.values.assign(outs[i].begin(), outs[i].end());
      const Request& asked = requests[i];
      const auto bad = reference::check(in_place ? Request::relu(std::vector<float>(ins[i].begin(), ins[i].end())) : asked, r);
      EXPECT_FALSE(bad) << (in_place ? "in place" : "vectors") << " #" << i << ": " << *bad;
    }
    EXPECT_EQ(executor.stats().batches, in_place ? 1u : 4u) << (in_place ? "in place" : "vectors");
  }
}
