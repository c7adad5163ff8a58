// gpubatch_bench: the numbers users pick presets and batch sizes from. Every benchmark drives
// the real path (handles -> queue -> strand -> Vulkan -> futures) and checks results against the
// CPU reference outside the timed region.
//   BM_BatchSize/N          requests per batch fixed at N (size flushes), 256-float relu
//   BM_Submitters/P/T       preset P (0 latency, 1 balanced, 2 throughput, 3 adaptive), T threads
//   BM_Unbatched/T          the synchronous path, T threads: the baseline
//   BM_RequestSize/F        F floats per request, adaptive preset: requests/s and bytes/s
// Chains (fused graph vs unfused vs synchronous) are in graph_bench.cpp.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "gpubatch/config.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"

using namespace gpubatch;
using Clock = std::chrono::steady_clock;

namespace {

Device& device() {
  static Device d;
  return d;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct LoadResult {
  double seconds = 0;
  std::vector<double> latencies_us;
  bool verified = true;
};

// `threads` threads each submit `per_thread` relu requests of `floats` floats, keeping
// `inflight` outstanding; one result in 64 is verified against the CPU reference (all are
// verified by gpubatch-load; here the check stays off the hot loop's critical path).
template <typename Submit>
LoadResult run_load(Submit submit, int threads, std::size_t per_thread, std::size_t floats, int inflight) {
  const auto input = random_floats(floats, 7);
  std::vector<std::vector<double>> lat(threads);
  std::atomic<bool> ok{true};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::deque<std::pair<std::future<Result>, Clock::time_point>> pending;
      lat[t].reserve(per_thread);
      auto finish = [&] {
        auto& [f, began] = pending.front();
        Result r = f.get();
        lat[t].push_back(std::chrono::duration<double, std::micro>(Clock::now() - began).count());
        if (lat[t].size() % 64 == 1 && reference::check(Request::relu(input), r)) ok = false;
        pending.pop_front();
      };
      for (std::size_t i = 0; i < per_thread; ++i) {
        if (static_cast<int>(pending.size()) >= inflight) finish();
        pending.emplace_back(submit(Request::relu(input)), Clock::now());
      }
      while (!pending.empty()) finish();
    });
  for (auto& th : pool) th.join();
  LoadResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& l : lat) r.latencies_us.insert(r.latencies_us.end(), l.begin(), l.end());
  r.verified = ok;
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * double(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void report(benchmark::State& state, const std::vector<LoadResult>& rounds, std::size_t requests_per_round,
            std::size_t bytes_per_request) {
  std::vector<double> all;
  double seconds = 0;
  bool verified = true;
  for (auto& r : rounds) {
    all.insert(all.end(), r.latencies_us.begin(), r.latencies_us.end());
    seconds += r.seconds;
    verified = verified && r.verified;
  }
  const double requests = double(requests_per_round) * double(rounds.size());
  state.counters["requests_per_s"] = requests / seconds;
  state.counters["bytes_per_s"] = requests * double(bytes_per_request) / seconds;
  state.counters["p50_us"] = percentile(all, 0.5);
  state.counters["p99_us"] = percentile(all, 0.99);
  state.counters["verified"] = verified ? 1 : 0;
  if (!verified) state.SkipWithError("a result did not match the CPU reference");
}

// The synchronous path in the shape run_load() expects.
std::future<Result> run_sync(Request r) {
  std::promise<Result> p;
  p.set_value(device().run(r));
  return p.get_future();
}

BatchConfig preset_by_index(int i) {
  static const char* names[] = {"latency", "balanced", "throughput", "adaptive"};
  return BatchConfig::preset(names[i]);
}

std::size_t requests_for(std::size_t floats) {
  // Keep a round around 8 MiB of input so the large sizes finish in reasonable time.
  return std::clamp<std::size_t>((8u << 20) / (floats * 4), 64, 8192);
}

void BM_BatchSize(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  BatchConfig config = BatchConfig::throughput();
  config.max_batch_size = batch;
  config.max_wait = std::chrono::milliseconds(50);  // flush on size, not on time
  config.queue_capacity = std::max<std::size_t>(config.queue_capacity, 4 * batch);
  BatchExecutor executor(device(), config);
  auto handle = executor.handle();
  const int threads = 2;
  const std::size_t per_thread = std::max<std::size_t>(4 * batch, 2048) / threads;
  std::vector<LoadResult> rounds;
  for (auto _ : state) {
    rounds.push_back(run_load([&](Request r) { return handle.submit(std::move(r)); }, threads, per_thread, 256,
                              static_cast<int>(batch)));
    state.SetIterationTime(rounds.back().seconds);
  }
  report(state, rounds, per_thread * threads, 256 * 4);
  const Stats s = executor.stats();
  state.counters["mean_batch"] = s.mean_batch_size;
}
BENCHMARK(BM_BatchSize)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_Submitters(benchmark::State& state) {
  BatchExecutor executor(device(), preset_by_index(static_cast<int>(state.range(0))));
  auto handle = executor.handle();
  const int threads = static_cast<int>(state.range(1));
  // Enough outstanding work to fill the preset's batches: this measures what a preset can carry;
  // bench/sweep.py measures latency at lighter loads.
  const std::size_t per_thread = 65536 / threads;
  const int inflight = static_cast<int>(std::max<std::size_t>(executor.config().max_batch_size / threads, 64));
  std::vector<LoadResult> rounds;
  for (auto _ : state) {
    rounds.push_back(run_load([&](Request r) { return handle.submit(std::move(r)); }, threads, per_thread, 256, inflight));
    state.SetIterationTime(rounds.back().seconds);
  }
  report(state, rounds, per_thread * threads, 256 * 4);
  state.counters["mean_batch"] = executor.stats().mean_batch_size;
}
BENCHMARK(BM_Submitters)
    ->ArgsProduct({{0, 1, 2, 3}, {1, 2, 4, 8, 16}})
    ->ArgNames({"preset", "threads"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_Unbatched(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::size_t per_thread = 2048 / threads;
  std::vector<LoadResult> rounds;
  for (auto _ : state) {
    rounds.push_back(run_load(run_sync, threads, per_thread, 256, 1));
    state.SetIterationTime(rounds.back().seconds);
  }
  report(state, rounds, per_thread * threads, 256 * 4);
}
BENCHMARK(BM_Unbatched)->Arg(1)->Arg(2)->Arg(16)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_RequestSize(benchmark::State& state) {
  const auto floats = static_cast<std::size_t>(state.range(0));
  // adaptive: batches as large as the load makes them, never waiting for a deadline.
  BatchExecutor executor(device(), BatchConfig::adaptive());
  auto handle = executor.handle();
  const int threads = 2;
  const std::size_t per_thread = requests_for(floats) / threads;
  std::vector<LoadResult> rounds;
  for (auto _ : state) {
    rounds.push_back(run_load([&](Request r) { return handle.submit(std::move(r)); }, threads, per_thread, floats,
                              static_cast<int>(std::min<std::size_t>(per_thread, 256))));
    state.SetIterationTime(rounds.back().seconds);
  }
  // Bytes moved per request: input up and output down.
  report(state, rounds, per_thread * threads, floats * 4 * 2);
  state.counters["mean_batch"] = executor.stats().mean_batch_size;
}
BENCHMARK(BM_RequestSize)->RangeMultiplier(4)->Range(16, 1 << 20)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_RequestSizeUnbatched(benchmark::State& state) {
  const auto floats = static_cast<std::size_t>(state.range(0));
  const std::size_t per_thread = std::max<std::size_t>(requests_for(floats) / 8, 16);
  std::vector<LoadResult> rounds;
  for (auto _ : state) {
    rounds.push_back(run_load(run_sync, 1, per_thread, floats, 1));
    state.SetIterationTime(rounds.back().seconds);
  }
  report(state, rounds, per_thread, floats * 4 * 2);
}
BENCHMARK(BM_RequestSizeUnbatched)->RangeMultiplier(4)->Range(16, 1 << 20)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
