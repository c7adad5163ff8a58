// relu -> scale(2) -> add(y) on 1,000,000 floats: through GpuCommandBatch with fusion (one
// kernel), without fusion (three dispatches, one submission), and through the synchronous path
// (three submissions, each uploading and downloading). Target: fused >= 1.3x faster than sync.
// BM_ChainFusedHost*: the fused chain with x and y in pinned HostBuffers (Device::allocate_host)
// and the result delivered into one (deliver_to): no CPU copy of the data at all (target on an
// H100/H200: <= 0.4 ms for 1,000,000 floats); ...Host with the transfers the device calls for
// (copy engine on a discrete GPU), ...HostDirect with the kernels reading and writing the
// buffers across the bus.
#include <benchmark/benchmark.h>

#include <algorithm>
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

// The same chain on HostBuffers: read in place, result delivered in place.
void chain_through_host_buffers(benchmark::State& state, gpubatch::Transfers transfers) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const Inputs in(n);
  auto& device = bench_device();
  gpubatch::HostBuffer hx = device.allocate_host(n), hy = device.allocate_host(n), out = device.allocate_host(n);
  std::copy(in.x.begin(), in.x.end(), hx.begin());
  std::copy(in.y.begin(), in.y.end(), hy.begin());
  gpubatch::GpuCommandBatch g(device, gpubatch::GraphOptions{.transfers = transfers});
  for (auto _ : state) {
    auto r = g.add(g.scale(g.relu(g.upload(hx)), 2.0f), g.upload(hy));
    g.deliver_to(r, out);
    g.execute();
    benchmark::DoNotOptimize(out.data());
  }
  report(state, n, &g.last_execute());
  state.counters["direct"] = g.last_execute().direct ? 1.0 : 0.0;
}

void BM_ChainFused(benchmark::State& state) { chain_through_graph(state, true); }
void BM_ChainFusedHost(benchmark::State& state) { chain_through_host_buffers(state, gpubatch::Transfers::automatic); }
void BM_ChainFusedHostDirect(benchmark::State& state) { chain_through_host_buffers(state, gpubatch::Transfers::direct); }
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
BENCHMARK(BM_ChainFusedHost)->Arg(kDefaultLength)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainFusedHostDirect)->Arg(kDefaultLength)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainUnfused)->Arg(kDefaultLength)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainSync)->Arg(kDefaultLength)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
