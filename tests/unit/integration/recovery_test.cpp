// Faults through the executor on a real Vulkan device (FaultInjector): device lost on submit or
// wait fails that batch with device_lost and the executor keeps serving; a device that is really
// lost (forced here with Fault::device_lost_check) is re-created; out of memory halves the batch;
// a hung batch trips the batch_timeout watchdog instead of holding its callers.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/fault_injection.hpp"
#include "gpu/vulkan_batch_device.hpp"
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

Device& shared_device() {
  static Device d;
  return d;
}

struct Disarm {
  Disarm() { FaultInjector::disarm_all(); }
  ~Disarm() { FaultInjector::disarm_all(); }
};

BatchConfig batches_of(std::size_t n) {
  BatchConfig c = BatchConfig::balanced();
  c.max_batch_size = n;
  c.max_wait = 60s;  // flush on size: the n requests sent together are one batch
  return c;
}

std::vector<Request> mixed_requests() {
  return {Request::relu({1.0f, -2.0f, 3.0f}), Request::dot({1.0f, 2.0f}, {3.0f, 4.0f}),
          Request::matmul({1, 2, 3, 4}, {5, 6, 7, 8}, 2, 2, 2), chain({-1.0f, 2.0f}).relu().scale(3.0f)};
}

std::optional<ErrorCode> code_of(std::future<Result>& f) {
  if (f.wait_for(120s) != std::future_status::ready) {
    ADD_FAILURE() << "a future did not resolve";
    return std::nullopt;
  }
  try {
    f.get();
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

// Submits the requests together (one batch of their number) and checks every value.
void expect_serves(BatchedGpuHandle& gpu, const std::vector<Request>& requests) {
  std::vector<std::future<Result>> futures;
  for (const Request& r : requests) futures.push_back(gpu.submit(r));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_EQ(futures[i].wait_for(120s), std::future_status::ready);
    const Result got = futures[i].get();
    EXPECT_FALSE(reference::check(requests[i], got).has_value()) << describe_op(requests[i]);
  }
}

std::vector<ErrorCode> codes_of_batch(BatchedGpuHandle& gpu, const std::vector<Request>& requests) {
  std::vector<std::future<Result>> futures;
  for (const Request& r : requests) futures.push_back(gpu.submit(r));
  std::vector<ErrorCode> codes;
  for (auto& f : futures) {
    const auto c = code_of(f);
    codes.push_back(c.value_or(ErrorCode::internal));
    if (!c) ADD_FAILURE() << "expected an error";
  }
  return codes;
}

gpu::VulkanBatchDevice& vulkan(Device& d) {
  return dynamic_cast<gpu::VulkanBatchDevice&>(*d.batch_device());
}

}  // namespace

TEST(Recovery, InjectedDeviceLostOnSubmitFailsTheBatchAndTheExecutorKeepsServing) {
  Disarm d;
  BatchExecutor executor(shared_device(), batches_of(4));
  auto gpu = executor.handle();
  const auto requests = mixed_requests();
  expect_serves(gpu, requests);
  FaultInjector::arm(Fault::submit_device_lost);
  for (ErrorCode c : codes_of_batch(gpu, requests)) EXPECT_EQ(c, ErrorCode::device_lost);
  EXPECT_EQ(vulkan(shared_device()).recreations(), 0u) << "an injected fault does not lose the device";
  for (int i = 0; i < 3; ++i) expect_serves(gpu, requests);
}

TEST(Recovery, InjectedDeviceLostOnWaitFailsTheBatchAndTheExecutorKeepsServing) {
  Disarm d;
  BatchExecutor executor(shared_device(), batches_of(4));
  auto gpu = executor.handle();
  const auto requests = mixed_requests();
  expect_serves(gpu, requests);
  FaultInjector::arm(Fault::wait_device_lost);
  for (ErrorCode c : codes_of_batch(gpu, requests)) EXPECT_EQ(c, ErrorCode::device_lost);
  EXPECT_EQ(vulkan(shared_device()).recreations(), 0u);
  for (int i = 0; i < 3; ++i) expect_serves(gpu, requests);
}

// The message a batch's device error reaches its callers with names its code once, although it
// is wrapped on its way (the executor adds the request and the batch).
TEST(Recovery, ADeviceErrorNamesItsCodeOnce) {
  Disarm d;
  BatchExecutor executor(shared_device(), batches_of(1));
  auto gpu = executor.handle();
  FaultInjector::arm(Fault::submit_device_lost);
  auto lost = gpu.submit(Request::relu({1.0f}));
  ASSERT_EQ(lost.wait_for(120s), std::future_status::ready);
  try {
    lost.get();
    ADD_FAILURE() << "expected device_lost";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
    EXPECT_EQ(what.rfind("device_lost: relu request", 0), 0u) << what;
    EXPECT_EQ(what.find("device_lost", 1), std::string::npos) << what;
    EXPECT_NE(what.find("vkQueueSubmit (injected)"), std::string::npos) << what;
  }
}

TEST(Recovery, ALostDeviceIsReCreatedAndServesEveryKindOfRequest) {
  Disarm d;
  (void)shared_device();  // keeps lavapipe loaded when `device` goes (ThreadSanitizer needs that)
  Device device;  // its own: this test replaces its VkDevice
  const KernelHandle twice = register_kernel(device, "twice", KernelKind::elementwise, "return 2.0 * x;");
  BatchExecutor executor(device, batches_of(4));
  auto gpu = executor.handle();
  const auto requests = mixed_requests();
  expect_serves(gpu, requests);
  const auto old_context = vulkan(device).current_context();
  FaultInjector::arm(Fault::wait_device_lost);
  FaultInjector::arm(Fault::device_lost_check);  // recover() finds the device lost
  for (ErrorCode c : codes_of_batch(gpu, requests)) EXPECT_EQ(c, ErrorCode::device_lost);
  EXPECT_EQ(vulkan(device).recreations(), 1u);
  EXPECT_NE(vulkan(device).current_context(), old_context) << "a new VkDevice";
  EXPECT_NE(vulkan(device).current_context()->device(), VK_NULL_HANDLE);
  for (int i = 0; i < 3; ++i) expect_serves(gpu, requests);
  // Built-in, fused and custom pipelines are all rebuilt on the new device.
  auto custom = gpu.submit(Request::custom(twice, {1.0f, -2.0f}));
  auto tanh = gpu.tanh({0.5f});
  auto gelu = gpu.gelu({0.5f});
  const Request interp_request = Request::interpolate(std::vector<std::uint8_t>(16, 0x00),
                                                      std::vector<std::uint8_t>(16, 0xFF), 0.5f,
                                                      InterpolationMode::slerp);
  auto interp = gpu.submit(interp_request);
  EXPECT_EQ(custom.get().values, (std::vector<float>{2.0f, -4.0f}));
  EXPECT_FALSE(reference::check(Request::tanh({0.5f}), Result{{tanh.get()}, {}}).has_value());
  EXPECT_FALSE(reference::check(Request::gelu({0.5f}), Result{{gelu.get()}, {}}).has_value());
  const Result interp_result = interp.get();
  EXPECT_EQ(interp_result.states.size(), 16u);
  EXPECT_FALSE(reference::check(interp_request, interp_result).has_value());
  // The synchronous path uses the new device too.
  EXPECT_EQ(device.run(Request::relu({-1.0f, 1.0f})).values, (std::vector<float>{0.0f, 1.0f}));
}

// One device identity: after the executor re-creates a lost device, the Device it came from,
// its graphs, its custom kernels, info() and counters() all use the new one, and nothing keeps
// the lost one alive.
TEST(Recovery, TheDeviceItsGraphsAndKernelsAllMoveToTheReCreatedDevice) {
  Disarm d;
  (void)shared_device();  // keeps lavapipe loaded when `device` goes (ThreadSanitizer needs that)
  Device device;
  const KernelHandle triple = register_kernel(device, "triple", KernelKind::elementwise, "return 3.0 * x;");
  GpuCommandBatch graph(device);
  const auto kept = graph.import_buffer(std::vector<float>{1.0f, 2.0f});
  const auto first = graph.relu(kept);
  graph.execute();  // the import is now on the old device
  EXPECT_EQ(graph.read(first), (std::vector<float>{1.0f, 2.0f}));
  const DeviceCounters counters_before = device.counters();
  const std::string name_before = device.info().name;
  std::weak_ptr<detail::GpuContext> old_context = device.context();
  const auto staged = graph.upload(std::vector<float>{-1.0f, 2.0f});  // staged before the loss
  {
    BatchExecutor executor(device, batches_of(4));
    auto gpu = executor.handle();
    FaultInjector::arm(Fault::wait_device_lost);
    FaultInjector::arm(Fault::device_lost_check);  // recover() finds the device lost
    for (ErrorCode c : codes_of_batch(gpu, mixed_requests())) EXPECT_EQ(c, ErrorCode::device_lost);
    ASSERT_EQ(vulkan(device).recreations(), 1u);
    EXPECT_EQ(device.context(), vulkan(device).current_context()) << "one current context";
  }
  EXPECT_NE(device.context(), old_context.lock());
  // The graph: data staged before the loss, a built-in and a custom kernel registered before it.
  const auto out = graph.custom("triple", graph.relu(staged));
  graph.execute();
  EXPECT_EQ(graph.read(out), (std::vector<float>{0.0f, 6.0f}));
  // An import that lived on the lost device is gone, and says so.
  (void)graph.relu(kept);
  try {
    graph.execute();
    ADD_FAILURE() << "expected device_lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
    EXPECT_NE(std::string(e.what()).find("import_buffer() it again"), std::string::npos) << e.what();
  }
  // Kernels: one registered before the loss runs on the new device, one registers after it.
  EXPECT_EQ(find_kernel(device, "triple"), triple);
  EXPECT_EQ(device.run(Request::custom(triple, {1.0f, -2.0f})).values, (std::vector<float>{3.0f, -6.0f}));
  const KernelHandle half = register_kernel(device, "half", KernelKind::elementwise, "return 0.5 * x;");
  EXPECT_TRUE(has_kernel(device, "half"));
  EXPECT_EQ(device.run(Request::custom(half, {4.0f})).values, (std::vector<float>{2.0f}));
  const auto y = graph.custom("half", graph.upload(std::vector<float>{8.0f}));
  graph.execute();
  EXPECT_EQ(graph.read(y), (std::vector<float>{4.0f}));
  // info() and counters(): the new device, counting on from before the loss.
  EXPECT_EQ(device.info().name, name_before);
  const DeviceCounters counters_after = device.counters();
  EXPECT_GT(counters_after.submissions, counters_before.submissions + 2);
  EXPECT_GT(counters_after.pipelines_created, counters_before.pipelines_created);
  EXPECT_TRUE(old_context.expired()) << "something still holds the lost device";
}

TEST(Recovery, RecoverWithoutALostDeviceChangesNothing) {
  Disarm d;
  auto& v = vulkan(shared_device());
  const auto before = v.current_context();
  v.recover();
  EXPECT_EQ(v.current_context(), before);
  EXPECT_EQ(v.recreations(), 0u);
}

TEST(Recovery, OutOfHostMemoryHalvesTheBatchAndFailsOnlyWhatCannotFit) {
  Disarm d;
  BatchExecutor executor(shared_device(), batches_of(4));
  auto gpu = executor.handle();
  const auto requests = mixed_requests();
  expect_serves(gpu, requests);
  // Fails the batch of 4, its first half [0, 2) and then request 0 alone: request 0 fails with
  // out_of_memory, requests 1, 2 and 3 run in batches of 1 and 2.
  FaultInjector::arm(Fault::host_out_of_memory, 3);
  std::vector<std::future<Result>> futures;
  for (const Request& r : requests) futures.push_back(gpu.submit(r));
  EXPECT_EQ(code_of(futures[0]), ErrorCode::out_of_memory);
  for (std::size_t i = 1; i < requests.size(); ++i) {
    const Result got = futures[i].get();
    EXPECT_FALSE(reference::check(requests[i], got).has_value()) << i;
  }
  EXPECT_EQ(executor.stats().device_errors, 1u);
  expect_serves(gpu, requests);
}

TEST(Recovery, OutOfDeviceMemoryOnALargeBatchIsSplitAndEveryRequestRuns) {
  Disarm d;
  (void)shared_device();  // keeps lavapipe loaded when `device` goes (ThreadSanitizer needs that)
  Device device;  // fresh: its first batch needs new memory blocks
  BatchExecutor executor(device, batches_of(4));
  auto gpu = executor.handle();
  FaultInjector::arm(Fault::device_out_of_memory);
  const auto before = FaultInjector::fired(Fault::device_out_of_memory);
  std::vector<Request> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(Request::relu(std::vector<float>(1 << 18, float(i) - 2.0f)));
  expect_serves(gpu, requests);
  EXPECT_EQ(FaultInjector::fired(Fault::device_out_of_memory), before + 1);
}

TEST(Recovery, AHungBatchTripsTheWatchdogAndTheExecutorKeepsServing) {
  Disarm d;
  const auto requests = mixed_requests();
  {  // pipelines built first, so that no real batch comes near the short watchdog (TSan is slow)
    BatchExecutor warm(shared_device(), batches_of(4));
    auto gpu = warm.handle();
    expect_serves(gpu, requests);
  }
  BatchConfig config = batches_of(4);
  config.batch_timeout = 1000ms;
  BatchExecutor executor(shared_device(), config);
  auto gpu = executor.handle();
  expect_serves(gpu, requests);
  FaultInjector::arm(Fault::hang);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<Result>> futures;
  for (const Request& r : requests) futures.push_back(gpu.submit(r));
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(60s), std::future_status::ready) << "the caller is not held";
    try {
      f.get();
      ADD_FAILURE() << "expected device_lost";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::device_lost);
      EXPECT_NE(std::string(e.what()).find("did not complete within 1000 ms"), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1000ms);
  EXPECT_EQ(vulkan(shared_device()).recreations(), 0u);
  for (int i = 0; i < 3; ++i) expect_serves(gpu, requests);
}
