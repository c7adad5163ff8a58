// The resident keys: the realtime preset, TOML booleans, GPUBATCH_RESIDENT, validation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "gpubatch/config.hpp"
#include "gpubatch/error.hpp"

using namespace gpubatch;
using namespace std::chrono_literals;

namespace {
std::string invalid_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}
}  // namespace

TEST(ResidentConfig, RealtimeIsAdaptivePlusResident) {
  BatchConfig want = BatchConfig::adaptive();
  EXPECT_FALSE(want.resident);
  want.resident = true;
  EXPECT_EQ(BatchConfig::realtime(), want);
  EXPECT_EQ(BatchConfig::preset("realtime"), want);
  EXPECT_FALSE(BatchConfig::balanced().resident);
}

TEST(ResidentConfig, TomlTakesBooleansOnly) {
  const auto c = BatchConfig::from_string("resident = true\nresident_idle_us = 250\n");
  EXPECT_TRUE(c.resident);
  EXPECT_EQ(c.resident_idle, 250us);
  EXPECT_FALSE(BatchConfig::from_string("preset = \"realtime\"\nresident = false\n").resident);
  EXPECT_NE(invalid_message([] { BatchConfig::from_string("resident = 1", "r.toml"); }).find("resident"),
            std::string::npos);
  EXPECT_NE(invalid_message([] { BatchConfig::from_string("max_batch_size = true", "r.toml"); })
                .find("max_batch_size"),
            std::string::npos);
  EXPECT_NE(invalid_message([] { BatchConfig::from_string("resident_idle_us = 0"); }).find("resident_idle_us"),
            std::string::npos);
}

TEST(ResidentConfig, EnvironmentSwitchesItOnAndOff) {
  ::setenv("GPUBATCH_RESIDENT", "on", 1);
  EXPECT_TRUE(BatchConfig::from_environment().resident);
  ::setenv("GPUBATCH_RESIDENT", "0", 1);
  EXPECT_FALSE(BatchConfig::from_environment(BatchConfig::realtime()).resident);
  ::setenv("GPUBATCH_RESIDENT", "maybe", 1);
  EXPECT_NE(invalid_message([] { BatchConfig::from_environment(); }).find("GPUBATCH_RESIDENT"), std::string::npos);
  ::unsetenv("GPUBATCH_RESIDENT");
}
