// Stress: many producers, mixed ops, futures and callbacks, deadlines, injected device faults,
// every overflow policy, and a shutdown (drain or cancel) at a random point while producers still
// push. Every call must resolve exactly once; every value must match the CPU reference.
//
// GPUBATCH_STRESS_REQUESTS sets the requests per round (default 40000, the CI form);
// GPUBATCH_STRESS_SEED fixes the seed (default: random, printed).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "executor/mpsc_queue.hpp"
#include "unit/executor/fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "unit/executor/test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  if (const char* v = std::getenv(name); v && *v) return std::strtoull(v, nullptr, 10);
  return fallback;
}

std::uint64_t seed() {
  static const std::uint64_t s = env_number("GPUBATCH_STRESS_SEED", std::random_device{}());
  return s;
}

struct Round {
  const char* name;
  BatchConfig config;
  ShutdownMode mode;
  bool faults;
};

class ExecutorStress : public ::testing::TestWithParam<int> {};

TEST_P(ExecutorStress, EveryRequestResolvesExactlyOnce) {
  const std::uint64_t total = env_number("GPUBATCH_STRESS_REQUESTS", 40000);
  std::mt19937_64 rng(seed() + static_cast<std::uint64_t>(GetParam()));
  std::printf("seed %llu round %d, %llu requests\n", static_cast<unsigned long long>(seed()),
              GetParam(), static_cast<unsigned long long>(total));

  BatchConfig config;
  switch (GetParam() % 4) {
    case 0: config = BatchConfig::latency(); break;
    case 1: config = BatchConfig::balanced(); break;
    case 2: config = BatchConfig::adaptive(); break;
    default: config = BatchConfig::throughput(); break;
  }
  config.max_wait = std::chrono::microseconds(100 + rng() % 2000);
  config.max_batch_size = 16 + rng() % 512;
  config.queue_capacity = 64 + rng() % 4096;
  config.max_inflight_batches = 1 + rng() % 4;
  config.completion_threads = 1 + rng() % 3;
  config.overflow = static_cast<OverflowPolicy>(rng() % 3);
  config.block_timeout = std::chrono::microseconds(200 + rng() % 5000);
  const ShutdownMode mode = rng() % 2 ? ShutdownMode::drain : ShutdownMode::cancel;
  const bool faults = GetParam() % 2 == 1;

  auto device = std::make_shared<FakeDevice>(
      FakeDevice::Options{.delay = std::chrono::microseconds(rng() % 300), .record_markers = false});
  auto executor = std::make_unique<BatchExecutor>(device, config);

  constexpr int kThreads = 16;
  const std::uint64_t per_thread = total / kThreads;
  const std::uint64_t shutdown_after = per_thread * kThreads * (30 + rng() % 60) / 100;
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> callbacks_expected{0}, callbacks_run{0}, callback_dupes{0};
  std::atomic<std::uint64_t> values{0}, errors{0}, wrong{0};
  std::atomic<std::uint64_t> by_code[16] = {};

  auto count_error = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const Error& x) {
      ++by_code[static_cast<int>(x.code())];
    } catch (...) {
      ++by_code[15];
    }
    ++errors;
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, gpu = executor->handle()] {
      std::mt19937 trng(static_cast<std::uint32_t>(seed() * 31 + t));
      struct Outstanding {
        Request request;
        std::future<Result> future;
      };
      std::vector<Outstanding> outstanding;
      auto settle = [&](Outstanding& o) {
        if (o.future.wait_for(60s) != std::future_status::ready) return;  // counted as lost below
        try {
          const Result r = o.future.get();
          if (reference::check(o.request, r)) ++wrong;
          ++values;
        } catch (...) {
          count_error(std::current_exception());
        }
      };
      for (std::uint64_t i = 0; i < per_thread; ++i) {
        Request request = random_request(trng, 48);
        if (trng() % 97 == 0) request.b.push_back(1.0f);  // sometimes invalid
        SubmitOptions options;
        if (trng() % 13 == 0) options = SubmitOptions::within(std::chrono::microseconds(trng() % 3000));
        ++calls;
        if (trng() % 4 == 0) {
          ++callbacks_expected;
          auto once = std::make_shared<std::atomic<bool>>(false);
          gpu.submit(request, options, [&, request, once](std::exception_ptr e, Result r) {
            if (once->exchange(true)) ++callback_dupes;
            if (e) count_error(e);
            else {
              if (reference::check(request, r)) ++wrong;
              ++values;
            }
            ++callbacks_run;
          });
        } else {
          Outstanding o{request, gpu.submit(request, options)};
          outstanding.push_back(std::move(o));
          if (outstanding.size() > 64) {
            settle(outstanding.front());
            outstanding.erase(outstanding.begin());
          }
        }
        if (t == 0 && faults && i % 500 == 250) {
          if (trng() % 2) device->fail_next_submit(ErrorCode::device_lost);
          else device->fail_next_wait(ErrorCode::out_of_memory);
        }
      }
      for (auto& o : outstanding) settle(o);
    });
  }
  std::thread stopper([&] {
    while (calls.load() < shutdown_after) std::this_thread::sleep_for(100us);
    executor->shutdown(mode);
  });
  for (auto& th : threads) th.join();
  stopper.join();
  EXPECT_TRUE(eventually([&] { return callbacks_run.load() == callbacks_expected.load(); }, 60s));
  const Stats s = executor->stats();
  executor.reset();

  const std::uint64_t resolved = values.load() + errors.load();
  const std::uint64_t lost = calls.load() - resolved;
  std::printf("%s/%s/%s: %llu calls, %llu values, %llu errors (queue_full %llu, shut_down %llu, "
              "deadline %llu, invalid %llu, device %llu), %llu batches, mean batch %.1f, lost %llu\n",
              GetParam() % 4 == 0 ? "latency" : GetParam() % 4 == 1 ? "balanced" : GetParam() % 4 == 2 ? "adaptive" : "throughput",
              std::string(to_string(config.overflow)).c_str(),
              mode == ShutdownMode::drain ? "drain" : "cancel",
              static_cast<unsigned long long>(calls.load()), static_cast<unsigned long long>(values.load()),
              static_cast<unsigned long long>(errors.load()),
              static_cast<unsigned long long>(by_code[int(ErrorCode::queue_full)].load()),
              static_cast<unsigned long long>(by_code[int(ErrorCode::shut_down)].load()),
              static_cast<unsigned long long>(by_code[int(ErrorCode::deadline_exceeded)].load()),
              static_cast<unsigned long long>(by_code[int(ErrorCode::invalid_argument)].load()),
              static_cast<unsigned long long>(by_code[int(ErrorCode::device_lost)].load() +
                                              by_code[int(ErrorCode::out_of_memory)].load()),
              static_cast<unsigned long long>(s.batches), s.mean_batch_size,
              static_cast<unsigned long long>(lost));
  EXPECT_EQ(lost, 0u) << "futures or handlers never resolved";
  EXPECT_EQ(callback_dupes.load(), 0u);
  EXPECT_EQ(wrong.load(), 0u) << "results that disagree with the CPU reference";
  EXPECT_EQ(by_code[int(ErrorCode::internal)].load(), 0u);
  EXPECT_EQ(by_code[15].load(), 0u);
  EXPECT_EQ(s.completed, values.load());
  EXPECT_EQ(s.completed + s.failed + s.rejected, calls.load());
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(s.submitted, s.completed + s.failed);
  if (mode == ShutdownMode::drain) {
    EXPECT_EQ(s.cancelled, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Rounds, ExecutorStress, ::testing::Range(0, 8));

// The queue alone, hammered: 16 producers, a consumer that closes the queue at a random point,
// exactly-once delivery in per-producer order.
TEST(MpscQueueStress, SixteenProducersCloseAtRandom) {
  const std::uint64_t total = env_number("GPUBATCH_STRESS_REQUESTS", 40000) * 2;
  std::mt19937_64 rng(seed());
  for (int round = 0; round < 4; ++round) {
    detail::BlockingMpscQueue<std::uint64_t> q(8 + rng() % 300);
    constexpr int kProducers = 16;
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<int> finished{0};
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        for (std::uint64_t i = 0; i < total / kProducers; ++i) {
          const std::uint64_t v = (static_cast<std::uint64_t>(p) << 40) | i;
          std::uint64_t pos = 0;
          const auto r = (i & 1) ? q.push_wait(std::uint64_t{v}, pos)
                                 : q.push_until(std::uint64_t{v}, std::chrono::steady_clock::now() + 100us, pos);
          if (r == detail::PushResult::closed) break;
          if (r == detail::PushResult::ok) ++accepted;
        }
        ++finished;
      });
    }
    std::vector<std::uint64_t> last(kProducers, ~std::uint64_t{0});
    std::uint64_t popped = 0;
    const std::uint64_t close_at = total * (20 + rng() % 70) / 100;
    bool closed = false;
    std::uint64_t v;
    for (;;) {
      if (q.try_pop(v)) {
        const auto p = static_cast<std::size_t>(v >> 40);
        const auto i = v & ((std::uint64_t{1} << 40) - 1);
        ASSERT_TRUE(last[p] == ~std::uint64_t{0} || i > last[p]) << "order or duplicate";
        last[p] = i;
        ++popped;
        continue;
      }
      if (!closed && (popped >= close_at || finished.load() == kProducers)) {
        q.close();
        closed = true;
      }
      if (closed && q.drained()) break;
      std::this_thread::yield();
    }
    for (auto& t : producers) t.join();
    EXPECT_EQ(popped, accepted.load());
  }
}

}  // namespace
}  // namespace gpubatch::testing
