// Chunked requests (src/gpu/chunked_request.*; BatchDevice::submit_split): which requests split,
// ragged and exact chunk counts beyond the slots, every op that splits, the result in the
// request's own buffer, the pool's limit, and faults on the first submit and on a later wait.
// Chunks of 16 KiB (GPUBATCH_SPLIT_CHUNK_BYTES, read when the device opens) keep lavapipe quick.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "gpu/chunked_request.hpp"
#include "gpu/fault_injection.hpp"
#include "gpubatch/batch_device.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"

using namespace gpubatch;
using gpubatch::gpu::Fault;
using gpubatch::gpu::FaultInjector;

namespace {

constexpr std::size_t kChunk = 4096;  // floats

std::unique_ptr<Device> chunking_device(std::uint64_t split_bytes = 0) {
  DeviceOptions options;
  options.split_bytes = split_bytes;
  ::setenv("GPUBATCH_SPLIT_CHUNK_BYTES", std::to_string(kChunk * sizeof(float)).c_str(), 1);
  auto device = std::make_unique<Device>(options);
  ::unsetenv("GPUBATCH_SPLIT_CHUNK_BYTES");
  return device;
}

// Drives a chunked batch to the end as the executor's lane does, and takes its result.
Result finish(detail::InFlightBatch& batch) {
  while (!batch.wait_for(std::chrono::milliseconds(1))) {
  }
  Result out;
  batch.take_result(0, out);
  return out;
}

struct Disarm {
  ~Disarm() { FaultInjector::disarm_all(); }
};

TEST(ChunkedRequest, WhichRequestsSplit) {
  std::mt19937 rng(1);
  EXPECT_TRUE(gpu::splittable(Request::relu(random_floats(10, rng))));
  EXPECT_TRUE(gpu::splittable(Request::clamp(random_floats(10, rng), -1.0f, 1.0f)));
  EXPECT_TRUE(gpu::splittable(chain(random_floats(10, rng)).relu().scale(2.0f)));
  EXPECT_TRUE(gpu::splittable(Request::add(random_floats(10, rng), random_floats(10, rng)))) << "two inputs";
  EXPECT_TRUE(gpu::splittable(Request::lerp(random_floats(10, rng), random_floats(10, rng), 0.25f)));
  EXPECT_TRUE(gpu::splittable(Request::dot(random_floats(10, rng), random_floats(10, rng)))) << "partial sums";
  EXPECT_FALSE(gpu::splittable(chain(random_floats(10, rng)).add(random_floats(10, rng)))) << "an extra input";
  EXPECT_TRUE(gpu::splittable(Request::matmul(random_floats(4, rng), random_floats(4, rng), 2, 2, 2))) << "by rows";
  EXPECT_FALSE(gpu::splittable(Request::matmul(random_floats(2, rng), random_floats(4, rng), 1, 2, 2))) << "one row";
  EXPECT_FALSE(gpu::splittable(Request::gradients(random_states(2, rng))));
  EXPECT_FALSE(gpu::splittable(Request::relu({}))) << "empty";
}

TEST(ChunkedRequest, EveryChunkLandsWhereItBelongs) {
  auto device = chunking_device();
  auto batch_device = device->batch_device();
  ASSERT_EQ(batch_device->split_bytes(), 1u) << "DeviceOptions::split_bytes = 0: every request";
  std::mt19937 rng(2);
  // One chunk, exactly the slots, more chunks than slots (ragged and exact), a tiny tail.
  for (std::size_t n : {kChunk - 5, 3 * kChunk, 9 * kChunk + 17, 11 * kChunk, 6 * kChunk + 1}) {
    std::vector<Request> requests;
    requests.push_back(Request::relu(random_floats(n, rng)));
    requests.push_back(Request::gelu(random_floats(n, rng)));
    requests.push_back(Request::clamp(random_floats(n, rng), -0.5f, 0.75f));
    requests.push_back(chain(random_floats(n, rng)).relu().scale(-3.0f).exp());
    requests.push_back(Request::add(random_floats(n, rng), random_floats(n, rng)));
    requests.push_back(Request::lerp(random_floats(n, rng), random_floats(n, rng), 0.3f));
    requests.push_back(Request::dot(random_floats(n, rng), random_floats(n, rng)));
    for (const Request& r : requests) {
      Request mine = r;
      const float* buffer = mine.a.data();
      auto batch = batch_device->submit_split(mine, detail::inline_runner());
      ASSERT_TRUE(batch) << n;
      EXPECT_TRUE(mine.a.empty()) << "the batch took the input";
      const Result got = finish(*batch);
      EXPECT_EQ(reference::check(r, got), std::nullopt) << to_string(r.op) << " " << n;
      if (r.op != Op::dot) EXPECT_EQ(got.values.data(), buffer) << "the result comes back in the input's buffer";
    }
  }
}

// A matmul by blocks of rows (B whole in each chunk): a result narrower than A (in A's buffer),
// wider (a buffer of its own), as wide, two chunks and more chunks than slots, a ragged last block.
TEST(ChunkedRequest, AMatmulGoesByBlocksOfRows) {
  auto device = chunking_device();
  auto batch_device = device->batch_device();
  std::mt19937 rng(12);
  struct Shape {
    std::uint32_t m, k, n;
  };
  for (Shape sh : {Shape{40, 64, 48}, Shape{1000, 24, 16}, Shape{1000, 16, 24}, Shape{301, 32, 32}, Shape{7, 200, 9}}) {
    const Request r = Request::matmul(random_floats(sh.m * sh.k, rng), random_floats(sh.k * sh.n, rng), sh.m, sh.k, sh.n);
    Request mine = r;
    const float* buffer = mine.a.data();
    auto batch = batch_device->submit_split(mine, detail::inline_runner());
    ASSERT_TRUE(batch) << sh.m << "x" << sh.k << "x" << sh.n;
    const Result got = finish(*batch);
    EXPECT_EQ(reference::check(r, got), std::nullopt) << sh.m << "x" << sh.k << "x" << sh.n;
    if (sh.n <= sh.k) EXPECT_EQ(got.values.data(), buffer) << "a result no wider than A lands in A's buffer";
  }
  // B larger than a buffer, or one row: not split, and the request stays as it was.
  for (Shape sh : {Shape{8, 80, 80}, Shape{1, 64, 64}}) {
    const Request r = Request::matmul(random_floats(sh.m * sh.k, rng), random_floats(sh.k * sh.n, rng), sh.m, sh.k, sh.n);
    Request mine = r;
    EXPECT_EQ(batch_device->submit_split(mine, detail::inline_runner()), nullptr) << sh.m << "x" << sh.k;
    EXPECT_EQ(mine.a, r.a);
    EXPECT_EQ(mine.b, r.b);
  }
}

TEST(ChunkedRequest, OthersAreNotSplitAndStayAsTheyWere) {
  auto device = chunking_device(64 * 1024);
  auto batch_device = device->batch_device();
  std::mt19937 rng(3);
  Request small = Request::relu(random_floats(1000, rng));  // below the line
  Request matmul = Request::matmul(random_floats(100 * 100, rng), random_floats(100 * 100, rng), 100, 100, 100);
  HostBuffer in = device->allocate_host(20000);
  Request host = Request::from_host(Op::relu, in);
  Request host_b = Request::add(random_floats(20000, rng), {});
  host_b.host_b = in.memory();
  for (Request* r : {&small, &matmul, &host, &host_b}) {
    const Request before = *r;
    EXPECT_EQ(batch_device->submit_split(*r, detail::inline_runner()), nullptr);
    EXPECT_EQ(r->a, before.a);
    EXPECT_EQ(r->b, before.b);
  }
}

TEST(ChunkedRequest, AllSetsOutThenTheCallerIsNotSplit) {
  auto device = chunking_device();
  auto batch_device = device->batch_device();
  std::mt19937 rng(4);
  constexpr std::size_t kSets = gpu::ChunkPool::kMaxSets;
  std::vector<Request> originals, mine;
  for (std::size_t i = 0; i <= kSets; ++i) originals.push_back(Request::relu(random_floats(3 * kChunk, rng)));
  mine = originals;
  std::vector<std::unique_ptr<detail::InFlightBatch>> batches;
  for (std::size_t i = 0; i < kSets; ++i) {
    batches.push_back(batch_device->submit_split(mine[i], detail::inline_runner()));
    ASSERT_TRUE(batches.back()) << i;
  }
  EXPECT_EQ(batch_device->submit_split(mine[kSets], detail::inline_runner()), nullptr) << "every set is out";
  EXPECT_EQ(mine[kSets].a, originals[kSets].a);
  EXPECT_EQ(reference::check(originals[1], finish(*batches[1])), std::nullopt);
  batches[1].reset();  // its set goes back
  auto last = batch_device->submit_split(mine[kSets], detail::inline_runner());
  ASSERT_TRUE(last);
  EXPECT_EQ(reference::check(originals[kSets], finish(*last)), std::nullopt);
  for (std::size_t i : {std::size_t{0}, std::size_t{2}, std::size_t{3}})
    if (i < kSets) EXPECT_EQ(reference::check(originals[i], finish(*batches[i])), std::nullopt) << i;
}

TEST(ChunkedRequest, ChunksAreHalfTheInputWithinTheirBounds) {
  const std::size_t max = std::size_t{1} << 20;  // 4 MiB of floats
  EXPECT_EQ(gpu::chunk_floats_for(1048576, max), 524288u) << "two chunks";
  EXPECT_EQ(gpu::chunk_floats_for(4194304, max), max) << "at most the buffers' size";
  EXPECT_EQ(gpu::chunk_floats_for(300000, max), gpu::kMinChunkFloats) << "at least 1 MiB";
  EXPECT_EQ(gpu::chunk_floats_for(1048577, max) % 16, 0u) << "whole cache lines";
  EXPECT_GE(2 * gpu::chunk_floats_for(1048577, max), 1048577u);
  EXPECT_EQ(gpu::chunk_floats_for(100000, 4096), 4096u) << "a smaller buffer than the least chunk";
  EXPECT_EQ(gpu::matmul_chunk_rows(1024, 1024, 1024, max), 512u) << "half of M";
  EXPECT_EQ(gpu::matmul_chunk_rows(4096, 512, 1024, max), 1024u) << "as many rows as a buffer holds";
  EXPECT_EQ(gpu::matmul_chunk_rows(1, 16, 16, max), 0u) << "one row";
  EXPECT_EQ(gpu::matmul_chunk_rows(4096, 2048, 1024, max), 0u) << "B larger than a buffer";
}

TEST(ChunkedRequest, AFailedFirstSubmitLeavesTheRequestAndALaterLossFailsIt) {
  Disarm disarm;
  auto device = chunking_device();
  auto batch_device = device->batch_device();
  std::mt19937 rng(5);
  const Request r = Request::add(random_floats(7 * kChunk + 3, rng), random_floats(7 * kChunk + 3, rng));
  Request mine = r;
  FaultInjector::arm(Fault::submit_device_lost);
  try {
    batch_device->submit_split(mine, detail::inline_runner());
    ADD_FAILURE() << "the first chunk's submit was to fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
  }
  EXPECT_EQ(mine.a, r.a) << "the request has its inputs back";
  EXPECT_EQ(mine.b, r.b);
  batch_device->recover();
  // A later chunk's wait reports the loss; the request fails with it, and the device serves the
  // next one after recovery (the pool lets go of the lost device's buffers).
  auto batch = batch_device->submit_split(mine, detail::inline_runner());
  ASSERT_TRUE(batch);
  FaultInjector::arm(Fault::wait_device_lost);
  try {
    finish(*batch);
    ADD_FAILURE() << "a wait was to fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
  }
  batch.reset();
  FaultInjector::disarm_all();
  FaultInjector::arm(Fault::device_lost_check);  // re-created: a new context, new pinned buffers
  batch_device->recover();
  Request again = r;
  auto next = batch_device->submit_split(again, detail::inline_runner());
  ASSERT_TRUE(next);
  EXPECT_EQ(reference::check(r, finish(*next)), std::nullopt);
}

}  // namespace
