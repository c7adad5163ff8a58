// Nothing lost, on the real Vulkan device (lavapipe in CI): 16 producer threads submit mixed
// operations and sizes (futures and completion callbacks, some with deadlines) while a chaos thread
// injects faults at random points (device lost on submit and on wait, out of device and host
// memory, pipelines that fail to build, a hung batch, a device that is really lost and re-created)
// and each round ends with a shutdown (drain or cancel) in the middle of the pushing. Every call
// must resolve exactly once, with a value that matches the CPU reference or a typed error; the
// count of unresolved calls is printed and must be 0.
//
// GPUBATCH_FAULT_STRESS_REQUESTS (else GPUBATCH_STRESS_REQUESTS) sets the total requests (default
// 200000; 40000 under a sanitizer); GPUBATCH_STRESS_SEED fixes the seed. The long run:
//   GPUBATCH_STRESS_REQUESTS=1000000 build/release/tests/gpubatch_stress_tests --gtest_filter='FaultStress*'
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/fault_injection.hpp"
#include "gpu/vulkan_batch_device.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "unit/executor/test_util.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GPUBATCH_STRESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GPUBATCH_STRESS_SANITIZED 1
#endif
#endif

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using gpu::Fault;
using gpu::FaultInjector;
using Clock = std::chrono::steady_clock;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  if (const char* v = std::getenv(name); v && *v) return std::strtoull(v, nullptr, 10);
  return fallback;
}

std::uint64_t total_requests() {
#ifdef GPUBATCH_STRESS_SANITIZED
  constexpr std::uint64_t fallback = 40000;
#else
  constexpr std::uint64_t fallback = 200000;
#endif
  return env_number("GPUBATCH_FAULT_STRESS_REQUESTS", env_number("GPUBATCH_STRESS_REQUESTS", fallback));
}

constexpr int kProducers = 16;
constexpr int kRounds = 4;
constexpr std::size_t kWindow = 192;  // calls each producer keeps outstanding

// Shared tallies.
struct Tally {
  std::atomic<std::uint64_t> submitted{0}, values{0}, verified{0}, mismatches{0}, errors{0},
      unexpected{0}, unresolved{0}, resolved_twice{0};
  std::atomic<std::uint64_t> by_code[11]{};
  std::mutex m;
  std::vector<std::string> problems;  // the first few

  void problem(std::string what) {
    std::lock_guard<std::mutex> lock(m);
    if (problems.size() < 10) problems.push_back(std::move(what));
  }
  void error(ErrorCode code, const std::string& what) {
    ++errors;
    ++by_code[static_cast<int>(code)];
    switch (code) {
      case ErrorCode::device_lost: case ErrorCode::out_of_memory: case ErrorCode::compile_failed:
      case ErrorCode::shut_down: case ErrorCode::deadline_exceeded:
        break;
      default:
        ++unexpected;
        problem("unexpected error: " + what);
    }
  }
  void value(const Request& r, const Result& got) {
    ++values;
    if (auto bad = reference::check(r, got)) {
      ++mismatches;
      problem(*bad);
    } else {
      ++verified;
    }
  }
};

// One outstanding call: a future, or a completion callback that signals `done` the first time.
struct Call {
  std::shared_ptr<const Request> request;
  std::future<Result> future;  // valid for the future form
  struct Callback {
    std::atomic<int> calls{0};
    std::promise<void> done;
  };
  std::shared_ptr<Callback> callback;
};

// Waits for the call to resolve (a generous bound: a call that never resolves is counted, not
// waited for forever) and records its outcome.
void settle(Call& c, Tally& tally) {
  constexpr auto kBound = 300s;
  if (c.callback) {
    if (c.callback->done.get_future().wait_for(kBound) != std::future_status::ready) {
      ++tally.unresolved;
      tally.problem("a callback never ran: " + describe_op(*c.request));
    }
    return;
  }
  if (c.future.wait_for(kBound) != std::future_status::ready) {
    ++tally.unresolved;
    tally.problem("a future never resolved: " + describe_op(*c.request));
    return;
  }
  try {
    tally.value(*c.request, c.future.get());
  } catch (const Error& e) {
    tally.error(e.code(), e.what());
  } catch (const std::exception& e) {
    ++tally.unexpected;
    tally.problem(std::string("not a gpubatch::Error: ") + e.what());
  }
}

// Mixed ops and sizes: mostly small, some a few thousand elements, a few chains of a handful of
// shapes (their fused kernels are built while faults fly).
Request make_request(std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 99);
  const int p = pick(rng);
  if (p < 6) {
    std::uniform_int_distribution<std::size_t> len(1, 300);
    auto x = random_floats(len(rng), rng);
    auto y = random_floats(x.size(), rng);
    switch (p % 3) {
      case 0: return chain(std::move(x)).relu().scale(1.5f).add(std::move(y));
      case 1: return chain(std::move(x)).tanh().mul(std::move(y)).sigmoid();
      default: return chain(std::move(x)).gelu().lerp(std::move(y), 0.25f).swish();
    }
  }
  if (p < 10) return random_request(rng, 4096);
  return random_request(rng, 64);
}

struct FaultPlan {
  Fault fault;
  int weight;
};

TEST(FaultStress, EveryCallResolvesExactlyOnceUnderFaultsAndShutdown) {
  const std::uint64_t total = total_requests();
  const std::uint64_t seed = env_number("GPUBATCH_STRESS_SEED", std::random_device{}());
  std::printf("fault stress: seed %llu, %llu requests, %d producers, %d rounds\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(total), kProducers,
              kRounds);
  std::fflush(stdout);
  FaultInjector::disarm_all();
  std::uint64_t fired_before[static_cast<int>(Fault::count_)];
  for (int f = 0; f < static_cast<int>(Fault::count_); ++f) fired_before[f] = FaultInjector::fired(Fault(f));

  // Never destroyed: destroying the last VkInstance unloads lavapipe, which ThreadSanitizer's
  // called_from_lib suppressions do not allow (it would end the process with status 66).
  static Device& device = *new Device;
  auto& vulkan = dynamic_cast<gpu::VulkanBatchDevice&>(*device.batch_device());
  Tally tally;
  const auto start = Clock::now();
  std::mt19937_64 master(seed);
  std::uint64_t shutdowns_drain = 0, shutdowns_cancel = 0, hangs_armed = 0, recreations_armed = 0;
  std::uint64_t stats_in = 0, stats_out = 0;
  const std::uint64_t per_round = total / kRounds;
  // A long run may afford more of the slow faults (each hang holds a batch for batch_timeout).
  const std::uint64_t max_hangs = std::max<std::uint64_t>(1, total / 250000);
  const std::uint64_t max_recreations = std::max<std::uint64_t>(1, total / 200000);

  for (int round = 0; round < kRounds; ++round) {
    BatchConfig config;
    switch (round % 4) {
      case 0:  // GPUBATCH_FAULT_STRESS_RESIDENT=1: adaptive plus the resident ring (realtime)
        config = std::getenv("GPUBATCH_FAULT_STRESS_RESIDENT") ? BatchConfig::realtime() : BatchConfig::adaptive();
        break;
      case 1: config = BatchConfig::balanced(); break;
      case 2: config = BatchConfig::latency(); break;
      default: config = BatchConfig::throughput(); break;
    }
    config.batch_timeout = 3000ms;  // a hung batch fails after this; real ones take far less
    const bool cancel = round % 2 == 1;  // drain and cancel in turn
    (cancel ? shutdowns_cancel : shutdowns_drain)++;
    auto executor = std::make_unique<BatchExecutor>(device, config);
    const BatchedGpuHandle gpu = executor->handle();
    std::atomic<std::uint64_t> round_submitted{0};
    std::uniform_real_distribution<double> where(0.7, 0.98);
    const auto shutdown_at = static_cast<std::uint64_t>(where(master) * double(per_round));
    std::atomic<bool> producers_done{false};

    // Chaos: arms faults at random points while the round runs.
    std::thread chaos([&, round, rng = std::mt19937(static_cast<std::uint32_t>(master()))]() mutable {
      const FaultPlan plan[] = {{Fault::submit_device_lost, 30}, {Fault::wait_device_lost, 30},
                                {Fault::host_out_of_memory, 25}, {Fault::device_out_of_memory, 8},
                                {Fault::pipeline_build, 5},      {Fault::hang, 1},
                                {Fault::device_lost_check, 1}};
      int weights = 0;
      for (auto& p : plan) weights += p.weight;
      std::uniform_int_distribution<int> pick(0, weights - 1);
      // One fault per 300..3000 requests submitted (on average one per ~1650): the same share
      // of faults however fast the build runs (release, ASan, TSan).
      std::uniform_int_distribution<std::uint64_t> gap(300, 3000);
      std::uint64_t next = round_submitted.load() + gap(rng);
      // The slow faults come at least once a run: a hung batch in round 1, a device that is
      // really lost in round 2; the rest at random.
      if (round == 1 && hangs_armed < max_hangs) {
        ++hangs_armed;
        FaultInjector::arm(Fault::hang);
      }
      if (round == 2 && recreations_armed < max_recreations) {
        ++recreations_armed;
        FaultInjector::arm(Fault::device_lost_check);
        FaultInjector::arm(Fault::submit_device_lost);  // always reaches the executor (a wait
      }                                                 // fault may hit a finished batch's check)
      while (!producers_done.load()) {
        if (round_submitted.load() < next) {
          std::this_thread::sleep_for(200us);
          continue;
        }
        next += gap(rng);
        int x = pick(rng);
        Fault f = plan[0].fault;
        for (auto& p : plan) {
          if (x < p.weight) {
            f = p.fault;
            break;
          }
          x -= p.weight;
        }
        if (f == Fault::hang) {
          if (hangs_armed >= max_hangs) continue;
          ++hangs_armed;
        }
        if (f == Fault::device_lost_check) {  // a device that is really lost: re-created
          if (recreations_armed >= max_recreations) continue;
          ++recreations_armed;
          FaultInjector::arm(Fault::device_lost_check);
          f = Fault::submit_device_lost;
        }
        FaultInjector::arm(f);
      }
    });

    std::vector<std::thread> producers;
    for (int t = 0; t < kProducers; ++t) {
      const std::uint64_t share = per_round / kProducers + (std::uint64_t(t) < per_round % kProducers ? 1 : 0);
      producers.emplace_back([&, t, share, rng = std::mt19937(static_cast<std::uint32_t>(master() + t))]() mutable {
        std::deque<Call> window;
        std::uniform_int_distribution<int> coin(0, 99);
        for (std::uint64_t i = 0; i < share; ++i) {
          if (window.size() >= kWindow) {
            settle(window.front(), tally);
            window.pop_front();
          }
          Call c;
          c.request = std::make_shared<const Request>(make_request(rng));
          SubmitOptions options;
          if (coin(rng) < 3) options = SubmitOptions::within(std::chrono::microseconds(coin(rng) * 100));
          if (coin(rng) < 30) {
            c.callback = std::make_shared<Call::Callback>();
            gpu.submit(*c.request, options,
                       [&tally, cb = c.callback, req = c.request](std::exception_ptr e, Result r) {
                         if (cb->calls.fetch_add(1) != 0) {
                           ++tally.resolved_twice;
                           return;
                         }
                         if (e) {
                           try {
                             std::rethrow_exception(e);
                           } catch (const Error& err) {
                             tally.error(err.code(), err.what());
                           } catch (const std::exception& err) {
                             ++tally.unexpected;
                             tally.problem(std::string("not a gpubatch::Error: ") + err.what());
                           }
                         } else {
                           tally.value(*req, r);
                         }
                         cb->done.set_value();
                       });
          } else {
            c.future = gpu.submit(*c.request, options);
          }
          ++tally.submitted;
          window.push_back(std::move(c));
          round_submitted.fetch_add(1);
        }
        while (!window.empty()) {
          settle(window.front(), tally);
          window.pop_front();
        }
      });
    }
    // The shutdown, in the middle of the round, while the producers keep pushing.
    while (round_submitted.load() < shutdown_at) std::this_thread::sleep_for(200us);
    executor->shutdown(cancel ? ShutdownMode::cancel : ShutdownMode::drain);
    for (auto& p : producers) p.join();
    producers_done.store(true);
    chaos.join();
    const Stats s = executor->stats();
    stats_in += s.submitted;
    stats_out += s.completed + s.failed;
    EXPECT_EQ(s.completed + s.failed, s.submitted) << "round " << round << ": every accepted request resolved";
    executor.reset();
    FaultInjector::disarm_all();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  std::printf("fault stress: %llu calls in %.1f s (%.0f/s); %llu values, %llu verified, %llu mismatches; "
              "%llu typed errors, %llu unexpected; resolved twice %llu\n",
              (unsigned long long)tally.submitted.load(), seconds, double(tally.submitted.load()) / seconds,
              (unsigned long long)tally.values.load(), (unsigned long long)tally.verified.load(),
              (unsigned long long)tally.mismatches.load(), (unsigned long long)tally.errors.load(),
              (unsigned long long)tally.unexpected.load(), (unsigned long long)tally.resolved_twice.load());
  std::printf("fault stress: errors by code:");
  for (int c = 0; c < 11; ++c)
    if (auto n = tally.by_code[c].load()) std::printf(" %s %llu", std::string(to_string(ErrorCode(c))).c_str(), (unsigned long long)n);
  std::printf("\nfault stress: faults fired:");
  const char* names[] = {"submit_device_lost", "wait_device_lost", "device_out_of_memory", "pipeline_build",
                         "hang", "host_out_of_memory", "device_lost_check", "resident_stall",
                         "resident_unavailable", "host_import_unavailable"};
  static_assert(std::size(names) == static_cast<std::size_t>(Fault::count_), "a name per fault");
  std::uint64_t faults = 0;
  for (int f = 0; f < static_cast<int>(Fault::count_); ++f) {
    const auto n = FaultInjector::fired(Fault(f)) - fired_before[f];
    faults += n;
    std::printf(" %s %llu", names[f], (unsigned long long)n);
  }
  std::printf(" (total %llu); device re-created %llu times; shutdowns: %llu drain, %llu cancel\n",
              (unsigned long long)faults, (unsigned long long)vulkan.recreations(),
              (unsigned long long)shutdowns_drain, (unsigned long long)shutdowns_cancel);
  std::printf("fault stress: accepted %llu, resolved by the executor %llu\n", (unsigned long long)stats_in,
              (unsigned long long)stats_out);
  std::printf("fault stress: unresolved futures: %llu\n", (unsigned long long)tally.unresolved.load());
  std::fflush(stdout);
  for (const auto& p : tally.problems) ADD_FAILURE() << p;

  EXPECT_EQ(tally.unresolved.load(), 0u);
  EXPECT_EQ(tally.resolved_twice.load(), 0u);
  EXPECT_EQ(tally.mismatches.load(), 0u);
  EXPECT_EQ(tally.unexpected.load(), 0u);
  EXPECT_EQ(tally.values.load() + tally.errors.load(), tally.submitted.load()) << "every call resolved once";
  EXPECT_GT(tally.verified.load(), tally.submitted.load() / 4) << "most calls ran";
  EXPECT_GT(faults, 0u);
  // Each device that was really lost (the check fired) was re-created, once. Whether round 2's
  // armed check fires depends on where its submit fault lands (a batch racing the shutdown may
  // take it), so its count is compared, not required to be positive: recovery_test.cpp covers
  // re-creation deterministically.
  const auto lost_checks = FaultInjector::fired(Fault::device_lost_check) -
                           fired_before[static_cast<int>(Fault::device_lost_check)];
  EXPECT_EQ(vulkan.recreations(), lost_checks) << "every really lost device was re-created once";
}

}  // namespace
}  // namespace gpubatch::testing
