#pragma once
// One device per test process, opened with validation on (the test environment sets it).
#include "gpubatch/device.hpp"

inline gpubatch::Device& test_device() {
  static gpubatch::Device device;
  return device;
}
