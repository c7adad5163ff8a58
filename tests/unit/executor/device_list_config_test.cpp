// The `devices` key (BatchConfig::devices, GPUBATCH_DEVICES) and parse_device_list: what is
// accepted, and the typed error (invalid_config, naming the source) for what is not.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gpubatch/config.hpp"
#include "config_test_util.hpp"
#include "gpubatch/error.hpp"

namespace {

using gpubatch::BatchConfig;
using gpubatch::Error;
using gpubatch::ErrorCode;
using gpubatch::parse_device_list;
using gpubatch::testing::EnvGuard;
using gpubatch::testing::expect_invalid;
using List = std::vector<std::string>;

TEST(DeviceList, AcceptsAllIndicesAndNames) {
  EXPECT_EQ(parse_device_list("all"), List{"all"});
  EXPECT_EQ(parse_device_list("0,1"), (List{"0", "1"}));
  EXPECT_EQ(parse_device_list("0,0"), (List{"0", "0"}));  // one physical device, opened twice
  EXPECT_EQ(parse_device_list(" 1 , llvmpipe "), (List{"1", "llvmpipe"}));
  EXPECT_EQ(parse_device_list("NVIDIA H200,h100"), (List{"NVIDIA H200", "h100"}));
}

TEST(DeviceList, RefusesMalformedLists) {
  expect_invalid([] { parse_device_list(""); }, "empty list");
  expect_invalid([] { parse_device_list("0,,1"); }, "empty item");
  expect_invalid([] { parse_device_list("0,"); }, "empty item");
  expect_invalid([] { parse_device_list(" , "); }, "empty item");
  expect_invalid([] { parse_device_list("all,0"); }, "\"all\" beside other items");
  expect_invalid([] { parse_device_list("0;1"); }, "the character ';'");
  expect_invalid([] { parse_device_list("12345678901"); }, "too large");
  expect_invalid([] { parse_device_list("0,,1", "GPUBATCH_DEVICES=0,,1"); }, "GPUBATCH_DEVICES=0,,1");
}

TEST(DeviceList, TheDevicesKeyInFilesAndTheEnvironment) {
  EXPECT_EQ(BatchConfig::from_string("devices = \"0,1\"").devices, "0,1");
  EXPECT_EQ(BatchConfig{}.devices, "");  // the default: one device
  expect_invalid([] { BatchConfig::from_string("devices = 3", "my.toml"); }, "my.toml:1: key devices");
  expect_invalid([] { BatchConfig::from_string("devices = true", "my.toml"); }, "expects a string");
  expect_invalid([] { BatchConfig::from_string("devices = \"0,,1\"", "my.toml"); }, "empty item");
  {
    EnvGuard g("GPUBATCH_DEVICES", "1,0");
    EXPECT_EQ(BatchConfig::from_environment().devices, "1,0");
  }
  {
    EnvGuard g("GPUBATCH_DEVICES", ",");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_DEVICES=,");
  }
  BatchConfig bad;
  bad.devices = "all,all";
  expect_invalid([&] { bad.validate(); }, "devices");
}

}  // namespace
