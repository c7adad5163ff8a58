// Recovery in the executor, on the fake device: after device_lost the executor asks the device to
// recover and keeps serving; a batch that runs out of memory is halved and resubmitted down to
// single requests, and only a request that cannot fit alone fails.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;

BatchConfig batches_of(std::size_t n) {
  BatchConfig c = BatchConfig::balanced();  // the deadline policy
  c.max_batch_size = n;
  c.max_wait = 60s;  // flush on size only: each batch is exactly the n requests sent together
  c.queue_capacity = 1024;
  c.max_inflight_batches = 2;
  return c;
}

TEST(ExecutorRecovery, DeviceLostOnSubmitCallsRecoverAndKeepsServing) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, batches_of(4));
  auto gpu = executor.handle();
  device->fail_next_submit(ErrorCode::device_lost);
  std::vector<std::future<std::vector<float>>> lost, after;
  for (int i = 0; i < 4; ++i) lost.push_back(gpu.relu({float(i)}));
  for (auto& f : lost) EXPECT_EQ(error_code(f), ErrorCode::device_lost);
  EXPECT_EQ(device->recoveries(), 1);
  for (int i = 0; i < 4; ++i) after.push_back(gpu.relu({float(i)}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(after[i].get(), (std::vector<float>{float(i)}));
  EXPECT_EQ(device->recoveries(), 1) << "no recovery without a lost device";
}

TEST(ExecutorRecovery, DeviceLostOnWaitAndWatchdogCallRecover) {
  auto device = std::make_shared<FakeDevice>();
  BatchConfig config = batches_of(2);
  // Every batch of the test has this watchdog, the ones that must complete too: 1 s, not the
  // 150 ms it had, which a completion thread under TSan on a loaded 2-core machine outlasted once
  // (the last rehearsal of 2026-12-01 needed its retry).
  config.batch_timeout = 1s;
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  device->fail_next_wait(ErrorCode::device_lost);
  auto a = gpu.dot({1.0f}, {2.0f});
  auto b = gpu.dot({1.0f}, {3.0f});
  EXPECT_EQ(error_code(a), ErrorCode::device_lost);
  EXPECT_EQ(error_code(b), ErrorCode::device_lost);
  EXPECT_EQ(device->recoveries(), 1);
  device->pause();  // the next batch never completes: the watchdog fails it
  auto c = gpu.relu({1.0f});
  auto d = gpu.relu({2.0f});
  EXPECT_NE(error_message(c).find("did not complete within"), std::string::npos);
  EXPECT_EQ(error_code(d), ErrorCode::device_lost);
  EXPECT_EQ(device->recoveries(), 2);
  device->resume();
  auto g = gpu.relu({5.0f});
  auto h = gpu.relu({6.0f});
  EXPECT_EQ(g.get(), std::vector<float>{5.0f});
  EXPECT_EQ(h.get(), std::vector<float>{6.0f});
  // Other errors do not call recover().
  device->fail_next_submit(ErrorCode::internal);
  auto e = gpu.relu({1.0f});
  auto f = gpu.relu({1.0f});
  EXPECT_EQ(error_code(e), ErrorCode::internal);
  EXPECT_EQ(error_code(f), ErrorCode::internal);
  EXPECT_EQ(device->recoveries(), 2);
}

// How many times `needle` occurs in `text`.
std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A batch's error reaches each of its requests with its code named once: "device_lost: relu
// request ... in batch 3 of 4 requests: fake device: injected fault on wait", not "device_lost:
// ...: device_lost: fake device: ...".
TEST(ExecutorRecovery, ABatchErrorCarriesItsCodeOnce) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, batches_of(2));
  auto gpu = executor.handle();
  for (auto code : {ErrorCode::device_lost, ErrorCode::internal}) {
    device->fail_next_wait(code);
    std::vector<std::future<std::vector<float>>> failed;
    for (int i = 0; i < 2; ++i) failed.push_back(gpu.relu({float(i)}));
    for (auto& f : failed) {
      const std::string what = error_message(f);
      const std::string prefix = std::string(to_string(code)) + ": ";
      EXPECT_EQ(what.rfind(prefix, 0), 0u) << what;
      EXPECT_EQ(occurrences(what, std::string(to_string(code))), 1u) << what;
      EXPECT_NE(what.find("fake device: injected fault on wait"), std::string::npos) << what;
    }
  }
}

TEST(ExecutorRecovery, OutOfMemoryHalvesTheBatchUntilItFits) {
  FakeDevice::Options options;
  options.oom_above_requests = 3;  // 16 -> 8 -> 4 -> 2: four submissions of 2 after 1+2+4 failures
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, batches_of(16));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 16; ++i) futures.push_back(gpu.relu({float(i) - 8.0f}));
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(futures[i].get(), (std::vector<float>{std::max(0.0f, float(i) - 8.0f)})) << i;
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{2, 2, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(device->oom_faults(), 1 + 2 + 4);
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, 16u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.batches, 1u) << "one flush, split on the device side";
}

TEST(ExecutorRecovery, OnlyTheRequestThatCannotFitAloneFails) {
  FakeDevice::Options options;
  options.oom_marker = 1000.0f;  // any batch holding this request runs out of memory
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, batches_of(8));
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 8; ++i) futures.push_back(gpu.relu({i == 5 ? 1000.0f : float(i)}));
  for (int i = 0; i < 8; ++i) {
    if (i == 5) {
      const std::string message = error_message(futures[i]);
      EXPECT_NE(message.find("out_of_memory"), std::string::npos) << message;
      EXPECT_NE(message.find("even alone"), std::string::npos) << message;
    } else {
      EXPECT_EQ(futures[i].get(), (std::vector<float>{float(i)})) << i;
    }
  }
  // 8 fails; halves: [0,4) runs, [4,8) fails; [4,6) fails, [6,8) runs; [4] runs, [5] fails.
  EXPECT_EQ(device->batch_sizes(), (std::vector<std::size_t>{4, 1, 2}));
  EXPECT_EQ(executor.stats().device_errors, 1u);
  EXPECT_EQ(device->recoveries(), 0);
}

TEST(ExecutorRecovery, OutOfMemoryForALoneRequestFailsIt) {
  FakeDevice::Options options;
  options.oom_marker = 7.0f;
  auto device = std::make_shared<FakeDevice>(options);
  BatchExecutor executor(device, batches_of(1));
  auto gpu = executor.handle();
  auto f = gpu.relu({7.0f});
  EXPECT_EQ(error_code(f), ErrorCode::out_of_memory);
  EXPECT_EQ(gpu.relu({3.0f}).get(), std::vector<float>{3.0f});
}

}  // namespace
}  // namespace gpubatch::testing
