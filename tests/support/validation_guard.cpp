// main() for the Vulkan test binaries: the Khronos validation layer is on (GPUBATCH_VALIDATION=1)
// and any message it prints fails the run, naming the tests during which it spoke. (A listener
// must not add failures itself, so the verdict is the exit status; ctest runs one test a process.)
// Where the layer is not installed (the GPU machines), the tests run with validation off and say
// so once, instead of failing.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpubatch/device.hpp"

namespace {

std::string g_noisy_tests;

// As the library reads GPUBATCH_VALIDATION (src/gpu/context.cpp env_flag).
bool validation_requested(const char* env) {
  return env && (std::string(env) == "1" || std::string(env) == "true" || std::string(env) == "on");
}

class ValidationGuard : public testing::EmptyTestEventListener {
  void OnTestStart(const testing::TestInfo&) override { before_ = gpubatch::validation_message_count(); }
  void OnTestEnd(const testing::TestInfo& info) override {
    const auto after = gpubatch::validation_message_count();
    if (after != before_)
      g_noisy_tests += std::string(" ") + info.test_suite_name() + "." + info.name() + " (" +
                       std::to_string(after - before_) + ")";
  }
  std::uint64_t before_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // Keep the Vulkan driver and layer loaded to the end, so that LeakSanitizer can name what they
  // keep for the process's lifetime (tests/lsan.supp) instead of an "unknown module".
  for (const char* lib : {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so"})
    dlopen(lib, RTLD_NOW | RTLD_NODELETE);
  setenv("GPUBATCH_VALIDATION", "1", 0);
  if (validation_requested(std::getenv("GPUBATCH_VALIDATION")) && !gpubatch::validation_layer_installed()) {
    std::fprintf(stderr,
                 "note: VK_LAYER_KHRONOS_validation is not installed: these tests run with validation "
                 "off (GPUBATCH_VALIDATION=0)\n");
    setenv("GPUBATCH_VALIDATION", "0", 1);
  }
  testing::UnitTest::GetInstance()->listeners().Append(new ValidationGuard);
  const int status = RUN_ALL_TESTS();
  if (!g_noisy_tests.empty()) {
    std::fprintf(stderr, "FAILED: the Vulkan validation layer printed messages during:%s\n",
                 g_noisy_tests.c_str());
    return 1;
  }
  return status;
}
