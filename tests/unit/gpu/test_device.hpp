#pragma once
// One device per test process, opened with validation on (the test environment sets it).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "gpubatch/device.hpp"

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
