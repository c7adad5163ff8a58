// gpubatch-copy-rate: the raw rate of vkCmdCopyBuffer between pinned host memory (the staging
// memory the copy-engine path and HostBuffers use) and device-local memory, each way, on the
// transfer queue the library picked and on the compute queue. The yardstick for the request
// size sweep (bench/size_sweep.py): batched throughput is judged as a fraction of it.
//
//   gpubatch-copy-rate [--bytes N[,N...]] [--repeat R] [--device SEL]   (JSON lines on stdout)
#include <CLI/CLI.hpp>
#include <vulkan/vulkan.h>

#include <chrono>
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpubatch-copy-rate: vkCmdCopyBuffer rate between pinned host and device memory"};
  std::vector<std::size_t> sizes{1 << 20, 16 << 20, 64 << 20};
  int repeat = 8;
  std::string selector;
  app.add_option("--bytes", sizes, "bytes per copy (several: one line each)")->delimiter(',');
  app.add_option("--repeat", repeat, "copies per submission")->check(CLI::Range(1, 1000));
  app.add_option("--device", selector, "device index or name substring");
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
      std::printf(
          "{\"probe\": \"copy_rate\", \"device\": \"%s\", \"bytes\": %zu, \"repeat\": %d, "
          "\"dedicated_transfer_queue\": %s, \"transfer_queue\": {\"h2d_gbps\": %.3f, \"d2h_gbps\": %.3f}, "
          "\"compute_queue\": {\"h2d_gbps\": %.3f, \"d2h_gbps\": %.3f}}\n",
          device.info().name.c_str(), bytes, repeat, ctx->dedicated_transfer_queue() ? "true" : "false", r[0][0],
          r[0][1], r[1][0], r[1][1]);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpubatch-copy-rate: %s\n", e.what());
    return 1;
  }
  return 0;
}
