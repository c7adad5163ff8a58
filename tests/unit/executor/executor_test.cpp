// BatchExecutor on a fake device: flush rules, validation, overflow, deadlines, faults, shutdown.
// Assertions are on counts and reasons; time bounds are lower bounds or generous upper bounds,
// so a loaded 2-core machine does not make them flaky.
#include "gpubatch/executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <sched.h>

#include <unistd.h>

#include "config_test_util.hpp"
#include "executor/thread_slice.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "hold_strand.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The deadline policy (balanced's base): these tests count flushes by size and max_wait.
BatchConfig small_config(std::size_t batch, std::chrono::microseconds wait) {
  BatchConfig c = BatchConfig::balanced();
  c.max_batch_size = batch;
  c.max_wait = wait;
  c.queue_capacity = 1024;
  c.max_inflight_batches = 2;
  return c;
}

std::size_t sum(const std::vector<std::size_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::size_t{0});
}

TEST(BatchExecutor, FlushesWhenTheBatchIsFull) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(8, 60s));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  std::vector<std::vector<float>> inputs;
  for (int i = 0; i < 32; ++i) {
    inputs.push_back({static_cast<float>(i), -1.0f, 2.5f});
    futures.push_back(gpu.relu(inputs.back()));
  }
  for (std::size_t i = 0; i < futures.size(); ++i) {
    ASSERT_TRUE(ready_within(futures[i], 30s));
    const auto v = futures[i].get();
    EXPECT_EQ(v, (std::vector<float>{inputs[i][0], 0.0f, 2.5f}));
  }
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{8, 8, 8, 8}));
  const Stats s = executor.stats();
  EXPECT_EQ(s.flushes.size, 4u);
  EXPECT_EQ(s.flushes.deadline, 0u);
  EXPECT_EQ(s.batches, 4u);
  EXPECT_EQ(s.submitted, 32u);
  EXPECT_EQ(s.completed, 32u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_DOUBLE_EQ(s.mean_batch_size, 8.0);
  EXPECT_DOUBLE_EQ(s.mean_fill, 1.0);
}

TEST(BatchExecutor, FlushesWhenTheOldestRequestHasWaitedMaxWait) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(1000, 30ms));
  auto gpu = executor.handle();
  const auto t0 = Clock::now();
  std::vector<std::future<float>> futures;
  for (int i = 0; i < 5; ++i) futures.push_back(gpu.dot({1.0f, 2.0f}, {3.0f, static_cast<float>(i)}));
  for (auto& f : futures) ASSERT_TRUE(ready_within(f, 30s));
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, 30ms);  // not flushed before max_wait
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(futures[i].get(), 3.0f + 2.0f * i);
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{5}));
  const Stats s = executor.stats();
  EXPECT_EQ(s.flushes.deadline, 1u);
  EXPECT_EQ(s.flushes.size, 0u);
  EXPECT_GE(s.queue_wait.max, 25ms);
}

// A steady trickle (one request every 0.2 ms) must not postpone the flush: max_wait counts from
// the oldest request's arrival, so batches leave every ~max_wait while the trickle goes on.
TEST(BatchExecutor, SteadyTrickleDoesNotPostponeTheOldestRequest) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(100000, 5ms));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  const auto t0 = Clock::now();
  std::optional<Clock::duration> first_ready;
  while (Clock::now() - t0 < 400ms) {
    futures.push_back(gpu.relu({1.0f}));
    if (!first_ready && ready(futures.front())) first_ready = Clock::now() - t0;
    std::this_thread::sleep_for(200us);
  }
  ASSERT_TRUE(first_ready.has_value()) << "the first request was still waiting when the trickle "
                                          "ended: the trickle postponed the flush";
  EXPECT_GE(*first_ready, 5ms);
  const auto batches_during_trickle = device->batches();
  EXPECT_GE(batches_during_trickle, 2u);
  for (auto& f : futures) ASSERT_TRUE(ready_within(f, 30s));
  const Stats s = executor.stats();
  EXPECT_EQ(s.flushes.size, 0u);
  EXPECT_EQ(s.flushes.deadline, s.batches);
  EXPECT_EQ(s.completed, futures.size());
}

TEST(BatchExecutor, RaggedSizesAndMixedOpsShareOneFlush) {
  auto device = std::make_shared<FakeDevice>();
  std::mt19937 rng(7);
  std::vector<Request> requests = {
      Request::relu(random_floats(1, rng)),
      Request::relu(random_floats(1000, rng)),
      Request::scale(random_floats(33, rng), -2.0f),
      Request::add(random_floats(17, rng), random_floats(17, rng)),
      Request::sub(random_floats(5, rng), random_floats(5, rng)),
      Request::mul(random_floats(300, rng), random_floats(300, rng)),
      Request::sigmoid(random_floats(9, rng)),
      Request::tanh(random_floats(64, rng)),
      Request::swish(random_floats(2, rng)),
      Request::gelu(random_floats(129, rng)),
      Request::dot(random_floats(513, rng), random_floats(513, rng)),
      Request::matmul(random_floats(3 * 4, rng), random_floats(4 * 5, rng), 3, 4, 5),
      Request::lerp(random_floats(11, rng), random_floats(11, rng), 0.75f),
      Request::gradients(random_states(3, rng)),
      Request::interpolate(random_states(2, rng), random_states(2, rng), 0.5f,
                           InterpolationMode::slerp),
  };
  for (Op op : elementwise_ops()) requests.push_back(sample_request(op, 7, rng));  // every one of the table
  BatchExecutor executor(device, small_config(requests.size(), 60s));
  auto gpu = executor.handle();
  std::vector<std::future<Result>> futures;
  for (const auto& r : requests) futures.push_back(gpu.submit(r));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(ready_within(futures[i], 30s));
    expect_matches_reference(requests[i], futures[i].get());
  }
  ASSERT_EQ(device->batch_sizes(), (std::vector<std::size_t>{requests.size()}));
  const auto ops = device->batch_ops().at(0);
  EXPECT_EQ(std::set<Op>(ops.begin(), ops.end()).size(), kBuiltinOpCount);
  EXPECT_EQ(executor.stats().flushes.size, 1u);
}

TEST(BatchExecutor, TypedCallsReturnTheRightShapes) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = small_config(64, 1ms);
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::mt19937 rng(3);
  auto a = random_floats(12, rng), b = random_floats(12, rng);
  auto check = [](const Request& r, auto&& value) {
    Result res;
    using V = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<V, float>) res.values = {value};
    else if constexpr (std::is_same_v<V, std::vector<float>>) res.values = value;
    else res.states = value;
    expect_matches_reference(r, res);
  };
  check(Request::relu(a), gpu.relu(a).get());
  check(Request::sigmoid(a), gpu.sigmoid(a).get());
  check(Request::tanh(a), gpu.tanh(a).get());
  check(Request::swish(a), gpu.swish(a).get());
  check(Request::gelu(a), gpu.gelu(a).get());
  check(Request::scale(a, 3.0f), gpu.scale(a, 3.0f).get());
  check(Request::add(a, b), gpu.add(a, b).get());
  check(Request::sub(a, b), gpu.sub(a, b).get());
  check(Request::mul(a, b), gpu.mul(a, b).get());
  check(Request::dot(a, b), gpu.dot(a, b).get());
  check(Request::lerp(a, b, 0.3f), gpu.lerp(a, b, 0.3f).get());
  check(Request::matmul(a, b, 3, 4, 3), gpu.matmul(a, b, 3, 4, 3).get());
  auto s1 = random_states(2, rng), s2 = random_states(2, rng);
  check(Request::gradients(s1), gpu.compute_gradients(s1).get());
  check(Request::interpolate(s1, s2, 0.25f, InterpolationMode::lerp),
        gpu.interpolate(s1, s2, 0.25f, InterpolationMode::lerp).get());
}

TEST(BatchExecutor, SixteenThreadsEveryResultVerified) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 200us});
  BatchConfig config = small_config(64, 1ms);
  config.queue_capacity = 256;
  BatchExecutor executor(device, config);
  constexpr int kThreads = 16;
  constexpr int kPerThread = 400;
  std::atomic<int> verified{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, gpu = executor.handle()] {
      std::mt19937 rng(1000 + t);
      std::vector<Request> requests;
      std::vector<std::future<Result>> futures;
      for (int i = 0; i < kPerThread; ++i) {
        requests.push_back(random_request(rng));
        futures.push_back(gpu.submit(requests.back()));
      }
      for (int i = 0; i < kPerThread; ++i) {
        const Result r = futures[i].get();
        const auto problem = reference::check(requests[i], r);
        EXPECT_FALSE(problem) << *problem;
        if (!problem) ++verified;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(verified.load(), kThreads * kPerThread);
  EXPECT_EQ(sum(device->batch_sizes()), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_LE(device->max_inflight(), config.max_inflight_batches);
  const Stats s = executor.stats();
  EXPECT_EQ(s.submitted, static_cast<std::uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(s.completed, s.submitted);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(s.flushes.total(), s.batches);
  EXPECT_EQ(s.end_to_end.count, s.completed);
  EXPECT_EQ(s.device_time.count, s.batches);
  EXPECT_EQ(s.transfers.uploads, s.batches);
}

TEST(BatchExecutor, NeverMoreThanMaxInflightBatches) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 3ms});
  BatchConfig config = small_config(4, 100us);
  config.max_inflight_batches = 2;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 200; ++i) futures.push_back(gpu.relu({1.0f, 2.0f}));
  for (auto& f : futures) ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_LE(device->max_inflight(), 2u);
  EXPECT_GE(device->max_inflight(), 1u);
  // While both slots were busy the strand kept collecting, so batches filled up.
  EXPECT_EQ(sum(device->batch_sizes()), 200u);
}

// Batches of at least 4 MiB (large requests: they pipeline) take half a slot each: twice as many
// are in flight; smaller ones keep max_inflight_batches.
TEST(BatchExecutor, LargeBatchesTakeHalfASlot) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = BatchConfig::adaptive();
  config.max_inflight_batches = 1;
  config.max_batch_bytes = std::size_t{4} << 20;  // one 2 MiB-in, 2 MiB-out request per batch
  config.direct_bytes = 0;  // batched: the direct lane would run them on this thread, one by one
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->pause();
  std::vector<std::future<std::vector<float>>> large;
  for (int i = 0; i < 4; ++i) large.push_back(gpu.relu(std::vector<float>(512 * 1024, float(i))));
  ASSERT_TRUE(device->wait_for_inflight(2, 30s));
  std::this_thread::sleep_for(50ms);  // a third would be submitted by now if the slots allowed it
  EXPECT_EQ(device->max_inflight(), 2u) << "two 4 MiB batches on one slot";
  device->resume();
  for (auto& f : large) ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_EQ(large[3].get(), std::vector<float>(512 * 1024, 3.0f));

  auto small_device = std::make_shared<FakeDevice>();
  BatchExecutor small_executor(small_device, config);
  auto small = small_executor.handle();
  small_device->pause();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 4; ++i) futures.push_back(small.relu({float(i)}));
  ASSERT_TRUE(small_device->wait_for_inflight(1, 30s));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(small_device->max_inflight(), 1u) << "small batches: one slot, one batch";
  small_device->resume();
  for (auto& f : futures) ASSERT_TRUE(ready_within(f, 30s));
}

// The most batches of 4 MiB (2 MiB in, 2 MiB out) that one in-flight slot held at once, with the
// device paused and four such requests asked: it waits for `expect` of them in flight, then 50 ms
// more for any beyond (a fixed 50 ms alone was too short for the second batch's copy under TSan
// on CI's loaded 2-core machine, 2026-12-07).
std::size_t large_batches_on_one_slot(bool host_cpu, std::size_t expect) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.host_cpu = host_cpu});
  BatchConfig config = BatchConfig::adaptive();
  config.max_inflight_batches = 1;
  config.max_batch_bytes = std::size_t{4} << 20;
  config.direct_bytes = 0;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->pause();
  std::vector<std::future<std::vector<float>>> large;
  for (int i = 0; i < 4; ++i) large.push_back(gpu.relu(std::vector<float>(512 * 1024, float(i))));
  EXPECT_TRUE(device->wait_for_inflight(expect, 30s));
  std::this_thread::sleep_for(50ms);  // one more would be submitted by now if the slot allowed it
  const std::size_t seen = device->max_inflight();
  device->resume();
  for (auto& f : large) EXPECT_TRUE(ready_within(f, 30s));
  EXPECT_EQ(large[3].get(), std::vector<float>(512 * 1024, 3.0f));
  return seen;
}

// On a device of host cores a large batch takes a whole slot (executor_core.hpp, slot_halves):
// nothing overlaps there, and more large batches in flight only spread their copies over more
// memory. GPUBATCH_HOST_LARGE_SLOT=half keeps the half slot there.
TEST(BatchExecutor, OnHostCoresLargeBatchesTakeAWholeSlot) {
  EXPECT_EQ(large_batches_on_one_slot(true, 1), 1u) << "host cores: one batch per slot";
  EXPECT_EQ(large_batches_on_one_slot(false, 2), 2u) << "a GPU: half a slot each";
  EnvGuard half("GPUBATCH_HOST_LARGE_SLOT", "half");
  EXPECT_EQ(large_batches_on_one_slot(true, 2), 2u) << "half: as on a GPU";
}

// Strand runs that completion threads ran themselves: a burst of 2,000 requests through one slot
// of a device that takes 200 us a batch, so that the strand waits for the slot batch after batch.
std::uint64_t strand_runs_on_completion(bool host_cpu) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 200us, .host_cpu = host_cpu});
  BatchConfig config = BatchConfig::adaptive();
  config.max_inflight_batches = 1;
  config.max_batch_size = 64;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 2000; ++i) futures.push_back(gpu.relu({float(i % 7) - 3.0f}));
  for (int i = 0; i < 2000; ++i) {
    EXPECT_TRUE(ready_within(futures[i], 30s));
    EXPECT_EQ(futures[i].get(), std::vector<float>{std::max(0.0f, float(i % 7) - 3.0f)});
  }
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, 2000u);
  EXPECT_LE(s.strand_done_runs, s.strand_runs);
  EXPECT_NE(to_prometheus(s).find("gpubatch_strand_done_runs_total "), std::string::npos);
  return s.strand_done_runs;
}

// On a device of host cores the completion thread that frees the slot the strand waits for runs
// the strand's pass itself instead of waking the strand's thread (executor_core.hpp,
// done_runs_strand_); a GPU's posts it, and so do host cores with GPUBATCH_HOST_DONE_STRAND=off.
TEST(BatchExecutor, OnHostCoresACompletionThreadRunsTheStrandItFreedASlotFor) {
  EXPECT_GT(strand_runs_on_completion(true), 0u) << "host cores";
  EXPECT_EQ(strand_runs_on_completion(false), 0u) << "a GPU";
  EnvGuard off("GPUBATCH_HOST_DONE_STRAND", "off");
  EXPECT_EQ(strand_runs_on_completion(true), 0u) << "off";
}

TEST(BatchExecutor, AdaptiveFlushesWhenASlotIsFreeAndCollectsWhileBusy) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 300ms});
  BatchConfig config = BatchConfig::adaptive();
  config.max_wait = 60s;  // flushes here come from free slots, never from max_wait
  config.max_inflight_batches = 1;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1, 30s));  // flushed alone at once: the GPU was idle
  std::vector<std::future<std::vector<float>>> more;
  for (int i = 0; i < 10; ++i) more.push_back(gpu.relu({static_cast<float>(i)}));
  ASSERT_TRUE(ready_within(first, 30s));
  for (auto& f : more) ASSERT_TRUE(ready_within(f, 30s));
  const auto sizes = device->batch_sizes();
  EXPECT_EQ(sizes.front(), 1u);
  EXPECT_EQ(sum(sizes), 11u);
  EXPECT_GT(*std::max_element(sizes.begin(), sizes.end()), 1u);  // collected while busy
  const Stats s = executor.stats();
  EXPECT_EQ(s.flushes.deadline, 0u);
  EXPECT_EQ(s.flushes.idle, s.batches);
}

TEST(BatchExecutor, MaxWaitZeroFlushesGreedily) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(16, 0us));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 50; ++i) futures.push_back(gpu.relu({1.0f}));
  for (auto& f : futures) ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_EQ(sum(device->batch_sizes()), 50u);
}

TEST(BatchExecutor, RespectsMaxBatchBytes) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = small_config(100, 60s);
  const std::size_t one = 2 * 256 * sizeof(float);  // relu of 256 floats: in + out
  config.max_batch_bytes = 3 * one;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 9; ++i) futures.push_back(gpu.relu(std::vector<float>(256, 1.0f)));
  // A request larger than max_batch_bytes still runs, alone.
  auto big = gpu.relu(std::vector<float>(4096, 1.0f));
  executor.shutdown();  // flushes what is left
  for (auto& f : futures) EXPECT_EQ(f.get().size(), 256u);
  EXPECT_EQ(big.get().size(), 4096u);
  const auto sizes = device->batch_sizes();
  EXPECT_EQ(sizes, (std::vector<std::size_t>{3, 3, 3, 1}));
  EXPECT_EQ(executor.stats().flushes.size, 3u);
}

TEST(BatchExecutor, BadRequestsFailAloneAndNeverReachTheDevice) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.max_request_bytes = 4096});
  BatchExecutor executor(device, small_config(4, 60s));
  auto gpu = executor.handle();
  auto good1 = gpu.add({1.0f, 2.0f}, {3.0f, 4.0f});
  auto mismatched = gpu.add({1.0f, 2.0f}, {3.0f});
  auto good2 = gpu.relu({-1.0f});
  auto empty = gpu.relu({});
  auto too_large = gpu.relu(std::vector<float>(4096, 1.0f));
  auto bad_matmul = gpu.matmul({1.0f, 2.0f}, {1.0f}, 2, 2, 2);
  auto bad_t = gpu.interpolate(std::vector<std::uint8_t>(16), std::vector<std::uint8_t>(16), 2.0f,
                               InterpolationMode::lerp);
  auto good3 = gpu.dot({2.0f}, {4.0f});
  auto good4 = gpu.scale({2.0f}, 0.5f);
  // The bad ones resolved at once, inside the call.
  for (auto* f : {&mismatched, &empty, &too_large, &bad_matmul})
    ASSERT_TRUE(ready(*f));
  ASSERT_TRUE(ready(bad_t));
  EXPECT_EQ(error_code(mismatched), ErrorCode::invalid_argument);
  EXPECT_EQ(error_code(empty), ErrorCode::invalid_argument);
  EXPECT_EQ(error_code(too_large), ErrorCode::request_too_large);
  EXPECT_EQ(error_code(bad_matmul), ErrorCode::invalid_argument);
  EXPECT_EQ(error_code(bad_t), ErrorCode::invalid_argument);
  EXPECT_EQ(good1.get(), (std::vector<float>{4.0f, 6.0f}));
  EXPECT_EQ(good2.get(), (std::vector<float>{0.0f}));
  EXPECT_FLOAT_EQ(good3.get(), 8.0f);
  EXPECT_EQ(good4.get(), (std::vector<float>{1.0f}));
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{4}));
  const Stats s = executor.stats();
  EXPECT_EQ(s.rejected, 5u);
  EXPECT_EQ(s.completed, 4u);
}

TEST(BatchExecutor, ARequestThatFailsOnTheDeviceFailsAlone) {
  auto device = std::make_shared<FakeDevice>();
  device->fail_results_with_marker(-777.0f);
  BatchExecutor executor(device, small_config(4, 60s));
  auto gpu = executor.handle();
  auto a = gpu.relu({1.0f});
  auto bad = gpu.relu({-777.0f});
  auto b = gpu.relu({2.0f});
  auto c = gpu.relu({3.0f});
  EXPECT_EQ(a.get(), (std::vector<float>{1.0f}));
  EXPECT_EQ(error_code(bad), ErrorCode::internal);
  EXPECT_EQ(b.get(), (std::vector<float>{2.0f}));
  EXPECT_EQ(c.get(), (std::vector<float>{3.0f}));
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{4}));
}

TEST(BatchExecutor, ALargeBatchIsResolvedInChunksByEveryCompletionThread) {
  // 1000 requests in one batch, 4 completion threads: the batch is cut into 4 chunks (at least
  // 64 requests each). Every request resolves once, with its own value or its own error.
  auto device = std::make_shared<FakeDevice>();
  device->fail_results_with_marker(-777.0f);
  BatchConfig config = small_config(1000, 60s);
  config.completion_threads = 4;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 1000; ++i)
    futures.push_back(gpu.relu({i % 97 == 0 ? -777.0f : static_cast<float>(i), -1.0f}));
  for (int i = 0; i < 1000; ++i) {
    if (i % 97 == 0) {
      EXPECT_EQ(error_code(futures[i]), ErrorCode::internal) << i;
    } else {
      EXPECT_EQ(futures[i].get(), (std::vector<float>{static_cast<float>(i), 0.0f})) << i;
    }
  }
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{1000}));
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, 1000u - 11u);
  EXPECT_EQ(s.device_errors, 11u);
  EXPECT_EQ(s.end_to_end.count, 1000u) << "every chunk records its requests";
}

TEST(BatchExecutor, IdleCompletionThreadsHelpTakeALargeResult) {
  // A lone request's result is taken by one thread; the device may spread its copy over the
  // runner it is given (VulkanInFlight: a large result out of readback). Here each take runs 4
  // parts of 20 ms: the other completion threads, idle, take some of them.
  FakeDevice::Options options;
  options.result_parts = 4;
  options.result_part_sleep = 20ms;
  auto device = std::make_shared<FakeDevice>(options);
  BatchConfig config = BatchConfig::adaptive();
  config.completion_threads = 4;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(gpu.relu({static_cast<float>(i), -1.0f}).get(), (std::vector<float>{static_cast<float>(i), 0.0f}));
  EXPECT_EQ(gpu.run(Request::relu({-2.0f, 5.0f})).values, (std::vector<float>{0.0f, 5.0f})) << "a caller taking its own result";
  const auto widths = device->result_widths(), threads = device->result_threads();
  ASSERT_EQ(widths.size(), 5u);
  for (std::size_t w : widths) EXPECT_EQ(w, 5u) << "the completion threads and the taking thread";
  EXPECT_GT(*std::max_element(threads.begin(), threads.end()), 1u) << "parts ran on more than one thread";
}

TEST(BatchExecutor, ALargeBatchThatFailsAsAWholeFailsInEveryChunk) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = small_config(512, 60s);
  config.completion_threads = 3;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->fail_next_wait(ErrorCode::device_lost);
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 512; ++i) futures.push_back(gpu.relu({static_cast<float>(i)}));
  for (auto& f : futures) {
    const auto message = error_message(f);
    EXPECT_NE(message.find("device_lost"), std::string::npos) << message;
    EXPECT_NE(message.find("in batch"), std::string::npos) << message;
  }
  EXPECT_EQ(executor.stats().device_errors, 512u);
  // The executor goes on: the next batch works.
  auto next = gpu.relu({-1.0f, 5.0f});
  for (int i = 0; i < 511; ++i) gpu.relu({1.0f});
  EXPECT_EQ(next.get(), (std::vector<float>{0.0f, 5.0f}));
}

TEST(BatchExecutor, DeviceFaultOnSubmitFailsThatBatchOnly) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(4, 60s));
  auto gpu = executor.handle();
  device->fail_next_submit(ErrorCode::device_lost);
  std::vector<std::future<std::vector<float>>> first, second;
  for (int i = 0; i < 4; ++i) first.push_back(gpu.relu({static_cast<float>(i)}));
  for (auto& f : first) ASSERT_TRUE(ready_within(f, 30s));
  for (int i = 0; i < 4; ++i) second.push_back(gpu.relu({static_cast<float>(i)}));
  for (auto& f : first) {
    const auto message = error_message(f);
    EXPECT_NE(message.find("device_lost"), std::string::npos) << message;
    EXPECT_NE(message.find("relu request"), std::string::npos) << message;
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(second[i].get(), (std::vector<float>{static_cast<float>(i)}));
  EXPECT_EQ(device->submit_faults(), 1);
  const Stats s = executor.stats();
  EXPECT_EQ(s.device_errors, 4u);
  EXPECT_EQ(s.failed, 4u);
  EXPECT_EQ(s.completed, 4u);
}

TEST(BatchExecutor, DeviceFaultOnWaitFailsThatBatchOnly) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(4, 60s));
  auto gpu = executor.handle();
  device->fail_next_wait(ErrorCode::device_lost);
  std::vector<std::future<float>> first, second;
  for (int i = 0; i < 4; ++i) first.push_back(gpu.dot({1.0f}, {static_cast<float>(i)}));
  for (auto& f : first) EXPECT_EQ(error_code(f), ErrorCode::device_lost);
  for (int i = 0; i < 4; ++i) second.push_back(gpu.dot({1.0f}, {static_cast<float>(i)}));
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(second[i].get(), static_cast<float>(i));
  EXPECT_EQ(executor.stats().device_errors, 4u);
}

TEST(BatchExecutor, ABatchThatNeverCompletesFailsWithDeviceLost) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = small_config(2, 60s);
  config.batch_timeout = 1s;  // also the bound of c and d's batch: not so short that a thread under a sanitizer outlasts it
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->pause();
  const auto t0 = Clock::now();
  auto a = gpu.relu({1.0f});
  auto b = gpu.relu({2.0f});
  EXPECT_EQ(error_code(a), ErrorCode::device_lost);
  EXPECT_EQ(error_code(b), ErrorCode::device_lost);
  EXPECT_GE(Clock::now() - t0, 1s);
  device->resume();
  auto c = gpu.relu({3.0f});
  auto d = gpu.relu({4.0f});
  EXPECT_EQ(c.get(), (std::vector<float>{3.0f}));
  EXPECT_EQ(d.get(), (std::vector<float>{4.0f}));
}

// ---- overflow policies: a paused device and one in-flight slot fill the queue ----

struct Jammed {
  std::shared_ptr<FakeDevice> device = std::make_shared<FakeDevice>();
  std::unique_ptr<BatchExecutor> executor;
  BatchedGpuHandle gpu;
  std::vector<std::future<std::vector<float>>> futures;

  // Batches of 2, one slot, a queue of 4: the paused device holds 1 batch, the strand holds 2
  // more requests, the queue 4: at most 2 + 2 + 4 = 8 requests are accepted.
  explicit Jammed(OverflowPolicy policy, std::chrono::microseconds block_timeout = 50ms,
                  std::chrono::microseconds block_slice = BatchConfig{}.block_slice) {
    BatchConfig c = small_config(2, 1ms);
    c.block_slice = block_slice;
    c.queue_capacity = 4;
    c.max_inflight_batches = 1;
    c.overflow = policy;
    c.block_timeout = block_timeout;
    executor = std::make_unique<BatchExecutor>(device, c);
    gpu = executor->handle();
    device->pause();
    futures.push_back(gpu.relu({0.0f}));
    futures.push_back(gpu.relu({1.0f}));
    EXPECT_TRUE(device->wait_for_batches(1));
  }
};

TEST(BatchExecutor, OverflowRejectFailsAtOnceWithQueueFull) {
  Jammed j(OverflowPolicy::reject);
  int accepted = 2, rejected = 0;
  for (int i = 2; i < 40; ++i) {
    const auto t0 = Clock::now();
    auto f = j.gpu.relu({static_cast<float>(i)});
    if (ready(f)) {
      EXPECT_LT(Clock::now() - t0, 5s);
      EXPECT_EQ(error_code(f), ErrorCode::queue_full);
      ++rejected;
    } else {
      j.futures.push_back(std::move(f));
      ++accepted;
    }
  }
  EXPECT_GE(accepted, 2 + 4);
  EXPECT_LE(accepted, 2 + 2 + 4);
  EXPECT_EQ(accepted + rejected, 40);
  EXPECT_EQ(j.executor->stats().rejected, static_cast<std::uint64_t>(rejected));
  j.device->resume();
  for (auto& f : j.futures) EXPECT_EQ(f.get().size(), 1u);
}

TEST(BatchExecutor, OverflowBlockForGivesQueueFullAfterTheTimeout) {
  Jammed j(OverflowPolicy::block_for, 50ms);
  int accepted = 2;
  std::optional<std::future<std::vector<float>>> refused;
  Clock::duration refused_after{};
  for (int i = 2; i < 20 && !refused; ++i) {
    const auto t0 = Clock::now();
    auto f = j.gpu.relu({static_cast<float>(i)});
    if (ready(f)) {
      refused_after = Clock::now() - t0;
      refused = std::move(f);
    } else {
      j.futures.push_back(std::move(f));
      ++accepted;
    }
  }
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(error_code(*refused), ErrorCode::queue_full);
  EXPECT_GE(refused_after, 50ms);
  EXPECT_GE(accepted, 2 + 4);
  EXPECT_LE(accepted, 2 + 2 + 4);
  j.device->resume();
  for (auto& f : j.futures) EXPECT_EQ(f.get().size(), 1u);
}

// block_slice_us reaches the caller's thread: while block_for waits for room it has that slice
// (Linux 6.12+; elsewhere only the restore is checked), and after the call the one it had.
TEST(BatchExecutor, OverflowBlockForWaitsWithTheConfiguredSlice) {
  detail::SliceOutcome probe{};
  std::thread([&] { probe = detail::request_thread_slice(300us); }).join();
  Jammed j(OverflowPolicy::block_for, 20s, 250us);
  for (int i = 2; i < 6; ++i) j.futures.push_back(j.gpu.relu({static_cast<float>(i)}));  // the queue's 4
  std::atomic<pid_t> tid{0};
  std::atomic<long long> before{-2};
  long long after = -3;
  std::vector<std::future<std::vector<float>>> blocked;
  std::thread caller([&] {
    before = detail::thread_slice_ns();
    tid = ::gettid();
    for (int i = 6; i < 9; ++i) blocked.push_back(j.gpu.relu({static_cast<float>(i)}));  // one of these waits
    after = detail::thread_slice_ns();
  });
  while (tid.load() == 0) std::this_thread::yield();
  const long long want = probe == detail::SliceOutcome::applied ? 250'000 : before.load();
  EXPECT_TRUE(eventually([&] { return detail::thread_slice_ns(tid) == want; }))
      << detail::thread_slice_ns(tid) << " ns, not " << want;
  j.device->resume();
  caller.join();
  EXPECT_EQ(after, before.load());
  for (auto& f : j.futures) EXPECT_EQ(f.get().size(), 1u);
  for (auto& f : blocked) EXPECT_EQ(f.get().size(), 1u);
}

TEST(BatchExecutor, OverflowBlockWaitsForRoom) {
  Jammed j(OverflowPolicy::block);
  std::atomic<int> returned{0};
  std::vector<std::future<std::vector<float>>> produced;
  std::thread producer([&] {
    for (int i = 2; i < 14; ++i) {
      produced.push_back(j.gpu.relu({static_cast<float>(i)}));
      ++returned;
    }
  });
  // The producer gets 6 or 7 requests in (2 + 4 of queue room, maybe not yet pulled), then blocks.
  ASSERT_TRUE(eventually([&] { return returned.load() >= 4; }));
  std::this_thread::sleep_for(200ms);
  const int stuck_at = returned.load();
  EXPECT_LE(stuck_at, 2 + 4);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(returned.load(), stuck_at) << "a blocked call returned while the device was paused";
  j.device->resume();
  producer.join();
  EXPECT_EQ(returned.load(), 12);
  for (auto& f : j.futures) EXPECT_EQ(f.get().size(), 1u);
  for (auto& f : produced) EXPECT_EQ(f.get().size(), 1u);
  EXPECT_EQ(j.executor->stats().rejected, 0u);
}

// ---- per-request deadlines ----

TEST(BatchExecutor, ExpiredRequestsFailPromptlyAndNeverRun) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = small_config(4, 60s);
  config.max_inflight_batches = 1;
  config.queue_capacity = 64;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->pause();
  std::vector<std::future<std::vector<float>>> held;
  for (int i = 0; i < 4; ++i) held.push_back(gpu.relu({static_cast<float>(i)}));
  ASSERT_TRUE(device->wait_for_batches(1));
  // 4 without a deadline fill the forming batch (it waits for the slot); 8 with a short deadline
  // wait in the queue behind it, then one with a far deadline.
  std::vector<std::future<std::vector<float>>> patient;
  for (int i = 0; i < 4; ++i) patient.push_back(gpu.relu({50.0f + static_cast<float>(i)}));
  std::vector<std::future<std::vector<float>>> doomed;
  const auto t0 = Clock::now();
  for (int i = 0; i < 8; ++i)
    doomed.push_back(gpu.relu({100.0f + static_cast<float>(i)}, SubmitOptions::within(60ms)));
  auto far = gpu.relu({60.0f}, SubmitOptions::within(60s));
  for (auto& f : doomed) {
    ASSERT_TRUE(ready_within(f, 20s)) << "an expired request did not fail while the device was paused";
    EXPECT_EQ(error_code(f), ErrorCode::deadline_exceeded);
  }
  EXPECT_GE(Clock::now() - t0, 60ms);
  for (auto& f : patient) EXPECT_FALSE(ready(f));
  // Already past: refused in the call.
  auto late = gpu.relu({52.0f}, SubmitOptions::at(Clock::now() - 1ms));
  ASSERT_TRUE(ready(late));
  EXPECT_EQ(error_code(late), ErrorCode::deadline_exceeded);

  device->resume();
  for (auto& f : held) EXPECT_EQ(f.get().size(), 1u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(patient[i].get(), (std::vector<float>{50.0f + i}));
  executor.shutdown();
  EXPECT_EQ(far.get(), (std::vector<float>{60.0f}));
  for (float m : device->markers()) EXPECT_LT(m, 100.0f) << "an expired request reached the device";
  const Stats s = executor.stats();
  EXPECT_EQ(s.expired, 8u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.completed, 9u);
  EXPECT_EQ(s.queue_depth, 0u);
}

// A deadline in the forming batch (not only in the queue) is honoured too.
TEST(BatchExecutor, ExpiredRequestsInTheFormingBatchFailPromptly) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(100, 60s));
  auto gpu = executor.handle();
  auto keep = gpu.relu({1.0f});
  auto doomed = gpu.relu({200.0f}, SubmitOptions::within(30ms));
  ASSERT_TRUE(ready_within(doomed, 20s));
  EXPECT_EQ(error_code(doomed), ErrorCode::deadline_exceeded);
  EXPECT_FALSE(ready(keep));
  executor.shutdown();
  EXPECT_EQ(keep.get(), (std::vector<float>{1.0f}));
  EXPECT_EQ(device->markers(), (std::vector<float>{1.0f}));
}

// ---- shutdown ----

TEST(BatchExecutor, DestructorDrainsEveryAcceptedRequest) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 1ms});
  std::vector<std::future<std::vector<float>>> futures;
  {
    BatchExecutor executor(device, small_config(64, 60s));
    auto gpu = executor.handle();
    for (int i = 0; i < 100; ++i) futures.push_back(gpu.relu({static_cast<float>(i)}));
  }
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(ready(futures[i]));
    EXPECT_EQ(futures[i].get(), (std::vector<float>{static_cast<float>(i)}));
  }
  EXPECT_EQ(sum(device->batch_sizes()), 100u);
}

TEST(BatchExecutor, AfterShutdownCallsFailWithShutDownWithoutThrowing) {
  auto device = std::make_shared<FakeDevice>();
  auto executor = std::make_unique<BatchExecutor>(device, small_config(8, 1ms));
  auto gpu = executor->handle();
  auto before = gpu.relu({1.0f});
  executor->shutdown();
  EXPECT_TRUE(ready(before));
  EXPECT_EQ(before.get(), (std::vector<float>{1.0f}));
  auto after = gpu.relu({1.0f});
  ASSERT_TRUE(ready(after));
  EXPECT_EQ(error_code(after), ErrorCode::shut_down);
  executor->shutdown();  // idempotent
  executor->shutdown(ShutdownMode::cancel);
  executor.reset();  // the handle outlives the executor
  auto orphan = gpu.dot({1.0f}, {2.0f});
  ASSERT_TRUE(ready(orphan));
  EXPECT_EQ(error_code(orphan), ErrorCode::shut_down);
  BatchedGpuHandle detached;
  EXPECT_FALSE(detached);
  auto none = detached.relu({1.0f});
  ASSERT_TRUE(ready(none));
  EXPECT_EQ(error_code(none), ErrorCode::shut_down);
}

TEST(BatchExecutor, ShutdownDrainFlushesWithReasonShutdown) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(64, 60s));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 10; ++i) futures.push_back(gpu.relu({1.0f}));
  executor.shutdown(ShutdownMode::drain);
  for (auto& f : futures) {
    ASSERT_TRUE(ready(f));
    EXPECT_EQ(f.get().size(), 1u);
  }
  const Stats s = executor.stats();
  EXPECT_EQ(s.flushes.shutdown, 1u);
  EXPECT_EQ(s.completed, 10u);
}

TEST(BatchExecutor, ShutdownCancelFailsPendingButFinishesInFlight) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = small_config(2, 60s);
  config.max_inflight_batches = 1;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->pause();
  auto a = gpu.relu({1.0f});
  auto b = gpu.relu({2.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  std::vector<std::future<std::vector<float>>> pending;
  for (int i = 0; i < 7; ++i) pending.push_back(gpu.relu({3.0f}));
  std::thread resumer([&] {
    std::this_thread::sleep_for(100ms);
    device->resume();
  });
  executor.shutdown(ShutdownMode::cancel);
  resumer.join();
  EXPECT_EQ(a.get(), (std::vector<float>{1.0f}));  // in flight: finished
  EXPECT_EQ(b.get(), (std::vector<float>{2.0f}));
  for (auto& f : pending) {
    ASSERT_TRUE(ready(f));
    EXPECT_EQ(error_code(f), ErrorCode::shut_down);
  }
  EXPECT_EQ(device->requests_seen(), 2u);
  const Stats s = executor.stats();
  EXPECT_EQ(s.cancelled, 7u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.queue_depth, 0u);
}

// Producers keep pushing while shutdown runs: every future resolves (value or shut_down), and
// the counts add up.
void shutdown_while_pushing(ShutdownMode mode) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 500us});
  BatchConfig config = small_config(16, 500us);
  config.queue_capacity = 64;
  auto executor = std::make_unique<BatchExecutor>(device, config);
  constexpr int kThreads = 8;
  std::atomic<bool> stop{false};
  std::vector<std::vector<std::future<std::vector<float>>>> futures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, gpu = executor->handle()] {
      for (int i = 0; !stop.load(); ++i) {
        futures[t].push_back(gpu.relu({static_cast<float>(i)}));
        if (ready(futures[t].back())) std::this_thread::sleep_for(100us);  // refused: slow down
      }
    });
  }
  std::this_thread::sleep_for(50ms);
  executor->shutdown(mode);
  std::this_thread::sleep_for(20ms);  // keep pushing into the shut-down executor
  stop = true;
  for (auto& t : threads) t.join();
  std::uint64_t values = 0, shut = 0, total = 0;
  for (auto& list : futures) {
    for (auto& f : list) {
      ++total;
      ASSERT_NE(f.wait_for(0s), std::future_status::timeout) << "a future was left unresolved";
      const auto code = error_code(f);
      if (!code) ++values;
      else {
        EXPECT_EQ(*code, ErrorCode::shut_down);
        ++shut;
      }
    }
  }
  EXPECT_EQ(values + shut, total);
  EXPECT_GT(values, 0u);
  EXPECT_GT(shut, 0u);
  const Stats s = executor->stats();
  EXPECT_EQ(s.completed, values);
  EXPECT_EQ(s.rejected + s.cancelled, shut);
  EXPECT_EQ(s.submitted, s.completed + s.failed);
  if (mode == ShutdownMode::drain) {
    EXPECT_EQ(s.cancelled, 0u);
  }
  EXPECT_EQ(s.queue_depth, 0u);
}

TEST(BatchExecutor, ShutdownDrainWhileProducersPush) { shutdown_while_pushing(ShutdownMode::drain); }
TEST(BatchExecutor, ShutdownCancelWhileProducersPush) { shutdown_while_pushing(ShutdownMode::cancel); }

TEST(BatchExecutor, ShutdownFromACompletionHandlerDoesNotDeadlock) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_config(1, 1ms));
  auto gpu = executor.handle();
  std::promise<void> called;
  gpu.relu({1.0f}, [&](std::exception_ptr e, std::vector<float>) {
    EXPECT_FALSE(e);
    executor.shutdown();  // from an executor thread: starts the shutdown, does not wait
    called.set_value();
  });
  ASSERT_EQ(called.get_future().wait_for(30s), std::future_status::ready);
  executor.shutdown();
  auto after = gpu.relu({1.0f});
  EXPECT_EQ(error_code(after), ErrorCode::shut_down);
}

TEST(BatchExecutor, RejectsANullDeviceAndABadConfig) {
  EXPECT_THROW(BatchExecutor(std::shared_ptr<detail::BatchDevice>{}), Error);
  BatchConfig bad;
  bad.queue_capacity = 0;
  try {
    BatchExecutor executor(std::make_shared<FakeDevice>(), bad);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
  }
}

TEST(BatchExecutor, MoveAssignmentDrainsTheOldExecutor) {
  auto d1 = std::make_shared<FakeDevice>();
  auto d2 = std::make_shared<FakeDevice>();
  BatchExecutor a(d1, small_config(64, 60s));
  auto f = a.handle().relu({1.0f});
  a = BatchExecutor(d2, small_config(64, 1ms));
  ASSERT_TRUE(ready(f));
  EXPECT_EQ(f.get(), (std::vector<float>{1.0f}));
  EXPECT_EQ(a.handle().relu({2.0f}).get(), (std::vector<float>{2.0f}));
  EXPECT_EQ(d2->requests_seen(), 1u);
}

// GPUBATCH_POLL_PAUSE_US (how long a poll spins before it yields) is checked when an executor is
// made: a malformed value is a typed error, not a silent default.
TEST(BatchExecutor, AMalformedPollPauseIsRefusedWhenTheExecutorIsMade) {
  for (const char* bad : {"abc", "-1", "10001", "5us"}) {
    EnvGuard env("GPUBATCH_POLL_PAUSE_US", bad);
    try {
      BatchExecutor executor(std::make_shared<FakeDevice>());
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_config) << bad;
      EXPECT_NE(std::string(e.what()).find("GPUBATCH_POLL_PAUSE_US"), std::string::npos) << e.what();
    }
  }
  EnvGuard fine("GPUBATCH_POLL_PAUSE_US", "50");
  BatchExecutor executor(std::make_shared<FakeDevice>());
  EXPECT_EQ(executor.handle().relu({2.0f}).get(), std::vector<float>{2.0f});
}

// On a device that runs on the host's cores (lavapipe) the executor runs at most half the
// usable cores' worth of completion threads (at least one): the device's own threads need the
// rest. A GPU keeps what was configured; GPUBATCH_HOST_THREAD_CAP=off keeps it everywhere.
TEST(BatchExecutor, CompletionThreadsOnHostCoresAreAtMostHalfTheCores) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const std::size_t cap = std::max(1, CPU_COUNT(&set) / 2);
  BatchConfig config = BatchConfig::adaptive();
  config.completion_threads = 64;
  auto run_one = [](BatchExecutor& executor) {
    EXPECT_EQ(executor.handle().relu({-1.0f, 1.0f}).get(), (std::vector<float>{0.0f, 1.0f}));
  };
  {
    BatchExecutor executor(std::make_shared<FakeDevice>(FakeDevice::Options{.host_cpu = true}), config);
    EXPECT_EQ(executor.config().completion_threads, std::min<std::size_t>(64, cap));
    run_one(executor);
  }
  {
    BatchExecutor executor(std::make_shared<FakeDevice>(), config);
    EXPECT_EQ(executor.config().completion_threads, 64u) << "a GPU: as configured";
    run_one(executor);
  }
  EnvGuard off("GPUBATCH_HOST_THREAD_CAP", "off");
  BatchExecutor executor(std::make_shared<FakeDevice>(FakeDevice::Options{.host_cpu = true}), config);
  EXPECT_EQ(executor.config().completion_threads, 64u);
  run_one(executor);
}

// Batches on the device once a small batch arrives behind a stream's batch of 20 that the device
// holds: the stream's batch goes into the second slot beside a lone caller's (whose batch of one
// goes at once), then one request more.
std::size_t batches_beside_a_held_stream(bool host_cpu) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.host_cpu = host_cpu});
  BatchConfig config = BatchConfig::adaptive();
  config.max_inflight_batches = 2;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->hold(-1.0f);
  auto lone = hold_the_strand(*device, gpu);  // a lone caller's relu({1}), its submit held
  std::vector<std::future<std::vector<float>>> stream;
  for (int i = 0; i < 20; ++i) stream.push_back(gpu.relu({i == 0 ? -1.0f : float(i)}));
  device->release_submits();
  EXPECT_TRUE(ready_within(lone, 30s));
  EXPECT_EQ(lone.get(), std::vector<float>{1.0f});
  EXPECT_TRUE(device->wait_for_batches(2));
  auto small = gpu.relu({7.0f});
  std::this_thread::sleep_for(50ms);
  const std::size_t seen = device->batches();
  device->release(-1.0f);
  if (!ready_within(small, 30s)) {  // no hang: the executor's destructor resolves what is left
    ADD_FAILURE() << "the small batch never went";
    return seen;
  }
  EXPECT_EQ(small.get(), std::vector<float>{7.0f});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(stream[i].get(), std::vector<float>{i == 0 ? 0.0f : float(i)});
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{1, 20, 1}));
  return seen;
}

// On a device of host cores, a batch of fewer than 256 requests behind a batch of a stream (16 or
// more) waits for it instead of taking the second slot (executor_core.hpp, host_small_batch_); a
// GPU's goes at once, and so it does with GPUBATCH_HOST_SMALL_BATCH=off.
TEST(BatchExecutor, OnHostCoresASmallBatchWaitsForTheStreamsBatchInFlight) {
  EXPECT_EQ(batches_beside_a_held_stream(true), 2u) << "host cores: the small batch waits";
  EXPECT_EQ(batches_beside_a_held_stream(false), 3u) << "a GPU: the second slot";
  EnvGuard off("GPUBATCH_HOST_SMALL_BATCH", "off");
  EXPECT_EQ(batches_beside_a_held_stream(true), 3u) << "off: the second slot";
}

}  // namespace
}  // namespace gpubatch::testing
