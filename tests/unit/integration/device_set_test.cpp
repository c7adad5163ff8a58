// Device sets on the real Vulkan device (lavapipe in CI): "two devices" are one physical device
// opened twice (open_devices("0,0"): two Devices, two VkDevices). Balance under 16 threads, every
// member lost, HostBuffer routing, custom kernels and graphs on any member, device selection.
// Every result is checked against the CPU reference.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/fault_injection.hpp"
#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/reference.hpp"

using namespace gpubatch;
using namespace std::chrono_literals;
using gpubatch::gpu::Fault;
using gpubatch::gpu::FaultInjector;

namespace {

struct Disarm {
  Disarm() { FaultInjector::disarm_all(); }
  ~Disarm() { FaultInjector::disarm_all(); }
};

// Never freed, like the other integration tests' devices: ThreadSanitizer ends a process that
// unloads the Vulkan driver (a library it was told to ignore) before it exits.
std::vector<Device>& two_devices() {
  static std::vector<Device>& devices = *new std::vector<Device>(open_devices("0,0"));  // never freed
  return devices;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(DeviceSetVulkan, OpenDevicesOpensOnePhysicalDeviceTwice) {
  auto& d = two_devices();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NE(d[0].identity(), d[1].identity());  // two devices, not two copies of one
  EXPECT_EQ(d[0].info().name, d[1].info().name);
  EXPECT_EQ(open_devices("all").size(), Device::available().size());
  try {
    open_devices("no-such-device-anywhere");
    ADD_FAILURE() << "expected no_device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::no_device) << e.what();
  }
  EXPECT_THROW(open_devices("0,,0"), Error);
}

TEST(DeviceSetVulkan, BothDevicesTakeBatchesUnderSixteenThreads) {
  // At most 64 requests a batch: on a loaded machine the strand may first run when all 2,400
  // are queued, and one batch of them all could only go to one device.
  BatchConfig config = BatchConfig::adaptive();
  config.max_batch_size = 64;
  BatchExecutor executor(two_devices(), config);
  auto gpu = executor.handle();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<std::vector<float>, std::future<std::vector<float>>>> pending;
      for (int i = 0; i < 150; ++i) {
        auto x = random_floats(256, static_cast<unsigned>(t * 1000 + i));
        pending.emplace_back(x, gpu.relu(x));
      }
      for (auto& [x, f] : pending)
        if (f.get() != reference::run(Request::relu(x)).values) ++bad;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  executor.shutdown();
  const Stats st = executor.stats();
  ASSERT_EQ(st.devices.size(), 2u);
  EXPECT_GT(st.devices[0].batches, 0u);
  EXPECT_GT(st.devices[1].batches, 0u);
  EXPECT_EQ(st.devices[0].requests + st.devices[1].requests, 16u * 150u);
  EXPECT_EQ(st.devices[0].name, two_devices()[0].info().name);
  EXPECT_EQ(st.completed, 16u * 150u);
}

// Large requests on a set take the direct lane (their callers submit them; the set places each
// on the member with the least in hand) beside the strand's batches of small ones, under the
// validation layer; every result against the CPU reference.
TEST(DeviceSetVulkan, LargeRequestsTakeTheLaneOnEitherDevice) {
  BatchConfig config = BatchConfig::adaptive();
  config.direct_bytes = 256 << 10;  // 40,000-float requests take the lane (lavapipe is slow)
  ::setenv("GPUBATCH_HOST_DIRECT", "on", 1);  // a device of host cores keeps the lane off otherwise
  BatchExecutor executor(two_devices(), config);
  ::unsetenv("GPUBATCH_HOST_DIRECT");
  auto gpu = executor.handle();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        std::vector<std::pair<std::vector<float>, std::future<std::vector<float>>>> pending;
        for (int i = 0; i < 16; ++i) {  // small ones keep the executor busy
          auto x = random_floats(1 + static_cast<std::size_t>(i) * 31, static_cast<unsigned>(t * 100 + round * 20 + i));
          pending.emplace_back(x, gpu.relu(x));
        }
        auto big = random_floats(40000, static_cast<unsigned>(7000 + t * 10 + round));
        pending.emplace_back(big, gpu.relu(big));
        for (auto& [x, f] : pending)
          if (f.get() != reference::run(Request::relu(x)).values) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  executor.shutdown();
  EXPECT_EQ(bad.load(), 0);
  const Stats st = executor.stats();
  EXPECT_EQ(st.completed, 4u * 4u * 17u);
  EXPECT_GT(st.direct, 0u) << "callers keep the executor busy: large requests take the lane";
  EXPECT_EQ(st.devices[0].requests + st.devices[1].requests, st.completed) << "the lane's requests are placed too";
}

TEST(DeviceSetVulkan, OneDeviceInAListIsTheDirectPath) {
  BatchExecutor executor(std::vector<Device>{two_devices()[0]}, BatchConfig::adaptive());
  auto x = random_floats(64, 1);
  EXPECT_EQ(executor.handle().relu(x).get(), reference::run(Request::relu(x)).values);
  executor.shutdown();
  const Stats st = executor.stats();
  ASSERT_EQ(st.devices.size(), 1u);  // described by the executor: no set in between
  EXPECT_EQ(st.devices[0].batches, st.batches);
  EXPECT_THROW(BatchExecutor(std::vector<Device>{}), Error);
}

TEST(DeviceSetVulkan, EveryDeviceLostFailsWithDeviceLostThenRecovers) {
  Disarm disarm;
  BatchExecutor executor(two_devices(), BatchConfig::adaptive());
  auto gpu = executor.handle();
  FaultInjector::arm(Fault::wait_device_lost, 1 << 20);
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 64; ++i) futures.push_back(gpu.relu(random_floats(32, static_cast<unsigned>(i))));
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(120s), std::future_status::ready);
    try {
      f.get();
      ADD_FAILURE() << "a request succeeded while every wait failed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::device_lost) << e.what();
    }
  }
  FaultInjector::disarm_all();
  auto x = random_floats(32, 99);
  EXPECT_EQ(gpu.relu(x).get(), reference::run(Request::relu(x)).values);
}

TEST(DeviceSetVulkan, HostBufferRequestsRunOnTheDeviceThatAllocatedThem) {
  auto& d = two_devices();
  BatchExecutor executor(d, BatchConfig::adaptive());
  auto gpu = executor.handle();
  std::vector<HostBuffer> in, out;
  std::vector<std::vector<float>> expected;
  for (int i = 0; i < 16; ++i) {
    auto x = random_floats(128, static_cast<unsigned>(i));
    in.push_back(d[1].allocate_host(128));
    out.push_back(d[1].allocate_host(128));
    std::copy(x.begin(), x.end(), in.back().begin());
    expected.push_back(reference::run(Request::relu(x)).values);
  }
  std::vector<std::future<Result>> futures;
  for (int i = 0; i < 16; ++i)
    futures.push_back(gpu.submit(Request::from_host(Op::relu, in[i]).deliver_to(out[i])));
  for (int i = 0; i < 16; ++i) {
    futures[i].get();
    EXPECT_EQ(std::vector<float>(out[i].begin(), out[i].end()), expected[i]);
  }
  executor.shutdown();
  const Stats st = executor.stats();
  EXPECT_EQ(st.devices[0].requests, 0u);
  EXPECT_EQ(st.devices[1].requests, 16u);
}

// Buffers shared by both devices (gpubatch::allocate_host over the set's devices): their
// requests go to either device, and a batch lost on one runs again on the other; a request whose
// result lands in its own input is not re-run (it fails with device_lost instead).
TEST(DeviceSetVulkan, SharedHostBufferRequestsRunOnEitherDeviceAndAgainWhenOneIsLost) {
  Disarm disarm;
  auto& d = two_devices();
  BatchConfig config = BatchConfig::adaptive();
  config.max_batch_size = 4;
  BatchExecutor executor(d, config);
  auto gpu = executor.handle();
  std::vector<HostBuffer> in, out;
  std::vector<std::vector<float>> expected;
  for (int i = 0; i < 32; ++i) {
    auto x = random_floats(2048, static_cast<unsigned>(300 + i));
    in.push_back(allocate_host(d, x.size()));
    out.push_back(allocate_host(d, x.size()));
    std::copy(x.begin(), x.end(), in.back().begin());
    expected.push_back(reference::run(Request::relu(x)).values);
  }
  FaultInjector::arm(Fault::wait_device_lost);  // one wait lost: that batch runs on the other device
  std::vector<std::future<Result>> futures;
  for (int i = 0; i < 32; ++i) futures.push_back(gpu.submit(Request::from_host(Op::relu, in[i]).deliver_to(out[i])));
  for (int i = 0; i < 32; ++i) {
    futures[i].get();
    EXPECT_EQ(std::vector<float>(out[i].begin(), out[i].end()), expected[i]) << i;
  }
  Stats st = executor.stats();
  EXPECT_GT(st.devices[0].requests, 0u);
  EXPECT_GT(st.devices[1].requests, 0u);
  EXPECT_EQ(st.devices[0].failovers + st.devices[1].failovers, 1u);
  EXPECT_EQ(st.devices[0].reruns + st.devices[1].reruns, 1u);
  EXPECT_EQ(st.failed, 0u);

  HostBuffer inplace = allocate_host(d, 64);
  std::fill(inplace.begin(), inplace.end(), 3.0f);
  FaultInjector::arm(Fault::wait_device_lost);
  try {
    gpu.submit(Request::from_host(Op::scale, inplace, {}, 2.0f).deliver_to(inplace)).get();
    ADD_FAILURE() << "expected device_lost: a re-run would read its own partial results";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost) << e.what();
  }
  // Without a loss it runs as any request does. (A fresh buffer: the injected loss leaves the
  // "lost" attempt running on the device, which may still write the first one.)
  HostBuffer again = allocate_host(d, 64);
  std::fill(again.begin(), again.end(), 3.0f);
  gpu.submit(Request::from_host(Op::scale, again, {}, 2.0f).deliver_to(again)).get();
  EXPECT_EQ(std::vector<float>(again.begin(), again.end()), std::vector<float>(64, 6.0f));
}

// A lone large request from buffers both devices share runs in two ranges, one per device, under
// the validation layer: relu, and add with both inputs shared; every value against the reference.
TEST(DeviceSetVulkan, ALoneLargeSharedRequestRunsInRangesOnBothDevices) {
  auto& d = two_devices();
  ::setenv("GPUBATCH_SET_SPREAD_BYTES", "1048576", 1);
  BatchExecutor executor(d, BatchConfig::adaptive());
  ::unsetenv("GPUBATCH_SET_SPREAD_BYTES");
  auto gpu = executor.handle();
  const std::size_t n = 300'000;
  const auto xv = random_floats(n, 41), yv = random_floats(n, 42);
  HostBuffer x = allocate_host(d, n), y = allocate_host(d, n), out = allocate_host(d, n);
  std::copy(xv.begin(), xv.end(), x.begin());
  std::copy(yv.begin(), yv.end(), y.begin());
  gpu.submit(Request::from_host(Op::relu, x).deliver_to(out)).get();
  EXPECT_EQ(std::vector<float>(out.begin(), out.end()), reference::run(Request::relu(xv)).values);
  Stats st = executor.stats();
  EXPECT_EQ(st.devices[0].requests, 1u);
  EXPECT_EQ(st.devices[1].requests, 1u);
  gpu.submit(Request::from_hosts(Op::add, x, y).deliver_to(out)).get();
  EXPECT_EQ(std::vector<float>(out.begin(), out.end()), reference::run(Request::add(xv, yv)).values);
  st = executor.stats();
  EXPECT_EQ(st.devices[0].requests + st.devices[1].requests, 4u);
  EXPECT_EQ(st.completed, 2u);
}

TEST(DeviceSetVulkan, AKernelThatOptedOutOfReRunsIsNotReRun) {
  Disarm disarm;
  auto& d = two_devices();
  KernelOptions once;
  once.rerun_on_loss = false;
  const KernelHandle k = register_kernel(d[0], "set_once", KernelKind::elementwise, "return x + p;", once);
  BatchExecutor executor(d, BatchConfig::adaptive());
  auto gpu = executor.handle();
  FaultInjector::arm(Fault::wait_device_lost);
  try {
    gpu.submit(Request::custom(k, {1.0f, 2.0f}, {}, 1.0f)).get();
    ADD_FAILURE() << "expected device_lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost) << e.what();
  }
  FaultInjector::arm(Fault::wait_device_lost);  // a plain request lost the same way runs again
  EXPECT_EQ(gpu.relu({-1.0f, 2.0f}).get(), (std::vector<float>{0.0f, 2.0f}));
  EXPECT_EQ(gpu.submit(Request::custom(k, {1.0f, 2.0f}, {}, 1.0f)).get().values, (std::vector<float>{2.0f, 3.0f}));
}

TEST(DeviceSetVulkan, CustomKernelsAndGraphsWorkOnEveryDevice) {
  auto& d = two_devices();
  const KernelHandle cube = register_kernel(d[0], "set_cube", KernelKind::elementwise, "return x * x * x + p;");
  auto x = random_floats(100, 5);
  std::vector<float> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * x[i] * x[i] + 0.5f;
  // Registered on device 0, run on device 1 directly...
  const Result direct = d[1].run(Request::custom(cube, x, {}, 0.5f));
  ASSERT_EQ(direct.values.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(direct.values[i], want[i], 1e-3f * (1 + std::abs(want[i])));
  // ... and through the set, wherever its batches are placed.
  BatchExecutor executor(d, BatchConfig::adaptive());
  auto gpu = executor.handle();
  std::vector<std::future<Result>> futures;
  for (int i = 0; i < 64; ++i) futures.push_back(gpu.submit(Request::custom(cube, x, {}, 0.5f)));
  for (auto& f : futures) {
    const Result r = f.get();
    ASSERT_EQ(r.values.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.values[i], want[i], 1e-3f * (1 + std::abs(want[i])));
  }
  // A graph on either device, with the kernel registered there by name.
  for (Device& device : d) {
    register_kernel(device, "set_cube", KernelKind::elementwise, "return x * x * x + p;");
    GpuCommandBatch graph(device);
    const auto y = graph.custom("set_cube", graph.relu(graph.upload(x)), 0.5f);
    graph.execute();
    const std::vector<float> got = graph.read(y);
    ASSERT_EQ(got.size(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float r = std::max(0.0f, x[i]);
      EXPECT_NEAR(got[i], r * r * r + 0.5f, 1e-3f * (1 + r * r * r));
    }
  }
}

}  // namespace

// On a device set, bytes of HostBuffers weigh in full against max_batch_bytes (executor_core.hpp,
// in_place_light_): a lone large HostBuffer request is spread over the set's idle members, and a
// batch of several would go whole to one. Sixteen relu requests of 2,048 floats from and into
// buffers both devices share, max_batch_bytes 64 KiB: four batches, as vectors take on one device
// (HostBufferExecutor.BytesInPlaceWeighAnEighthOfMaxBatchBytes has one batch there).
TEST(DeviceSetVulkan, HostBufferBytesWeighInFullOnASet) {
  auto& d = two_devices();
  BatchConfig config = BatchConfig::preset("adaptive");
  config.policy = FlushPolicy::deadline;
  config.max_batch_size = 16;
  config.max_wait = std::chrono::milliseconds(100);
  config.max_batch_bytes = 64 * 1024;
  BatchExecutor executor(d, config);
  auto handle = executor.handle();
  std::vector<HostBuffer> ins, outs;
  std::vector<std::future<Result>> futures;
  for (int i = 0; i < 16; ++i) {
    const auto x = random_floats(2048, static_cast<unsigned>(41 + i));
    ins.push_back(allocate_host(d, x.size()));
    outs.push_back(allocate_host(d, x.size()));
    std::copy(x.begin(), x.end(), ins.back().begin());
    futures.push_back(handle.submit(Request::from_host(Op::relu, ins.back()).deliver_to(outs.back())));
  }
  for (std::size_t i = 0; i < futures.size(); ++i) {
    futures[i].get();
    const Result got{std::vector<float>(outs[i].begin(), outs[i].end())};
    const auto bad = reference::check(Request::relu(std::vector<float>(ins[i].begin(), ins[i].end())), got);
    EXPECT_FALSE(bad) << "#" << i << ": " << *bad;
  }
  EXPECT_EQ(executor.stats().batches, 4u);
}
