// gpubatch-copy-rate: the raw rate of vkCmdCopyBuffer between pinned host memory (the staging
// memory the copy-engine path and HostBuffers use) and device-local memory, each way, on the
// transfer queue the library picked and on the compute queue. The yardstick for the request
// size sweep (bench/size_sweep.py): batched throughput is judged as a fraction of it. The
// "both_ways" figures run an upload on the transfer queue and a download on the compute queue at
// the same time (what a pipeline whose upload overlaps the previous batch's download can reach;
// PCIe carries each direction on its own lanes). With --import, the cost of importing a
// caller's own memory (Device::import_host: the driver pins its pages) and releasing it, per
// import, beside one thread's memcpy of the same bytes into staging memory: whether a large
// std::vector request could be read in place instead of copied.
//
//   gpubatch-copy-rate [--bytes N[,N...]] [--repeat R] [--device SEL] [--import] [--host-threads T[,T...]]
//   (JSON lines on stdout)
#include <atomic>
#include <thread>

#include <CLI/CLI.hpp>
#include <vulkan/vulkan.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/memory.hpp"
#include "gpu/vk_check.hpp"
#include "gpubatch/device.hpp"

using namespace gpubatch;
using Clock = std::chrono::steady_clock;

namespace {

struct Commands {
  VkDevice device;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  Commands(VkDevice d, std::uint32_t family) : device(d) {
    VkCommandPoolCreateInfo info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    info.queueFamilyIndex = family;
    gpu::check_vk(vkCreateCommandPool(d, &info, nullptr, &pool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    gpu::check_vk(vkAllocateCommandBuffers(d, &alloc, &cmd), "vkAllocateCommandBuffers");
  }
  ~Commands() { vkDestroyCommandPool(device, pool, nullptr); }
  // One command buffer holding `repeat` copies of `bytes` from src to dst.
  void record(const gpu::Allocation& src, const gpu::Allocation& dst, std::size_t bytes, int repeat) {
    vkResetCommandPool(device, pool, 0);
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vkBeginCommandBuffer(cmd, &begin);
    const VkBufferCopy region{src.offset(), dst.offset(), bytes};
    for (int i = 0; i < repeat; ++i) vkCmdCopyBuffer(cmd, src.buffer(), dst.buffer(), 1, &region);
    vkEndCommandBuffer(cmd);
  }
};

// GB/s of `repeat` copies in one submission, best of 3 (first submission excluded: warm-up).
double rate(detail::GpuContext& ctx, bool transfer_queue, Commands& c, std::size_t bytes, int repeat) {
  double best = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const auto t0 = Clock::now();
    if (transfer_queue) {
      const auto v = ctx.submit_upload(c.cmd);
      ctx.wait_upload(v, std::chrono::seconds(60));
    } else {
      const auto v = ctx.submit(c.cmd);
      ctx.wait(v, std::chrono::seconds(60));
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (trial > 0) best = std::max(best, double(bytes) * repeat / s / 1e9);
  }
  return best;
}

// GB/s each way of an upload (transfer queue) and a download (compute queue) submitted together,
// each `repeat` copies of `bytes`: bytes * repeat over the time until both are done, best of 3.
double both_ways_rate(detail::GpuContext& ctx, Commands& up, Commands& down, std::size_t bytes, int repeat) {
  double best = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const auto t0 = Clock::now();
    const auto u = ctx.submit_upload(up.cmd);
    const auto d = ctx.submit(down.cmd);
    ctx.wait_upload(u, std::chrono::seconds(60));
    ctx.wait(d, std::chrono::seconds(60));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (trial > 0) best = std::max(best, double(bytes) * repeat / s / 1e9);
  }
  return best;
}

// Microseconds per import_host + release of `bytes` of the process's own page-aligned memory,
// and per memcpy of as many bytes into staging (one thread), best of 3 rounds of `rounds`.
void import_cost(const Device& device, detail::GpuContext& ctx, std::size_t bytes, int rounds) {
  const std::size_t align = device.host_import_alignment();
  if (align == 0) return;
  const std::size_t size = (bytes + align - 1) / align * align;
  float* memory = static_cast<float*>(std::aligned_alloc(align, size));
  std::memset(memory, 1, size);
  auto staging = ctx.memory().allocate(gpu::MemoryKind::staging, size);
  double import_us = 1e30, copy_us = 1e30;
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) {
      HostBuffer b = device.import_host(std::span<float>(memory, size / sizeof(float)));
      if (b.size() == 0) std::abort();
    }
    import_us = std::min(import_us, std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / rounds);
    t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) std::memcpy(staging.mapped(), memory, size);
    copy_us = std::min(copy_us, std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / rounds);
  }
  std::printf("{\"probe\": \"import_cost\", \"device\": \"%s\", \"bytes\": %zu, \"import_release_us\": %.2f, "
              "\"memcpy_to_staging_us\": %.2f}\n",
              device.info().name.c_str(), size, import_us, copy_us);
  std::fflush(stdout);
  std::free(memory);
}

// The host's own memory bandwidth: `threads` threads, each copying between two buffers of its
// own (`bytes` each, touched first) for about half a second. A std::vector request's bytes cross
// host memory several times (copied into staging, read by the device, written back, copied out),
// so this bounds what vector requests can move however the GPU side goes.
void host_memcpy_rate(int threads, std::size_t bytes) {
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::uint64_t> copied(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> pool;
  std::atomic<int> ready{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<char> a(bytes, 1), b(bytes, 2);
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      std::uint64_t n = 0;
      for (bool flip = false; !stop.load(std::memory_order_relaxed); flip = !flip, n += bytes)
        std::memcpy(flip ? a.data() : b.data(), flip ? b.data() : a.data(), bytes);
      copied[static_cast<std::size_t>(t)] = n;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto t0 = Clock::now();
  go.store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop.store(true);
  for (auto& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  double total = 0;
  for (auto n : copied) total += static_cast<double>(n);
  std::printf("{\"probe\": \"host_memcpy\", \"threads\": %d, \"bytes\": %zu, \"copy_gbps\": %.2f, "
              "\"traffic_gbps\": %.2f}\n",
              threads, bytes, total / seconds / 1e9, 2 * total / seconds / 1e9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpubatch-copy-rate: vkCmdCopyBuffer rate between pinned host and device memory"};
  std::vector<std::size_t> sizes{1 << 20, 16 << 20, 64 << 20};
  int repeat = 8;
  std::string selector;
  app.add_option("--bytes", sizes, "bytes per copy (several: one line each)")->delimiter(',');
  app.add_option("--repeat", repeat, "copies per submission")->check(CLI::Range(1, 1000));
  app.add_option("--device", selector, "device index or name substring");
  bool imports = false;
  app.add_flag("--import", imports, "also the cost of importing caller memory, per size");
  std::vector<int> host_threads;
  app.add_option("--host-threads", host_threads,
                 "also the host's memcpy bandwidth with this many threads (several: one line each)")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  try {
    DeviceOptions options;
    options.selector = selector;
    Device device(options);
    auto ctx = device.context();
    for (std::size_t bytes : sizes) {
      auto host = ctx->memory().allocate(gpu::MemoryKind::staging, bytes);
      auto dev = ctx->memory().allocate(gpu::MemoryKind::device_local, bytes);
      std::memset(host.mapped(), 1, bytes);
      Commands on_transfer(ctx->device(), ctx->transfer_family()), on_compute(ctx->device(), ctx->queue_family());
      double r[2][2];  // [queue: transfer, compute][direction: h2d, d2h]
      for (int q = 0; q < 2; ++q) {
        Commands& c = q == 0 ? on_transfer : on_compute;
        c.record(host, dev, bytes, repeat);
        r[q][0] = rate(*ctx, q == 0, c, bytes, repeat);
        c.record(dev, host, bytes, repeat);
        r[q][1] = rate(*ctx, q == 0, c, bytes, repeat);
      }
      // Both ways at once: a second host and device buffer pair for the download.
      auto host2 = ctx->memory().allocate(gpu::MemoryKind::staging, bytes);
      auto dev2 = ctx->memory().allocate(gpu::MemoryKind::device_local, bytes);
      on_transfer.record(host, dev, bytes, repeat);
      on_compute.record(dev2, host2, bytes, repeat);
      const double both = both_ways_rate(*ctx, on_transfer, on_compute, bytes, repeat);
      std::printf(
          "{\"probe\": \"copy_rate\", \"device\": \"%s\", \"bytes\": %zu, \"repeat\": %d, "
          "\"dedicated_transfer_queue\": %s, \"transfer_queue\": {\"h2d_gbps\": %.3f, \"d2h_gbps\": %.3f}, "
          "\"compute_queue\": {\"h2d_gbps\": %.3f, \"d2h_gbps\": %.3f}, \"both_ways_gbps_each\": %.3f}\n",
          device.info().name.c_str(), bytes, repeat, ctx->dedicated_transfer_queue() ? "true" : "false", r[0][0],
          r[0][1], r[1][0], r[1][1], both);
      std::fflush(stdout);
      if (imports) import_cost(device, *ctx, bytes, 50);
    }
    for (int t : host_threads) host_memcpy_rate(std::max(1, t), std::size_t{64} << 20);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpubatch-copy-rate: %s\n", e.what());
    return 1;
  }
  return 0;
}
