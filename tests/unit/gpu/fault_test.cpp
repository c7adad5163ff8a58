// Device-level faults, injected: each fails the affected call with its typed error and the
// device keeps serving afterwards.
#include <gtest/gtest.h>

#include "gpubatch/batch_device.hpp"
#include "gpu/context.hpp"
#include "gpu/fault_injection.hpp"
#include "gpu/memory.hpp"
#include "gpu/device_identity.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/reference.hpp"
#include "test_device.hpp"

using namespace gpubatch;
using gpubatch::gpu::Fault;
using gpubatch::gpu::FaultInjector;

namespace {

ErrorCode code_of(Device& device, const Request& r) {
  try {
    device.run(r);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::internal;  // "no error" is never a fault's code
}

void expect_serves(Device& device, const Request& r) {
  const Result got = device.run(r);
  EXPECT_FALSE(reference::check(r, got).has_value());
}

struct Disarm {
  ~Disarm() { FaultInjector::disarm_all(); }
};

}  // namespace

TEST(Faults, DeviceLostOnSubmit) {
  Disarm d;
  const Request r = Request::relu({1, -2, 3});
  expect_serves(test_device(), r);
  FaultInjector::arm(Fault::submit_device_lost);
  EXPECT_EQ(code_of(test_device(), r), ErrorCode::device_lost);
  expect_serves(test_device(), r);
}

TEST(Faults, DeviceLostOnWait) {
  Disarm d;
  const Request r = Request::scale({1, -2, 3}, 2.0f);
  expect_serves(test_device(), r);
  FaultInjector::arm(Fault::wait_device_lost);
  EXPECT_EQ(code_of(test_device(), r), ErrorCode::device_lost);
  for (int i = 0; i < 5; ++i) expect_serves(test_device(), r);
}

TEST(Faults, OutOfDeviceMemoryOnANewBlock) {
  Disarm d;
  // Larger than a pool block: needs a fresh allocation, which fails.
  const Request big = Request::relu(std::vector<float>((80u << 20) / 4, 1.0f));
  // Where the device has memory the host maps beside the GPU (resizable BAR, or
  // GPUBATCH_NEAR_MEMORY=separate), the batch's inputs go there first, and a frame the device's
  // heap has no room for packs into system memory instead (reserve_near): the caller sees
  // out_of_memory only when that allocation fails too. (On the H200 the first failure alone was
  // absorbed, and the request served.)
  const bool near = test_device().context()->memory().has_near_upload();
  FaultInjector::arm(Fault::device_out_of_memory, near ? 2 : 1);
  EXPECT_EQ(code_of(test_device(), big), ErrorCode::out_of_memory);
  FaultInjector::disarm_all();  // a firing the batch's placement did not reach
  expect_serves(test_device(), big);
}

TEST(Faults, PipelineThatFailsToBuild) {
  Disarm d;
  Device fresh;  // its own pipelines: tanh is not built yet
  FaultInjector::arm(Fault::pipeline_build);
  EXPECT_EQ(code_of(fresh, Request::tanh({0.5f})), ErrorCode::compile_failed);
  expect_serves(fresh, Request::tanh({0.5f}));
}

TEST(Faults, HungBatchTripsTheWatchdog) {
  Disarm d;
  DeviceOptions options;
  options.batch_timeout = std::chrono::milliseconds(200);
  Device device(options);
  const Request r = Request::relu({1, 2});
  expect_serves(device, r);
  FaultInjector::arm(Fault::hang);
  const auto start = std::chrono::steady_clock::now();
  try {
    device.run(r);
    ADD_FAILURE() << "expected device_lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
    // The message says where the timeline stood: the hidden batch had run, so the counter had
    // reached its value (a hang on the device would show it below).
    const std::string what = e.what();
    EXPECT_NE(what.find("within 200 ms (watchdog); timeline at "), std::string::npos) << what;
    EXPECT_NE(what.find(" of "), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "the caller is not held";
  expect_serves(device, r);
}

TEST(Faults, HungGraphExecuteTripsTheWatchdog) {
  Disarm d;
  DeviceOptions options;
  options.batch_timeout = std::chrono::milliseconds(200);
  Device device(options);
  GpuCommandBatch graph(device);
  auto run_once = [&] {
    const auto out = graph.scale(graph.relu(graph.upload(std::vector<float>{-1.0f, 2.0f})), 2.0f);
    graph.execute();
    return graph.read(out);
  };
  EXPECT_EQ(run_once(), (std::vector<float>{0.0f, 4.0f}));  // pipelines built
  FaultInjector::arm(Fault::hang);
  const auto start = std::chrono::steady_clock::now();
  try {
    run_once();
    ADD_FAILURE() << "expected device_lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
    EXPECT_NE(std::string(e.what()).find("within 200 ms (watchdog"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "the caller is not held";
  // The hung submission did run (only its completion was hidden): the next execute waits for it
  // before reusing its memory, then serves.
  EXPECT_EQ(run_once(), (std::vector<float>{0.0f, 4.0f}));
}

// The buffers of an execute the watchdog gave up on stay allocated (the GPU may still use them)
// until a later execute has waited for it: device memory in use does not drop at the watchdog.
TEST(Faults, AHungGraphExecuteKeepsItsBuffers) {
  Disarm d;
  DeviceOptions options;
  options.batch_timeout = std::chrono::milliseconds(200);
  Device device(options);
  GraphOptions unfused;
  unfused.fuse = false;  // intermediates in device memory
  unfused.transfers = Transfers::copy;
  GpuCommandBatch graph(device, unfused);
  auto run_once = [&] {
    const auto out = graph.add(graph.scale(graph.relu(graph.upload(std::vector<float>(4096, -1.0f))), 2.0f),
                               graph.upload(std::vector<float>(4096, 3.0f)));
    graph.execute();
    return graph.read(out);
  };
  auto& memory = device.identity()->context()->memory();
  EXPECT_EQ(run_once(), std::vector<float>(4096, 3.0f));
  const auto in_use = memory.stats(gpu::MemoryKind::device_local).used_bytes;
  ASSERT_GT(in_use, 0u) << "the unfused copy path keeps intermediates in device memory";
  FaultInjector::arm(Fault::hang);
  EXPECT_THROW(run_once(), Error);
  EXPECT_GE(memory.stats(gpu::MemoryKind::device_local).used_bytes, in_use)
      << "buffers the hung submission may still use were freed";
  EXPECT_EQ(run_once(), std::vector<float>(4096, 3.0f));
}
