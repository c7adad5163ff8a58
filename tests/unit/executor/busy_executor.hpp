#pragma once
// The direct and bulk lanes' tests (direct_lane_test.cpp, bulk_lane_test.cpp): an executor made
// busy by a small request held on its paused device, and a request over the default 4 MiB line.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"

namespace gpubatch::testing {

// 600,000 floats: 2.4 MB in and 2.4 MB out, over the default 4 MiB line.
inline std::vector<float> large_input(float value) { return std::vector<float>(600'000, value); }
inline std::vector<float> relu_of(const std::vector<float>& x) {
  return reference::run(Request::unary(Op::relu, x)).values;
}

// A small request sits on the paused device, so the executor is busy when the large one comes.
struct BusyExecutor {
  explicit BusyExecutor(BatchConfig config = BatchConfig::adaptive())
      : BusyExecutor(std::make_shared<FakeDevice>(), std::move(config)) {}
  BusyExecutor(std::shared_ptr<FakeDevice> d, BatchConfig config)
      : device(std::move(d)), executor(device, config) {
    device->pause();
    small = executor.handle().relu({-1.0f});
    EXPECT_TRUE(device->wait_for_inflight(1, std::chrono::seconds(30)));
  }
  std::shared_ptr<FakeDevice> device;
  BatchExecutor executor;
  std::future<std::vector<float>> small;
};

}  // namespace gpubatch::testing
