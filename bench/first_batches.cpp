// gpubatch-first-batches: the copy-engine hang of docs/RELIABILITY.md ("A copy-engine batch that
// never completes"), reproduced as fast as possible. The one hang whose timelines were read stood
// at "timeline at 3 of 4": the fourth submission of a freshly opened device, so among the first
// batches of the four threads. Each iteration therefore opens a fresh Device (unless --warm),
// starts --threads threads at once and lets each call Device::run on --per-thread random requests
// of up to 200,000 floats (the ops of CopyEngine.ThreadsRunningLargeRequestsConcurrently), every
// batch on the copy engine (copy_engine_bytes 0; --direct for the direct path), every result
// checked against the CPU reference. --prebuild first runs one small request of each op on one
// thread, so that the concurrent batches find their pipelines built and a frame and memory made.
//
//   gpubatch-first-batches [--iterations N] [--seconds S] [--threads T] [--per-thread K]
//                          [--warm] [--prebuild] [--direct] [--timeout-ms MS] [--seed S]
//
// One JSON line at the end: iterations, batches, mismatches, seconds. A watchdog error (the hang)
// prints the iteration, the thread, the request and the error (with the timelines' state) and
// ends the process at once with status 3: a hung device cannot be destroyed (its destructor
// waits for the GPU).
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/kernels.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/copy_engine_ops.hpp"

namespace gpubatch::gpu {
extern const std::pair<std::string_view, std::span<const std::uint32_t>> kEmbeddedShaders[];
extern const std::size_t kEmbeddedShaderCount;
}  // namespace gpubatch::gpu

using namespace gpubatch;
using Clock = std::chrono::steady_clock;

namespace {

// As tests/support/random_data.hpp draws them, so that --test-seeds replays the test's data.
// The copy-engine test's ops, by kind 0-6: tests/support/copy_engine_ops.hpp, shared with the test.
Request make_op(unsigned kind, std::mt19937& rng, std::size_t n) { return copy_engine_op(kind, rng, n); }

struct Options {
  int iterations = 200;
  double seconds = 0;
  int threads = 4;
  int per_thread = 1;
  bool warm = false, prebuild = false, direct = false;
  bool test_seeds = false;  // each thread t draws as the test does: seed 100 + t, every iteration
  bool only_dot = false;
  bool prebuild_pipelines = false;  // every built-in pipeline built before any GPU work
  int timeout_ms = 5000;
  unsigned seed = 1;
};

[[noreturn]] void hung(int iteration, int thread, const std::string& what, const std::string& error) {
  std::printf("{\"hang\": true, \"iteration\": %d, \"thread\": %d, \"request\": \"%s\", \"error\": \"%s\"}\n",
              iteration, thread, what.c_str(), error.c_str());
  std::fflush(stdout);
  std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"gpubatch-first-batches: the first concurrent copy-engine batches of fresh devices"};
  app.add_option("--iterations", o.iterations);
  app.add_option("--seconds", o.seconds, "stop after this long (0: run every iteration)");
  app.add_option("--threads", o.threads)->check(CLI::Range(1, 64));
  app.add_option("--per-thread", o.per_thread)->check(CLI::Range(1, 1000));
  app.add_flag("--warm", o.warm, "one device for every iteration");
  app.add_flag("--prebuild", o.prebuild, "one request of each op on one thread before the threads start");
  app.add_flag("--direct", o.direct, "the direct path instead of the copy engine");
  app.add_option("--timeout-ms", o.timeout_ms, "Device::run's watchdog")->check(CLI::Range(100, 600000));
  app.add_option("--seed", o.seed);
  app.add_flag("--test-seeds", o.test_seeds,
               "replay CopyEngine.ThreadsRunningLargeRequestsConcurrently: seed 100 + thread, each request "
               "made just before its call");
  app.add_flag("--prebuild-pipelines", o.prebuild_pipelines,
               "build every built-in pipeline when the device opens, before any GPU work");
  app.add_flag("--only-dot", o.only_dot, "every request a dot");
  CLI11_PARSE(app, argc, argv);

  DeviceOptions options;
  options.batch_timeout = std::chrono::milliseconds(o.timeout_ms);
  options.copy_engine_bytes = o.direct ? std::numeric_limits<std::uint64_t>::max() : 0;
  std::optional<Device> device;
  std::atomic<long> mismatches{0}, batches{0};
  const auto start = Clock::now();
  int done = 0;
  for (; done < o.iterations; ++done) {
    if (o.seconds > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= o.seconds) break;
    if (!o.warm || !device) {
      device.reset();
      device.emplace(options);
    }
    if (o.prebuild_pipelines)
      for (std::size_t i = 0; i < gpu::kEmbeddedShaderCount; ++i)
        device->context()->kernels().get(gpu::kEmbeddedShaders[i].first);
    if (o.prebuild)
      for (unsigned kind = 0; kind < 7; ++kind) {
        std::mt19937 rng(kind);
        const Request r = make_op(kind, rng, 4096);
        if (reference::check(r, device->run(r))) ++mismatches;
      }
    std::latch ready(o.threads);
    std::vector<std::thread> threads;
    for (int t = 0; t < o.threads; ++t)
      threads.emplace_back([&, t, iteration = done] {
        std::mt19937 rng(o.test_seeds ? 100u + static_cast<unsigned>(t)
                                      : o.seed * 1000003u + static_cast<unsigned>(iteration * o.threads + t));
        // The size first, then the op, as the test's random_op(rng, 1000 + rng() % 200000) draws.
        const auto next = [&] {
          const std::size_t n = 1000 + rng() % 200000;
          const unsigned kind = static_cast<unsigned>(rng());
          return make_op(o.only_dot ? 3u : kind, rng, n);
        };
        std::vector<Request> requests;
        if (!o.test_seeds)
          for (int k = 0; k < o.per_thread; ++k) requests.push_back(next());
        ready.arrive_and_wait();
        for (int k = 0; k < o.per_thread; ++k) {
          if (o.test_seeds) requests.assign(1, next());
          const Request& r = requests[o.test_seeds ? 0 : k];
          try {
            if (reference::check(r, device->run(r))) ++mismatches;
            ++batches;
          } catch (const Error& e) {
            hung(iteration, t, describe_op(r) + " of " + std::to_string(r.a.size()), e.what());
          }
        }
      });
    for (auto& t : threads) t.join();
  }
  std::printf("{\"hang\": false, \"iterations\": %d, \"batches\": %ld, \"mismatches\": %ld, \"seconds\": %.2f, "
              "\"threads\": %d, \"per_thread\": %d, \"warm\": %s, \"prebuild\": %s, \"direct\": %s, \"test_seeds\": %s, "
              "\"only_dot\": %s, \"prebuild_pipelines\": %s}\n",
              done, batches.load(), mismatches.load(),
              std::chrono::duration<double>(Clock::now() - start).count(), o.threads, o.per_thread,
              o.warm ? "true" : "false", o.prebuild ? "true" : "false", o.direct ? "true" : "false",
              o.test_seeds ? "true" : "false", o.only_dot ? "true" : "false", o.prebuild_pipelines ? "true" : "false");
  return mismatches.load() == 0 ? 0 : 1;
}
