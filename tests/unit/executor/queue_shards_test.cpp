// Level 0's queue in shards (GPUBATCH_QUEUE_SHARDS, src/executor/queue_shards.cpp) on the fake
// device: a crowd's requests all resolve with the CPU reference's values and each thread's leave
// in its own order; a lone request from the thread of any shard wakes the idle strand; shutdown
// drains every shard and cancel fails what each holds; a request's deadline is kept in any shard;
// the statistics count every shard; the capacity is split over the shards.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "hold_strand.hpp"
#include "test_util.hpp"

namespace gpubatch {
namespace {

using testing::FakeDevice;
using namespace std::chrono_literals;

std::vector<float> cpu_relu(std::vector<float> x) { return reference::run(Request::relu(std::move(x))).values; }

// The shard count is read when an executor is made.
class Shards {
 public:
  explicit Shards(int n) { ::setenv("GPUBATCH_QUEUE_SHARDS", std::to_string(n).c_str(), 1); }
  ~Shards() { ::unsetenv("GPUBATCH_QUEUE_SHARDS"); }
  Shards(const Shards&) = delete;
  Shards& operator=(const Shards&) = delete;
};

TEST(QueueShards, ACrowdResolvesAndEachThreadsRequestsLeaveInItsOrder) {
  Shards shards(4);
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 50us});
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  constexpr int kThreads = 8, kEach = 3000;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::future<std::vector<float>>> futures;
      for (int i = 0; i < kEach; ++i) futures.push_back(gpu.relu({float(t * 100000 + i), -1.0f}));
      for (int i = 0; i < kEach; ++i)
        if (futures[i].get() != cpu_relu({float(t * 100000 + i), -1.0f})) ++wrong[t];
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  // The device saw each thread's requests in the order the thread sent them.
  std::map<int, float> last;
  for (float m : device->markers()) {
    const int t = static_cast<int>(m) / 100000;
    if (last.count(t)) EXPECT_LT(last[t], m) << "thread " << t << " out of order";
    last[t] = m;
  }
  EXPECT_EQ(last.size(), std::size_t{kThreads});
  const Stats s = executor.stats();
  EXPECT_EQ(s.submitted, std::uint64_t{kThreads} * kEach);
  EXPECT_EQ(s.completed, std::uint64_t{kThreads} * kEach);
}

// Each thread lands on some shard; one after another, each sends one request to an idle executor
// and must get it back without anyone else pushing: the strand is woken from every shard.
TEST(QueueShards, ALoneRequestFromAnyShardWakesTheStrand) {
  Shards shards(4);
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = BatchConfig::adaptive();
  config.max_wait = 60s;  // only a wake-up sends the request: no timer does within the test
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  for (int t = 0; t < 12; ++t) {
    std::thread([&, t] {
      for (int i = 0; i < 3; ++i) {
        auto f = gpu.relu({float(t), -float(i)});
        ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "thread " << t << " request " << i;
        EXPECT_EQ(f.get(), cpu_relu({float(t), -float(i)}));
      }
    }).join();
  }
}

TEST(QueueShards, ShutdownDrainsEveryShard) {
  Shards shards(3);
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 200us});
  BatchConfig config = BatchConfig::adaptive();
  config.max_inflight_batches = 1;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures[6];
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) futures[t].push_back(gpu.relu({float(i), float(-t)}));
    });
  for (auto& th : threads) th.join();
  executor.shutdown(ShutdownMode::drain);
  for (int t = 0; t < 6; ++t)
    for (int i = 0; i < 500; ++i) EXPECT_EQ(futures[t][i].get(), cpu_relu({float(i), float(-t)}));
}

TEST(QueueShards, CancelFailsWhatEachShardHolds) {
  Shards shards(3);
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config;
  config.max_batch_size = 2;
  config.max_wait = 60s;
  config.policy = FlushPolicy::deadline;
  config.max_inflight_batches = 1;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->pause();
  auto a = gpu.relu({1.0f});
  auto b = gpu.relu({2.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  std::vector<std::future<std::vector<float>>> futures[3];
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) futures[t].push_back(gpu.relu({float(i)}));
    });
  for (auto& th : threads) th.join();
  std::thread resumer([&] {
    std::this_thread::sleep_for(100ms);
    device->resume();
  });
  executor.shutdown(ShutdownMode::cancel);
  resumer.join();
  EXPECT_EQ(a.get(), cpu_relu({1.0f}));
  EXPECT_EQ(b.get(), cpu_relu({2.0f}));
  std::size_t cancelled = 0;
  for (auto& fs : futures)
    for (auto& f : fs) {
      ASSERT_EQ(f.wait_for(0s), std::future_status::ready) << "a future was left unresolved";
      try {
        f.get();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::shut_down);
        ++cancelled;
      }
    }
  EXPECT_EQ(cancelled, 300u) << "every request waited in a shard or the former behind the paused batch";
}

// Requests with a deadline wait in the shards behind a held strand: each fails at its deadline.
TEST(QueueShards, ADeadlineIsKeptInEveryShard) {
  Shards shards(4);
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  auto first = testing::hold_the_strand(*device, gpu);
  std::vector<std::future<std::vector<float>>> futures[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) futures[t].push_back(gpu.relu({float(i)}, SubmitOptions::within(20ms)));
    });
  for (auto& th : threads) th.join();
  for (auto& fs : futures)
    for (auto& f : fs) {
      ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
      try {
        f.get();
        ADD_FAILURE() << "ran although the strand was held past its deadline";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::deadline_exceeded);
      }
    }
  device->release_submits();
  EXPECT_EQ(first.get().size(), 1u);
}

// queue_capacity is split over the shards: one thread, whose requests all go into its one
// shard, gets queue_full (overflow = reject) once its shard's share is taken.
TEST(QueueShards, TheCapacityIsSplitOverTheShards) {
  Shards shards(4);
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = BatchConfig::adaptive();
  config.queue_capacity = 16;  // 4 a shard
  config.overflow = OverflowPolicy::reject;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  auto first = testing::hold_the_strand(*device, gpu);
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 10; ++i) futures.push_back(gpu.relu({float(i)}));
  int full = 0;
  for (auto& f : futures) {
    if (f.wait_for(0s) != std::future_status::ready) continue;
    try {
      f.get();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::queue_full);
      EXPECT_NE(std::string(e.what()).find("in 4 shards"), std::string::npos) << e.what();
      ++full;
    }
  }
  EXPECT_EQ(full, 6) << "4 fit in the thread's shard";
  device->release_submits();
  EXPECT_EQ(first.get().size(), 1u);
}

}  // namespace
}  // namespace gpubatch
