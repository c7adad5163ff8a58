// relu -> scale(2) -> add(y) on 1,000,000 floats: through GpuCommandBatch with fusion (one
// kernel), without fusion (three dispatches, one submission), and through the synchronous path
// (three submissions, each uploading and downloading). Target: fused >= 1.3x faster than sync.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "gpubatch/device.hpp"
#include "gpubatch/graph.hpp"

namespace {

constexpr std::size_t kDefaultLength = 1'000'000;

gpubatch::Device& bench_device() {
  static gpubatch::Device device;
  return device;
}

struct Inputs {
  std::vector<float> x, y;
  explicit Inputs(std::size_t n) : x(n), y(n) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> d(-4.0f, 4.0f);
    for (auto& v : x) v = d(rng);
    for (auto& v : y) v = d(rng);
  }
};

void report(benchmark::State& state, std::size_t n, const gpubatch::ExecuteStats* stats) {
  // Bytes the caller hands over and gets back per chain: x and y in, the result out.
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float) * 3));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.counters["chains_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if (stats) {
    state.counters["dispatches"] = static_cast<double>(stats->dispatches);
    state.counters["uploads"] = static_cast<double>(stats->uploads);
    state.counters["downloads"] = static_cast<double>(stats->downloads);
  }
}

void chain_through_graph(benchmark::State& state, bool fuse) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Inputs in(n);
  gpubatch::GpuCommandBatch g(bench_device(), gpubatch::GraphOptions{.fuse = fuse});
  std::vector<float> out(n);
  for (auto _ : state) {
    auto x = g.upload(in.x);
    auto y = g.upload(in.y);
    auto r = g.add(g.scale(g.relu(x), 2.0f), y);
    g.execute();
    g.read_into(r, out);
    benchmark::DoNotOptimize(out.data());
  }
  report(state, n, &g.last_execute());
}

void BM_ChainFused(benchmark::State& state) { chain_through_graph(state, true); }
void BM_ChainUnfused(benchmark::State& state) { chain_through_graph(state, false); }

void BM_ChainSync(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Inputs in(n);
  auto& device = bench_device();
  const auto before = device.counters();
  for (auto _ : state) {
    auto r1 = device.run(gpubatch::Request::relu(in.x));
    auto r2 = device.run(gpubatch::Request::scale(std::move(r1.values), 2.0f));
    auto r3 = device.run(gpubatch::Request::add(std::move(r2.values), in.y));
    benchmark::DoNotOptimize(r3.values.data());
  }
  report(state, n, nullptr);
  const auto after = device.counters();
  const double iters = static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["dispatches"] = static_cast<double>(after.dispatches - before.dispatches) / iters;
  state.counters["uploads"] = static_cast<double>(after.uploads - before.uploads) / iters;
  state.counters["downloads"] = static_cast<double>(after.downloads - before.downloads) / iters;
}

}  // namespace

BENCHMARK(BM_ChainFused)->Arg(kDefaultLength)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainUnfused)->Arg(kDefaultLength)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainSync)->Arg(kDefaultLength)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
