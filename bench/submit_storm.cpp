// gpubatch-submit-storm: tiny submissions at a fixed rate on one queue, with no executor, no
// batching and no callers: one thread submits (a pre-recorded vkCmdFillBuffer of 4 KiB, each
// signalling the next timeline value), one thread waits for each value in turn (blocking in the
// driver or polling the counter), optional threads burn CPU. It tells whether the long "device"
// spans of an executor under load (docs/BENCHMARKS.md, 2026-11-26) happen to bare submissions at
// the same rate, and whether busy cores bring them.
//
//   gpubatch-submit-storm [--rate R] [--seconds S] [--burn N] [--poll] [--host] [--device SEL]
//
// --host fills host memory (readback) across the bus instead of device memory, as the executor's
// direct-path kernels write their results. --rerecord gives each ring slot a transient command
// pool of its own, reset and recorded again before every submission, as the executor's batch
// frames do (the default records each slot once and submits it again and again).
//
// One JSON object: vkQueueSubmit's duration and the span from its return to the value being seen
// (p50, p99, p99.9, max, and how many spans passed 1 and 5 ms).
#include <CLI/CLI.hpp>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/memory.hpp"
#include "gpu/vk_check.hpp"
#include "gpubatch/device.hpp"

using namespace gpubatch;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kRing = 64;            // command buffers, so at most 64 submissions in flight
constexpr VkDeviceSize kFillBytes = 4096;    // each fills its own 4 KiB of a device buffer

struct Percentiles {
  double p50, p99, p999, max;
};
Percentiles percentiles(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0, 0};
  std::sort(v.begin(), v.end());
  auto at = [&](double p) { return v[std::min(v.size() - 1, static_cast<std::size_t>(p * double(v.size())))]; };
  return {at(0.5), at(0.99), at(0.999), v.back()};
}

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpubatch-submit-storm: bare tiny submissions at a fixed rate"};
  double rate = 14000, seconds = 3;
  int burn = 0;
  bool poll = false, host = false, rerecord = false;
  std::string selector;
  app.add_option("--rate", rate, "submissions per second")->check(CLI::Range(1.0, 1e6));
  app.add_option("--seconds", seconds, "how long")->check(CLI::Range(0.01, 600.0));
  app.add_option("--burn", burn, "threads that keep a core busy meanwhile")->check(CLI::Range(0, 1024));
  app.add_flag("--poll", poll, "the waiter polls the timeline counter instead of blocking in the driver");
  app.add_flag("--host", host, "fill host memory across the bus instead of device memory");
  app.add_flag("--rerecord", rerecord, "reset and record each command buffer before every submission");
  app.add_option("--device", selector, "device index or name substring");
  CLI11_PARSE(app, argc, argv);
  try {
    DeviceOptions options;
    options.selector = selector;
    Device device(options);
    auto ctx = device.context();
    VkDevice dev = ctx->device();
    auto target = ctx->memory().allocate(host ? gpu::MemoryKind::readback : gpu::MemoryKind::device_local,
                                         kRing * kFillBytes);
    // One transient pool per ring slot (the executor's frames each have one).
    std::vector<VkCommandPool> pools(kRing);
    std::vector<VkCommandBuffer> ring(kRing);
    for (std::size_t i = 0; i < kRing; ++i) {
      VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
      pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
      pool_info.queueFamilyIndex = ctx->queue_family();
      gpu::check_vk(vkCreateCommandPool(dev, &pool_info, nullptr, &pools[i]), "vkCreateCommandPool");
      VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      alloc.commandPool = pools[i];
      alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      alloc.commandBufferCount = 1;
      gpu::check_vk(vkAllocateCommandBuffers(dev, &alloc, &ring[i]), "vkAllocateCommandBuffers");
    }
    const auto record = [&](std::size_t i, bool one_time) {
      if (one_time) gpu::check_vk(vkResetCommandPool(dev, pools[i], 0), "vkResetCommandPool");
      VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      begin.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
      vkBeginCommandBuffer(ring[i], &begin);
      vkCmdFillBuffer(ring[i], target.buffer(), target.offset() + i * kFillBytes, kFillBytes, static_cast<std::uint32_t>(i));
      vkEndCommandBuffer(ring[i]);
    };
    if (!rerecord)
      for (std::size_t i = 0; i < kRing; ++i) record(i, false);

    const auto count = static_cast<std::size_t>(rate * seconds);
    std::vector<Clock::time_point> begun(count), returned(count), seen(count);
    std::vector<std::uint64_t> value(count);
    std::atomic<std::size_t> submitted{0}, completed{0};
    std::atomic<bool> stop{false};
    std::vector<std::jthread> burners;
    for (int i = 0; i < burn; ++i)
      burners.emplace_back([&stop] {
        std::uint64_t x = 1;
        while (!stop.load(std::memory_order_relaxed)) x = x * 6364136223846793005ull + 1442695040888963407ull;
        if (x == 42) std::puts("");
      });

    std::jthread waiter([&] {
      for (std::size_t i = 0; i < count; ++i) {
        while (submitted.load(std::memory_order_acquire) <= i) std::this_thread::yield();
        if (poll) {
          while (ctx->completed_value() < value[i]) {
          }
        } else {
          while (!ctx->wait(value[i], std::chrono::seconds(1))) {
          }
        }
        seen[i] = Clock::now();
        completed.store(i + 1, std::memory_order_release);
      }
    });
    const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
    auto next = Clock::now();
    for (std::size_t i = 0; i < count; ++i) {
      // At most kRing in flight: a command buffer is reused only after its last use completed.
      while (i >= kRing && completed.load(std::memory_order_acquire) <= i - kRing) std::this_thread::yield();
      while (Clock::now() < next) {
        if (next - Clock::now() > std::chrono::microseconds(60)) std::this_thread::sleep_until(next - std::chrono::microseconds(50));
      }
      next += interval;
      begun[i] = Clock::now();
      if (rerecord) record(i % kRing, true);
      value[i] = ctx->submit(ring[i % kRing]);
      returned[i] = Clock::now();
      submitted.store(i + 1, std::memory_order_release);
    }
    waiter.join();
    stop = true;
    burners.clear();
    for (VkCommandPool pool : pools) vkDestroyCommandPool(dev, pool, nullptr);

    std::vector<double> submit_us(count), span_us(count);
    std::size_t over1 = 0, over5 = 0;
    for (std::size_t i = 0; i < count; ++i) {
      submit_us[i] = us(returned[i] - begun[i]);
      span_us[i] = us(seen[i] - returned[i]);
      over1 += span_us[i] > 1000;
      over5 += span_us[i] > 5000;
    }
    const Percentiles s = percentiles(submit_us), d = percentiles(span_us);
    std::printf(
        "{\"probe\": \"submit_storm\", \"device\": \"%s\", \"rate\": %.0f, \"achieved_rate\": %.0f, \"submissions\": %zu, "
        "\"burn\": %d, \"waiter\": \"%s\", \"target\": \"%s\", \"rerecord\": %s, \"submit_us\": {\"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f}, "
        "\"span_us\": {\"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f}, \"spans_over_1ms\": %zu, "
        "\"spans_over_5ms\": %zu}\n",
        device.info().name.c_str(), rate, double(count) / std::max(1e-9, us(returned.back() - begun.front()) / 1e6), count,
        burn, poll ? "poll" : "block", host ? "host" : "device", rerecord ? "true" : "false", s.p50, s.p99, s.p999, s.max, d.p50, d.p99, d.p999, d.max, over1, over5);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpubatch-submit-storm: %s\n", e.what());
    return 1;
  }
  return 0;
}
