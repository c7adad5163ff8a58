// Validation asked for where the Khronos layer is not installed (the GPU machines have none):
// the device opens without it instead of failing. The missing layer is simulated by pointing the
// Vulkan loader's explicit-layer search (VK_LAYER_PATH) at an empty directory.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpubatch/device.hpp"
#include "gpubatch/ops.hpp"

using namespace gpubatch;

namespace {

// Sets (or unsets, with nullopt) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(ValidationLayer, AskedForButNotInstalledTheDeviceOpensWithoutIt) {
  const auto empty = std::filesystem::temp_directory_path() / ("gpubatch-no-layers-" + std::to_string(getpid()));
  std::filesystem::create_directories(empty);
  {
    ScopedEnv layer_path("VK_LAYER_PATH", empty.string());  // replaces the loader's search path
    ScopedEnv add_path("VK_ADD_LAYER_PATH", std::nullopt);
    ScopedEnv instance_layers("VK_INSTANCE_LAYERS", std::nullopt);
    EXPECT_FALSE(validation_layer_installed());
    DeviceOptions options;
    options.validation = true;
    options.pipeline_cache_dir = "none";
    Device device(options);  // used to throw no_device
    EXPECT_EQ(device.run(Request::relu({-1.0f, 2.0f})).values, (std::vector<float>{0.0f, 2.0f}));
  }
  std::filesystem::remove_all(empty);
}

// Run by the test below in a child process of this binary, where the layer is hidden: the guard
// (tests/support/validation_guard.cpp) has turned validation off, and devices open.
TEST(ValidationLayer, ChildUnderTheGuard) {
  if (!std::getenv("GPUBATCH_TEST_CHILD")) GTEST_SKIP() << "run by TestBinariesRunWithoutTheLayer";
  ASSERT_FALSE(validation_layer_installed());
  ASSERT_NE(std::getenv("GPUBATCH_VALIDATION"), nullptr);
  EXPECT_STREQ(std::getenv("GPUBATCH_VALIDATION"), "0");
  Device device;
  EXPECT_EQ(device.run(Request::relu({-1.0f})).values, (std::vector<float>{0.0f}));
}

TEST(ValidationLayer, TestBinariesRunWithoutTheLayerAndSaySoOnce) {
  const auto empty = std::filesystem::temp_directory_path() / ("gpubatch-no-layers-" + std::to_string(getpid()));
  std::filesystem::create_directories(empty);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = "GPUBATCH_TEST_CHILD=1 GPUBATCH_VALIDATION=1 VK_LAYER_PATH='" + empty.string() +
                              "' '" + self + "' --gtest_filter=ValidationLayer.ChildUnderTheGuard 2>&1";
  std::string output;
  int status = -1;
  {
    ScopedEnv add_path("VK_ADD_LAYER_PATH", std::nullopt);
    ScopedEnv instance_layers("VK_INSTANCE_LAYERS", std::nullopt);
    FILE* child = popen(command.c_str(), "r");
    ASSERT_NE(child, nullptr);
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, child)) output.append(buffer, n);
    status = pclose(child);
  }
  std::filesystem::remove_all(empty);
  EXPECT_EQ(status, 0) << output;
  const std::string note = "VK_LAYER_KHRONOS_validation is not installed";
  const auto first = output.find(note);
  EXPECT_NE(first, std::string::npos) << output;
  EXPECT_EQ(output.find(note, first + 1), std::string::npos) << "said once:\n" << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
}
