#pragma once
// Holding the executor's strand still, for tests of what happens while it cannot pull.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/executor.hpp"

namespace gpubatch::testing {

// Holds the strand inside the device's first submit, that of a lone request made from a thread of
// its own (on an idle executor a future's call submits its batch on the caller's thread, held
// here): until device.release_submits() only the deadline watch can expire requests. The future
// is that lone request's.
inline std::future<std::vector<float>> hold_the_strand(FakeDevice& device, const BatchedGpuHandle& gpu) {
  device.hold_submits();
  auto first = std::async(std::launch::async, [gpu] { return gpu.relu({1.0f}).get(); });
  EXPECT_TRUE(device.wait_for_submits_entered(1));
  return first;
}

}  // namespace gpubatch::testing
