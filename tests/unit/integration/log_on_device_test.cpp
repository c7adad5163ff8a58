// The library's log on a real device (include/gpubatch/log.hpp): a device's and an executor's
// lines go to stderr and nothing of the library's to stdout, where a program's own output goes
// (before the thirtieth session a debug line landed in gpubatch-load's --json output).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpubatch/device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/log.hpp"

using namespace gpubatch;

TEST(LogOnDevice, ADevicesAndAnExecutorsLinesGoToStderrNeverStdout) {
  const LogLevel before = log_level();
  set_log_level(LogLevel::debug);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  std::vector<float> y;
  {
    Device device;  // says "using device" at debug level
    BatchExecutor executor(device, BatchConfig{});
    y = executor.handle().relu({-1.0f, 2.0f}).get();
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_log_level(before);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 2.0f}));
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("[debug] gpubatch: using device"), std::string::npos) << err;
}
