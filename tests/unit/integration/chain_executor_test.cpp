// The executor on a real Vulkan device: chains and custom kernels submitted as requests from many
// threads are batched like the built-ins; a batch of chains of one shape is one fused ragged
// dispatch.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"

using namespace gpubatch;
using namespace std::chrono_literals;

namespace {

Device& device() {
  static Device d;
  return d;
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

BatchConfig config_for_test() {
  BatchConfig c = BatchConfig::balanced();
  c.max_batch_size = 256;
  c.max_wait = 5ms;
  return c;
}

}  // namespace

TEST(ExecutorChains, EightThreadsOfChainsAreBatchedIntoFusedDispatches) {
  Device& dev = device();
  BatchExecutor executor(dev, config_for_test());
  auto handle = executor.handle();
  {  // warm: the fused kernel is built before the counted run
    std::vector<float> x = {-1.0f, 2.0f}, y = {1.0f, 1.0f};
    ASSERT_EQ(handle.submit(chain(x).relu().scale(2).add(y)).get().values, (std::vector<float>{1.0f, 5.0f}));
  }
  const Stats before = executor.stats();
  const DeviceCounters counters_before = dev.counters();

  constexpr int kThreads = 8, kPerThread = 150, kInflight = 32;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::uniform_int_distribution<std::size_t> len(1, 2000);
      struct Pending {
        Request request;
        std::future<Result> future;
      };
      std::vector<Pending> pending;
      auto finish = [&](Pending& p) {
        if (p.future.wait_for(60s) != std::future_status::ready) {
          ++bad;
          ADD_FAILURE() << "a future never resolved";
          return;
        }
        try {
          const Result got = p.future.get();
          if (auto mismatch = reference::check(p.request, got)) {
            ++bad;
            ADD_FAILURE() << *mismatch;
          }
        } catch (const std::exception& e) {
          ++bad;
          ADD_FAILURE() << e.what();
        }
      };
      for (int i = 0; i < kPerThread; ++i) {
        const std::size_t n = len(rng);
        std::vector<float> x = random_floats(n, rng), y = random_floats(n, rng);
        Request copy = chain(x).relu().scale(2).add(y);  // what the result is checked against
        pending.push_back({std::move(copy), handle.submit(chain(std::move(x)).relu().scale(2).add(std::move(y)))});
        if (pending.size() >= kInflight) {
          finish(pending.front());
          pending.erase(pending.begin());
        }
      }
      for (auto& p : pending) finish(p);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);

  const Stats after = executor.stats();
  const DeviceCounters counters_after = dev.counters();
  const auto batches = after.batches - before.batches;
  const auto completed = after.completed - before.completed;
  RecordProperty("batches", static_cast<int>(batches));
  RecordProperty("mean_batch_size", std::to_string(after.mean_batch_size));
  EXPECT_EQ(completed, std::uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(after.failed - before.failed, 0u);
  EXPECT_LT(batches, completed / 4) << "batches held many chains each";
  EXPECT_GT(after.mean_batch_size, 4.0);
  // Every batch held chains of one shape only: one fused dispatch per batch.
  EXPECT_EQ(counters_after.dispatches - counters_before.dispatches, batches);
  EXPECT_EQ(counters_after.submissions - counters_before.submissions, batches);
}

TEST(ExecutorChains, ChainsCustomKernelsAndBuiltinsShareBatches) {
  Device& dev = device();
  auto cube = register_kernel(dev, "exec_cube", KernelKind::elementwise, "return x * x * x + p;");
  BatchConfig c = config_for_test();
  c.max_wait = 50ms;  // everything below lands in one flush
  c.max_batch_size = 64;
  BatchExecutor executor(dev, c);
  auto handle = executor.handle();
  std::mt19937 rng(7);
  std::vector<Request> requests;
  std::vector<std::future<Result>> futures;
  for (int i = 0; i < 64; ++i) {
    const std::size_t n = 1 + static_cast<std::size_t>(i) * 13 % 500;
    switch (i % 4) {
      case 0: requests.push_back(chain(random_floats(n, rng)).relu().scale(float(i)).add(random_floats(n, rng))); break;
      case 1: requests.push_back(chain(random_floats(n, rng)).tanh().mul(random_floats(n, rng))); break;
      case 2: requests.push_back(Request::custom(cube, random_floats(n, rng), {}, 0.5f)); break;
      default: requests.push_back(Request::sigmoid(random_floats(n, rng)));
    }
  }
  for (const auto& r : requests) futures.push_back(handle.submit(r));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_EQ(futures[i].wait_for(60s), std::future_status::ready);
    const Result got = futures[i].get();
    const Request& r = requests[i];
    if (r.op == Op::custom) {
      for (std::size_t k = 0; k < r.a.size(); ++k) {
        const double x = r.a[k], want = x * x * x + 0.5;
        ASSERT_NEAR(got.values[k], want, 4e-6 * (std::fabs(want) + std::fabs(x * x * x) + 1.0));
      }
    } else {
      const auto mismatch = reference::check(r, got);
      ASSERT_FALSE(mismatch) << *mismatch;
    }
  }
  // A request the executor refuses before it reaches the device.
  auto bad = handle.submit(chain(std::vector<float>{1.0f, 2.0f}).add({1.0f}));
  try {
    bad.get();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
  }
}
