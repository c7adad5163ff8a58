// Polling for completion instead of blocking: InFlightBatch::poll() on the Vulkan device, and the
// synchronous path's bounded poll before its blocking wait (DeviceOptions::completion_spin).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gpubatch/batch_device.hpp"
#include "gpu/fault_injection.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "test_device.hpp"

using namespace gpubatch;
using namespace std::chrono_literals;
using gpubatch::gpu::Fault;
using gpubatch::gpu::FaultInjector;

namespace {

struct Disarm {
  ~Disarm() { FaultInjector::disarm_all(); }
};

std::optional<ErrorCode> code_of(Device& device, const Request& r) {
  try {
    device.run(r);
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

TEST(CompletionPoll, PollFindsTheBatchDoneAndItsResultsAreRight) {
  const Request r = Request::relu({1.0f, -2.0f, 3.0f});
  const Request* one[] = {&r};
  auto batch = test_device().batch_device()->submit(one);
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  bool done = false;
  while (!(done = batch->poll()) && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_TRUE(done);
  EXPECT_TRUE(batch->poll());  // stays done
  Result out;
  batch->take_result(0, out);
  EXPECT_FALSE(reference::check(r, out).has_value());
}

TEST(CompletionPoll, PollDoesNotSeeAHiddenCompletion) {
  Disarm d;
  DeviceOptions options;
  options.batch_timeout = 200ms;
  Device device(options);
  const Request r = Request::relu({1.0f, 2.0f});
  const Request* one[] = {&r};
  FaultInjector::arm(Fault::hang);
  auto batch = device.batch_device()->submit(one);
  const auto until = std::chrono::steady_clock::now() + 50ms;
  EXPECT_FALSE(detail::poll_until(*batch, until));  // the GPU finished, but the fault hides it
  batch.reset();
  EXPECT_FALSE(code_of(device, r).has_value());  // the device serves on
}

TEST(CompletionPoll, TheSynchronousPathServesWithAndWithoutPolling) {
  for (auto spin : {0us, 200us, 10000us}) {
    DeviceOptions options;
    options.completion_spin = spin;
    Device device(options);
    for (int i = 0; i < 3; ++i) {
      const Request r = Request::sigmoid({static_cast<float>(i), -1.0f});
      const Result got = device.run(r);
      EXPECT_FALSE(reference::check(r, got).has_value()) << spin.count() << " us";
    }
  }
}

TEST(CompletionPoll, AFaultFoundByThePollFailsThatCallOnly) {
  Disarm d;
  DeviceOptions options;
  options.completion_spin = 10000us;  // the fault is met by the poll, not the blocking wait
  Device device(options);
  const Request r = Request::relu({1.0f, -1.0f});
  FaultInjector::arm(Fault::wait_device_lost);
  EXPECT_EQ(code_of(device, r), ErrorCode::device_lost);
  EXPECT_FALSE(code_of(device, r).has_value());
}

TEST(CompletionPoll, TheWatchdogBoundsAPolledCall) {
  Disarm d;
  DeviceOptions options;
  options.batch_timeout = 5ms;
  options.completion_spin = 10000us;  // longer than the watchdog: the watchdog wins
  Device device(options);
  const Request r = Request::relu({1.0f, 2.0f});
  FaultInjector::arm(Fault::hang);
  EXPECT_EQ(code_of(device, r), ErrorCode::device_lost);
}

TEST(CompletionPoll, BadSpinSettingsAreInvalidConfig) {
  auto expect_invalid = [](auto&& make, const std::string& needle) {
    try {
      make();
      ADD_FAILURE() << "accepted; expected invalid_config naming " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_config) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_invalid([] { Device d(DeviceOptions{.completion_spin = -1us}); }, "completion_spin");
  expect_invalid([] { Device d(DeviceOptions{.completion_spin = 1s}); }, "completion_spin");
  ::setenv("GPUBATCH_RUN_SPIN_US", "12x", 1);
  expect_invalid([] { Device d(DeviceOptions{}); }, "GPUBATCH_RUN_SPIN_US");
  ::setenv("GPUBATCH_RUN_SPIN_US", "0", 1);
  EXPECT_FALSE(code_of(*std::make_unique<Device>(), Request::relu({1.0f})).has_value());
  ::unsetenv("GPUBATCH_RUN_SPIN_US");
}

}  // namespace
