// A lone small result taken as it lands, before the timeline signal (src/gpu/early_results.hpp):
// the sentinel watch on its own, then on the device: every element-wise op's lone result right
// and counted, the size line, a result equal to the sentinel, frames that settle and come back,
// and the switch.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <random>
#include <vector>

#include "gpu/early_results.hpp"
#include "gpu/vulkan_batch_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;
using gpu::EarlyLook;

TEST(EarlyLook, LandsOnlyOnceEveryWordDiffersFromTheSentinel) {
  alignas(16) std::uint32_t words[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EarlyLook look;
  EXPECT_FALSE(look.armed());
  look.arm(reinterpret_cast<std::byte*>(words), sizeof words);
  ASSERT_TRUE(look.armed());
  for (std::uint32_t w : words) EXPECT_EQ(w, EarlyLook::kSentinel) << "arm() fills every word";
  EXPECT_FALSE(look.landed());
  for (int i = 7; i >= 1; --i) words[i] = 0;  // all but the first, last first
  EXPECT_FALSE(look.landed());
  words[0] = std::bit_cast<std::uint32_t>(-1.5f);
  EXPECT_TRUE(look.landed());
  EXPECT_TRUE(look.landed()) << "stays landed";

  look.arm(reinterpret_cast<std::byte*>(words), sizeof words);
  for (auto& w : words) w = 0;
  words[5] = EarlyLook::kSentinel;  // a result that truly equals the sentinel: never lands early
  EXPECT_FALSE(look.landed());
  EXPECT_FALSE(look.landed());
}

namespace {

std::uint64_t early_count(Device& device) { return device.counters().early_results; }

// One request alone, polled until finished (as completion threads and Device::run poll): the
// counter passes only after the results landed, so a watched result is always seen early.
Result polled(Device& device, const Request& r) {
  const Request* one[] = {&r};
  auto batch = device.batch_device()->submit(one);
  while (!batch->poll()) {
  }
  Result result;
  batch->take_result(0, result);
  return result;
}

}  // namespace

// Every built-in element-wise op, alone, at sizes up to the line (1,024 floats = 4 KiB) and just
// past it: right every time, and counted as early below the line only.
TEST(EarlyResults, ALoneElementWiseResultIsTakenAsItLandsAndMatchesTheReference) {
  Device& device = test_device();
  std::mt19937 rng(71);
  for (Op op : elementwise_ops()) {
    for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{256}, std::size_t{1024}, std::size_t{1025}}) {
      for (int again = 0; again < 2; ++again) {  // the second one reuses the frame's recording
        const Request r = sample_request(op, n, rng);
        const std::uint64_t before = early_count(device);
        const Result result = polled(device, r);
        const auto mismatch = reference::check(r, result);
        EXPECT_FALSE(mismatch) << to_string(op) << " on " << n << " floats: " << *mismatch;
        EXPECT_EQ(early_count(device) - before, n * 4 <= gpu::kEarlyResultBytes ? 1u : 0u)
            << to_string(op) << " on " << n << " floats";
      }
    }
    // Device::run takes the same path (early or not, as its wait finds it).
    const Request r = sample_request(op, 256, rng);
    EXPECT_FALSE(reference::check(r, device.run(r))) << to_string(op) << " through Device::run";
  }
}

// relu passes a NaN through by selection, so an input word equal to the sentinel comes back as
// the sentinel: that batch must wait for the counter, and its result is still the right one.
TEST(EarlyResults, AResultEqualToTheSentinelWaitsForTheCounter) {
  Device& device = test_device();
  std::mt19937 rng(72);
  Request r = Request::relu(random_floats(256, rng));
  r.a[100] = std::bit_cast<float>(EarlyLook::kSentinel);
  const std::uint64_t before = early_count(device);
  const Result result = polled(device, r);
  ASSERT_EQ(result.values.size(), 256u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(result.values[100]), EarlyLook::kSentinel) << "relu keeps the NaN's bits";
  EXPECT_FALSE(reference::check(r, result));
  EXPECT_EQ(early_count(device), before) << "a result word equal to the sentinel never looks landed";
  // The next lone request is taken early again.
  const Request plain = Request::relu(random_floats(256, rng));
  EXPECT_FALSE(reference::check(plain, polled(device, plain)));
  EXPECT_EQ(early_count(device), before + 1);
}

// Lone batches back to back, each taken as soon as poll() says so: a frame whose counter had not
// passed settles and comes back, so a few frames serve them all (one leaked per batch would make
// hundreds).
TEST(EarlyResults, SettlingFramesComeBackToThePool) {
  Device& device = test_device();
  auto vulkan = std::dynamic_pointer_cast<gpu::VulkanBatchDevice>(device.batch_device());
  ASSERT_TRUE(vulkan);
  std::mt19937 rng(73);
  device.run(Request::relu(random_floats(256, rng)));  // kernels built, a frame made
  const std::size_t frames = vulkan->frames_made();
  const std::uint64_t before = early_count(device);
  for (int i = 0; i < 300; ++i) {
    const Request r = Request::scale(random_floats(256, rng), float(i));
    const Request* one[] = {&r};
    auto batch = vulkan->submit(one);
    while (!batch->poll()) {
    }
    Result result;
    batch->take_result(0, result);
    ASSERT_FALSE(reference::check(r, result)) << "batch " << i;
  }
  EXPECT_EQ(early_count(device) - before, 300u);
  EXPECT_LE(vulkan->frames_made(), frames + 3) << "settled frames are reused";
}

// GPUBATCH_EARLY_RESULTS=off: results only on the counter; a bad value is a typed error.
TEST(EarlyResults, TheSwitchTurnsItOffAndABadValueIsTyped) {
  ::setenv("GPUBATCH_EARLY_RESULTS", "off", 1);
  {
    Device device;
    std::mt19937 rng(74);
    for (int i = 0; i < 5; ++i) {
      const Request r = Request::relu(random_floats(256, rng));
      EXPECT_FALSE(reference::check(r, polled(device, r)));
    }
    EXPECT_EQ(early_count(device), 0u);
  }
  ::setenv("GPUBATCH_EARLY_RESULTS", "sometimes", 1);
  try {
    Device device;
    device.run(Request::relu({1.0f}));
    ADD_FAILURE() << "GPUBATCH_EARLY_RESULTS=sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    EXPECT_NE(std::string(e.what()).find("GPUBATCH_EARLY_RESULTS"), std::string::npos) << e.what();
  }
  ::unsetenv("GPUBATCH_EARLY_RESULTS");
}
