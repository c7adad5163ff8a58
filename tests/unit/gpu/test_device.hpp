#pragma once
// One device per test process, opened with validation on (the test environment sets it).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/reference.hpp"

inline gpubatch::Device& test_device() {
  static gpubatch::Device device;
  return device;
}

// A device whose batches from `bytes` of upload take the copy engine (0: every batch; UINT64_MAX:
// none, the direct path).
inline gpubatch::Device open_with_threshold(std::uint64_t bytes) {
  gpubatch::DeviceOptions options;
  options.copy_engine_bytes = bytes;
  return gpubatch::Device(options);
}

// Test parameters for both data paths (open_with_threshold's argument), and their names.
inline auto both_paths() {
  return ::testing::Values(std::numeric_limits<std::uint64_t>::max(), std::uint64_t{0});
}
inline std::string path_name(const ::testing::TestParamInfo<std::uint64_t>& info) {
  return info.param == 0 ? "CopyEngine" : "Direct";
}

// Runs `requests` as one batch on `device` and checks every result against the CPU reference; a
// request with a result buffer must leave Result::values empty (delivered in place).
inline void expect_batch_matches_reference(gpubatch::Device& device, const std::vector<gpubatch::Request>& requests) {
  std::vector<const gpubatch::Request*> pointers;
  for (const auto& r : requests) pointers.push_back(&r);
  auto batch = device.batch_device()->submit(pointers);
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    gpubatch::Result result;
    batch->take_result(i, result);
    if (requests[i].host_result) EXPECT_TRUE(result.values.empty()) << "request " << i << ": delivered in place";
    const auto mismatch = gpubatch::reference::check(requests[i], result);
    EXPECT_FALSE(mismatch) << "request " << i << " (" << gpubatch::to_string(requests[i].op) << "): " << *mismatch;
  }
}
