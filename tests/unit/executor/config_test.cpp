// BatchConfig: presets, preset files, user files, environment, validation.
#include "gpubatch/config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "config_test_util.hpp"
#include "gpubatch/error.hpp"

namespace {

using gpubatch::BatchConfig;
using gpubatch::Error;
using gpubatch::ErrorCode;
using gpubatch::FlushPolicy;
using gpubatch::OverflowPolicy;
using gpubatch::testing::EnvGuard;
using gpubatch::testing::expect_invalid;
using namespace std::chrono_literals;

TEST(BatchConfig, PresetsHaveTheDesignNumbers) {
  EXPECT_EQ(BatchConfig::latency().max_batch_size, 256u);
  EXPECT_EQ(BatchConfig::latency().max_wait, 1ms);
  EXPECT_EQ(BatchConfig::balanced().max_batch_size, 1024u);
  EXPECT_EQ(BatchConfig::balanced().max_wait, 5ms);
  EXPECT_EQ(BatchConfig::throughput().max_batch_size, 2048u);
  EXPECT_EQ(BatchConfig::throughput().max_wait, 10ms);
  EXPECT_EQ(BatchConfig::adaptive().max_batch_size, 4096u);
  EXPECT_EQ(BatchConfig::adaptive().policy, FlushPolicy::adaptive);
  // The latency presets poll a batch before blocking; the throughput ones block at once.
  EXPECT_EQ(BatchConfig::adaptive().completion_spin, 200us);
  EXPECT_EQ(BatchConfig::latency().completion_spin, 200us);
  EXPECT_EQ(BatchConfig::balanced().completion_spin, 0us);
  EXPECT_EQ(BatchConfig::throughput().completion_spin, 0us);
  EXPECT_EQ(BatchConfig{}, BatchConfig::adaptive());  // the default
  // A lone future waits for its batch in the presets that poll; never where batches wait to fill.
  EXPECT_TRUE(BatchConfig::adaptive().lone_future_waits);
  EXPECT_TRUE(BatchConfig::latency().lone_future_waits);
  EXPECT_TRUE(BatchConfig::realtime().lone_future_waits);
  EXPECT_FALSE(BatchConfig::balanced().lone_future_waits);
  EXPECT_FALSE(BatchConfig::throughput().lone_future_waits);
  EXPECT_EQ(BatchConfig::balanced().policy, FlushPolicy::deadline);
  EXPECT_EQ(BatchConfig::latency().policy, FlushPolicy::deadline);
  EXPECT_EQ(BatchConfig::throughput().policy, FlushPolicy::deadline);
  for (auto name : BatchConfig::preset_names) {
    EXPECT_NO_THROW(BatchConfig::preset(name).validate()) << name;
  }
  EXPECT_EQ(BatchConfig::preset("throughput"), BatchConfig::throughput());
}

TEST(BatchConfig, UnknownPresetIsNamed) {
  expect_invalid([] { BatchConfig::preset("fastest"); }, "fastest");
}

#ifdef GPUBATCH_CONFIG_DIR
TEST(BatchConfig, ShippedPresetFilesEqualTheBuiltInPresets) {
  for (auto name : BatchConfig::preset_names) {
    const auto path = std::filesystem::path(GPUBATCH_CONFIG_DIR) / (std::string(name) + ".toml");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_EQ(BatchConfig::from_file(path), BatchConfig::preset(name)) << path;
  }
}
#endif

TEST(BatchConfig, FileStartsFromAPresetAndOverridesKeys) {
  const auto c = BatchConfig::from_string(R"(
    preset = "latency"
    max_wait_us = 250
    overflow = "reject"
    max_inflight_batches = 5
  )");
  BatchConfig expected = BatchConfig::latency();
  expected.max_wait = 250us;
  expected.overflow = OverflowPolicy::reject;
  expected.max_inflight_batches = 5;
  EXPECT_EQ(c, expected);
}

TEST(BatchConfig, FileWithoutPresetStartsFromTheDefaultAdaptive) {
  const auto c = BatchConfig::from_string("max_batch_size = 64\npolicy = \"deadline\"\n");
  BatchConfig expected = BatchConfig::adaptive();
  expected.max_batch_size = 64;
  expected.policy = FlushPolicy::deadline;
  EXPECT_EQ(c, expected);
  EXPECT_EQ(BatchConfig::from_string("# nothing but a comment\n"), BatchConfig::adaptive());
}

TEST(BatchConfig, EnvironmentAloneStartsFromTheDefaultAdaptive) {
  EXPECT_EQ(BatchConfig::from_environment(), BatchConfig::adaptive());
}

TEST(BatchConfig, FromFileReadsAFile) {
  const auto path = std::filesystem::temp_directory_path() / "gpubatch_config_test.toml";
  {
    std::ofstream out(path);
    out << "preset = \"throughput\"\nqueue_capacity = 1000\n";
  }
  auto c = BatchConfig::from_file(path);
  EXPECT_EQ(c.max_batch_size, 2048u);
  EXPECT_EQ(c.queue_capacity, 1000u);
  std::filesystem::remove(path);
  expect_invalid([&] { BatchConfig::from_file(path); }, path.string());
}

TEST(BatchConfig, BadFilesNameTheKey) {
  expect_invalid([] { BatchConfig::from_string("max_batchsize = 3", "my.toml"); }, "max_batchsize");
  expect_invalid([] { BatchConfig::from_string("max_batchsize = 3", "my.toml"); }, "my.toml");
  expect_invalid([] { BatchConfig::from_string("max_batch_size = -4"); }, "max_batch_size");
  expect_invalid([] { BatchConfig::from_string("max_batch_size = -4"); }, "negative");
  expect_invalid([] { BatchConfig::from_string("queue_capacity = 0"); }, "queue_capacity");
  expect_invalid([] { BatchConfig::from_string("max_wait_us = \"5ms\""); }, "max_wait_us");
  expect_invalid([] { BatchConfig::from_string("max_wait_us = 1.5"); }, "max_wait_us");
  expect_invalid([] { BatchConfig::from_string("policy = \"eager\""); }, "eager");
  expect_invalid([] { BatchConfig::from_string("overflow = 3"); }, "overflow");
  expect_invalid([] { BatchConfig::from_string("preset = \"nope\""); }, "nope");
  expect_invalid([] { BatchConfig::from_string("max_batch_size = ="); }, "<string>");
  expect_invalid([] { BatchConfig::from_string("max_wait_us = 0\nmax_batch_size = 1"); },
                 "max_wait_us");
  expect_invalid([] { BatchConfig::from_string("completion_spin_us = -1"); }, "negative");
  expect_invalid([] { BatchConfig::from_string("completion_spin_us = 10001", "my.toml"); },
                 "my.toml: completion_spin_us: must be in [0, 10000]");
  EXPECT_EQ(BatchConfig::from_string("completion_spin_us = 10000").completion_spin, 10000us);
  EXPECT_FALSE(BatchConfig::from_string("lone_future_waits = false").lone_future_waits);
  EXPECT_TRUE(BatchConfig::from_string("preset = \"throughput\"\nlone_future_waits = true").lone_future_waits);
  expect_invalid([] { BatchConfig::from_string("lone_future_waits = 1", "my.toml"); },
                 "my.toml:1: key lone_future_waits: expects true or false, not an integer");
  expect_invalid([] { BatchConfig::from_string("lone_future_waits = \"yes\""); },
                 "lone_future_waits: expects true or false, not a string");
  EXPECT_EQ(BatchConfig::from_string("preset = \"adaptive\"\ncompletion_spin_us = 0").completion_spin,
            0us);
  EXPECT_EQ(BatchConfig{}.direct_bytes, std::size_t{2} << 20);
  for (const BatchConfig& p : {BatchConfig::latency(), BatchConfig::balanced(), BatchConfig::throughput(),
                               BatchConfig::adaptive(), BatchConfig::realtime()})
    EXPECT_EQ(p.direct_bytes, std::size_t{2} << 20) << "the same line in every preset";
  EXPECT_EQ(BatchConfig::from_string("direct_bytes = 0").direct_bytes, 0u);
  EXPECT_EQ(BatchConfig::from_string("preset = \"throughput\"\ndirect_bytes = 1048576").direct_bytes, 1048576u);
  expect_invalid([] { BatchConfig::from_string("direct_bytes = -1"); }, "negative");
  expect_invalid([] { BatchConfig::from_string("direct_bytes = \"4 MiB\""); }, "direct_bytes");
}

// latency_batch_size: 1024 in every preset (it acts only with the adaptive policy and below
// max_batch_size), 0 turns it off, from a file and from GPUBATCH_LATENCY_BATCH_SIZE.
TEST(BatchConfig, LatencyBatchSizeKey) {
  EXPECT_EQ(BatchConfig{}.latency_batch_size, 1024u);
  EXPECT_EQ(BatchConfig::realtime().latency_batch_size, 1024u);
  EXPECT_EQ(BatchConfig::from_string("latency_batch_size = 0").latency_batch_size, 0u);
  EXPECT_EQ(BatchConfig::from_string("latency_batch_size = 512").latency_batch_size, 512u);
  expect_invalid([] { BatchConfig::from_string("latency_batch_size = -1", "s.toml"); }, "latency_batch_size");
  expect_invalid([] { BatchConfig::from_string("latency_batch_size = 1048577", "s.toml"); },
                 "s.toml: latency_batch_size: must be in [0, 1048576]");
  expect_invalid([] { BatchConfig::from_string("latency_batch_size = \"small\""); }, "latency_batch_size");
  EnvGuard a("GPUBATCH_LATENCY_BATCH_SIZE", "2048");
  EXPECT_EQ(BatchConfig::from_environment().latency_batch_size, 2048u);
}

TEST(BatchConfig, ValidateNamesTheKey) {
  auto bad = [](auto mutate, const std::string& key) {
    BatchConfig c;
    mutate(c);
    expect_invalid([&] { c.validate(); }, key);
  };
  bad([](BatchConfig& c) { c.max_batch_size = 0; }, "max_batch_size");
  bad([](BatchConfig& c) { c.max_wait = -1us; }, "max_wait_us");
  bad([](BatchConfig& c) { c.queue_capacity = 0; }, "queue_capacity");
  bad([](BatchConfig& c) { c.max_inflight_batches = 0; }, "max_inflight_batches");
  bad([](BatchConfig& c) { c.max_batch_bytes = 0; }, "max_batch_bytes");
  bad([](BatchConfig& c) { c.completion_threads = 0; }, "completion_threads");
  bad([](BatchConfig& c) { c.batch_timeout = 0ms; }, "batch_timeout_ms");
  bad([](BatchConfig& c) { c.completion_spin = -1us; }, "completion_spin_us");
  bad([](BatchConfig& c) { c.completion_spin = 1s; }, "completion_spin_us");
  bad([](BatchConfig& c) {
        c.overflow = OverflowPolicy::block_for;
        c.block_timeout = 0us;
      },
      "block_timeout_us");
  bad([](BatchConfig& c) {
        c.max_wait = 0us;
        c.max_batch_size = 1;
      },
      "max_wait_us");
  BatchConfig ok;
  ok.max_wait = 0us;  // greedy flush: fine while batches may hold more than one request
  EXPECT_NO_THROW(ok.validate());
}

TEST(BatchConfig, EnvironmentOverridesKeys) {
  EnvGuard a("GPUBATCH_MAX_BATCH_SIZE", "77");
  EnvGuard b("GPUBATCH_MAX_WAIT_US", "1234");
  EnvGuard c("GPUBATCH_OVERFLOW", "block_for");
  EnvGuard d("GPUBATCH_POLICY", "adaptive");
  EnvGuard e("GPUBATCH_COMPLETION_SPIN_US", "75");
  BatchConfig config = BatchConfig::latency();
  config.apply_environment();
  EXPECT_EQ(config.completion_spin, 75us);
  EXPECT_EQ(config.max_batch_size, 77u);
  EXPECT_EQ(config.max_wait, 1234us);
  EXPECT_EQ(config.overflow, OverflowPolicy::block_for);
  EXPECT_EQ(config.policy, FlushPolicy::adaptive);
  EXPECT_EQ(config.queue_capacity, BatchConfig::latency().queue_capacity);
}

TEST(BatchConfig, EnvironmentPresetComesFirst) {
  EnvGuard a("GPUBATCH_PRESET", "throughput");
  EnvGuard b("GPUBATCH_QUEUE_CAPACITY", "4096");
  const auto config = BatchConfig::from_environment(BatchConfig::latency());
  BatchConfig expected = BatchConfig::throughput();
  expected.queue_capacity = 4096;
  EXPECT_EQ(config, expected);
}

TEST(BatchConfig, BadEnvironmentNamesTheVariable) {
  {
    EnvGuard a("GPUBATCH_MAX_BATCH_SIZE", "12x");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_MAX_BATCH_SIZE");
  }
  {
    EnvGuard a("GPUBATCH_QUEUE_CAPACITY", "-5");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_QUEUE_CAPACITY");
  }
  {
    EnvGuard a("GPUBATCH_QUEUE_CAPACITY", "0");
    expect_invalid([] { BatchConfig::from_environment(); }, "queue_capacity");
  }
  {
    EnvGuard a("GPUBATCH_PRESET", "speedy");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_PRESET");
  }
  {
    EnvGuard a("GPUBATCH_COMPLETION_SPIN_US", "-3");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_COMPLETION_SPIN_US");
  }
  {
    EnvGuard a("GPUBATCH_COMPLETION_SPIN_US", "20000");
    expect_invalid([] { BatchConfig::from_environment(); }, "completion_spin_us");
  }
  {
    EnvGuard a("GPUBATCH_LONE_FUTURE_WAITS", "sometimes");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_LONE_FUTURE_WAITS");
  }
  {
    EnvGuard a("GPUBATCH_LONE_FUTURE_WAITS", "off");
    EXPECT_FALSE(BatchConfig::from_environment().lone_future_waits);
  }
  {
    EnvGuard a("GPUBATCH_OVERFLOW", "drop");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_OVERFLOW");
  }
  {
    EnvGuard a("GPUBATCH_DIRECT_BYTES", "0");
    EXPECT_EQ(BatchConfig::from_environment().direct_bytes, 0u);
  }
  {
    EnvGuard a("GPUBATCH_DIRECT_BYTES", "lots");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_DIRECT_BYTES");
  }
}

}  // namespace

TEST(BatchConfig, OnlyKeyValueLinesReachTheTomlParser) {
  // Comments may hold anything; values are integers, booleans or plain strings.
  const auto ok = gpubatch::BatchConfig::from_string(
      "# réglages — UTF-8 in a comment is fine\nmax_batch_size = 1_024  # trailing comment\n"
      "preset = 'latency'\r\n\n");
  EXPECT_EQ(ok.max_batch_size, 1024u);
  for (const char* bad : {"katmg= 00$------m 0\n", "[table]\nx = 1\n", "x = [1, 2]\n", "x = 007\n",
                          "x = \"esc\\\"aped\"\n", "max_batch_size = 12 34\n", "= 5\n", "x 5\n",
                          "x = \"unterminated\n", "x = 1_\n", "x = ré\n"}) {
    try {
      gpubatch::BatchConfig::from_string(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const gpubatch::Error& e) {
      EXPECT_EQ(e.code(), gpubatch::ErrorCode::invalid_config) << bad;
      EXPECT_NE(std::string(e.what()).find(":1:"), std::string::npos) << "names the line: " << e.what();
    }
  }
}

namespace gpubatch::testing {
namespace {

TEST(PriorityConfig, FileAndEnvironmentSetTheLevels) {
  const BatchConfig c = BatchConfig::from_string(
      "priority_levels = 3\npriority_aging_us = 20000\n"
      "level_queue_capacity = \"0, 512, 64\"\nlevel_timeout_us = \"0,0,2000\"");
  EXPECT_EQ(c.priority_levels, 3u);
  EXPECT_EQ(c.priority_aging, std::chrono::microseconds(20000));
  EXPECT_EQ(c.queue_capacity_of(0), c.queue_capacity);
  EXPECT_EQ(c.queue_capacity_of(1), 512u);
  EXPECT_EQ(c.queue_capacity_of(2), 64u);
  EXPECT_EQ(c.level_timeout[2], std::chrono::microseconds(2000));
  EXPECT_EQ(c.level_timeout[1].count(), 0);
  EnvGuard levels("GPUBATCH_PRIORITY_LEVELS", "2");
  EnvGuard timeout("GPUBATCH_LEVEL_TIMEOUT_US", "0,700");
  const BatchConfig e = BatchConfig::from_environment();
  EXPECT_EQ(e.priority_levels, 2u);
  EXPECT_EQ(e.level_timeout[1], std::chrono::microseconds(700));
}

// thread_nice is the one key that may be negative: -20 .. 19, from a file or the environment.
TEST(BatchConfig, ThreadNiceTakesANiceValue) {
  EXPECT_EQ(BatchConfig{}.thread_nice, 0);
  EXPECT_EQ(BatchConfig::from_string("thread_nice = -5").thread_nice, -5);
  EXPECT_EQ(BatchConfig::from_string("thread_nice = 19").thread_nice, 19);
  expect_invalid([] { BatchConfig::from_string("thread_nice = 20", "n.toml"); }, "thread_nice: must be in [-20, 19]");
  expect_invalid([] { BatchConfig::from_string("thread_nice = -21", "n.toml"); }, "thread_nice");
  expect_invalid([] { BatchConfig::from_string("thread_nice = \"low\"", "n.toml"); }, "thread_nice");
  {
    EnvGuard nice("GPUBATCH_THREAD_NICE", "-3");
    EXPECT_EQ(BatchConfig::from_environment().thread_nice, -3);
  }
  {
    EnvGuard nice("GPUBATCH_THREAD_NICE", "x");
    expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_THREAD_NICE");
  }
  BatchConfig c;
  c.thread_nice = 40;
  expect_invalid([&] { c.validate(); }, "thread_nice");
}

// thread_slice_us: 0 (the system's) or what Linux accepts as a fair thread's slice, 100 us .. 100 ms.
TEST(BatchConfig, ThreadSliceTakesZeroOrTheKernelsRange) {
  using std::chrono::microseconds;
  EXPECT_EQ(BatchConfig{}.thread_slice, microseconds(0));
  EXPECT_EQ(BatchConfig::from_string("thread_slice_us = 100").thread_slice, microseconds(100));
  EXPECT_EQ(BatchConfig::from_string("thread_slice_us = 100000").thread_slice, microseconds(100000));
  EXPECT_EQ(BatchConfig::from_string("thread_slice_us = 0").thread_slice, microseconds(0));
  expect_invalid([] { BatchConfig::from_string("thread_slice_us = 99", "s.toml"); },
                 "thread_slice_us: must be 0 (the system's) or in [100, 100000] (got 99)");
  expect_invalid([] { BatchConfig::from_string("thread_slice_us = 100001", "s.toml"); }, "thread_slice_us");
  expect_invalid([] { BatchConfig::from_string("thread_slice_us = -1", "s.toml"); }, "thread_slice_us");
  expect_invalid([] { BatchConfig::from_string("thread_slice_us = \"short\"", "s.toml"); }, "thread_slice_us");
  {
    EnvGuard slice("GPUBATCH_THREAD_SLICE_US", "250");
    EXPECT_EQ(BatchConfig::from_environment().thread_slice, microseconds(250));
  }
  {
    EnvGuard slice("GPUBATCH_THREAD_SLICE_US", "50");
    expect_invalid([] { BatchConfig::from_environment(); }, "thread_slice_us");
  }
  BatchConfig c;
  c.thread_slice = microseconds(1);
  expect_invalid([&] { c.validate(); }, "thread_slice_us");
}

// block_slice_us: the slice a caller's thread asks for while it waits for room until an instant;
// 100 us by default, 0 (the thread's own) or the kernel's range.
TEST(BatchConfig, BlockSliceTakesZeroOrTheKernelsRange) {
  using std::chrono::microseconds;
  EXPECT_EQ(BatchConfig{}.block_slice, microseconds(100));
  for (auto name : BatchConfig::preset_names) EXPECT_EQ(BatchConfig::preset(name).block_slice, microseconds(100)) << name;
  EXPECT_EQ(BatchConfig::from_string("block_slice_us = 0").block_slice, microseconds(0));
  EXPECT_EQ(BatchConfig::from_string("block_slice_us = 100000").block_slice, microseconds(100000));
  expect_invalid([] { BatchConfig::from_string("block_slice_us = 99", "s.toml"); },
                 "block_slice_us: must be 0 (the thread's own) or in [100, 100000] (got 99)");
  expect_invalid([] { BatchConfig::from_string("block_slice_us = 100001", "s.toml"); }, "block_slice_us");
  expect_invalid([] { BatchConfig::from_string("block_slice_us = -1", "s.toml"); }, "block_slice_us");
  expect_invalid([] { BatchConfig::from_string("block_slice_us = true", "s.toml"); }, "block_slice_us");
  {
    EnvGuard slice("GPUBATCH_BLOCK_SLICE_US", "0");
    EXPECT_EQ(BatchConfig::from_environment().block_slice, microseconds(0));
  }
  {
    EnvGuard slice("GPUBATCH_BLOCK_SLICE_US", "10");
    expect_invalid([] { BatchConfig::from_environment(); }, "block_slice_us");
  }
  BatchConfig c;
  c.block_slice = microseconds(200'000);
  expect_invalid([&] { c.validate(); }, "block_slice_us");
}

TEST(PriorityConfig, BadValuesNameTheKey) {
  auto invalid = [](const char* text, const std::string& part) {
    expect_invalid([&] { BatchConfig::from_string(text, "p.toml"); }, part);
  };
  invalid("target_p99_us = -5", "target_p99_us");
  invalid("target_p99_us = 60000001", "target_p99_us: must be in [0, 60000000]");
  EXPECT_EQ(BatchConfig::from_string("target_p99_us = 500").target_p99, std::chrono::microseconds(500));
  invalid("priority_levels = 0", "priority_levels");
  invalid("priority_levels = 9", "priority_levels: must be in [1, 8]");
  invalid("priority_aging_us = 0", "priority_aging_us");
  invalid("level_timeout_us = 5", "comma-separated");
  invalid("level_timeout_us = \"1,x\"", "bad item \"x\"");
  invalid("level_timeout_us = \"1,,2\"", "bad item");
  invalid("level_timeout_us = \"-1\"", "bad item");
  invalid("level_queue_capacity = \"1,2,3,4,5,6,7,8,9\"", "more than 8");
  invalid("level_timeout_us = \"0,1000\"", "names level 1 but priority_levels is 1");
  invalid("priority_levels = 2\nlevel_queue_capacity = \"0,0,5\"", "names level 2");
  invalid("priority_levels = 2\nlevel_queue_capacity = \"0,99999999\"", "level_queue_capacity");
  EnvGuard bad("GPUBATCH_LEVEL_QUEUE_CAPACITY", "a");
  expect_invalid([] { BatchConfig::from_environment(); }, "GPUBATCH_LEVEL_QUEUE_CAPACITY");
}

}  // namespace
}  // namespace gpubatch::testing
