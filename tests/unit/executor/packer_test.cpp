// The packer (src/executor/packer.cpp) on the fake device: batches of many requests are submitted
// on its thread, in the order the strand formed them (small ones sent by the strand in between
// included), a failed submit fails its own batch's requests only, and shutdown waits for what it
// holds. GPUBATCH_PACKER_MIN and GPUBATCH_PACKER (off, levels) are read when an executor is made.
#include "gpubatch/executor.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config_test_util.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/stats.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;

BatchConfig small_batches() {
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = 32;
  c.max_inflight_batches = 2;
  c.completion_threads = 2;
  c.priority_levels = 2;
  return c;
}

// `threads` callers each send `each` relu requests marked thread * 100000 + i, keeping up to 64
// outstanding; every result is checked.
void crowd(BatchedGpuHandle gpu, int threads, int each) {
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([gpu, t, each] {
      std::vector<std::future<std::vector<float>>> out;
      std::vector<float> sent;
      for (int i = 0; i < each; ++i) {
        const float marker = static_cast<float>(t * 100000 + i);
        sent.push_back(marker);
        out.push_back(gpu.relu({marker}));
        if (out.size() >= 64) {
          for (std::size_t k = 0; k < out.size(); ++k) EXPECT_EQ(out[k].get(), std::vector<float>{sent[k]});
          out.clear();
          sent.clear();
        }
      }
      for (std::size_t k = 0; k < out.size(); ++k) EXPECT_EQ(out[k].get(), std::vector<float>{sent[k]});
    });
  }
  for (auto& c : callers) c.join();
}

// Each caller's markers reach the device in the order it sent them.
void expect_each_callers_order(const std::vector<float>& markers, int threads) {
  std::vector<float> last(static_cast<std::size_t>(threads), -1.0f);
  for (float m : markers) {
    const auto t = static_cast<std::size_t>(m / 100000.0f);
    ASSERT_LT(t, last.size());
    EXPECT_GT(m, last[t]) << "caller " << t << "'s request " << m << " reached the device after " << last[t];
    last[t] = m;
  }
}

TEST(Packer, BatchesOfManyRequestsGoThroughThePackerInEachCallersOrder) {
  EnvGuard min("GPUBATCH_PACKER_MIN", "8");
  FakeDevice::Options o;
  o.delay = 200us;  // batches form behind the device
  auto device = std::make_shared<FakeDevice>(o);
  BatchExecutor executor(device, small_batches());
  crowd(executor.handle(), 4, 3000);
  const Stats s = executor.stats();
  EXPECT_GT(s.packed_batches, 0u);
  EXPECT_EQ(s.completed, 12000u);
  EXPECT_EQ(device->requests_seen(), 12000u);
  expect_each_callers_order(device->markers(), 4);
}

TEST(Packer, ALoneCallersBatchesStayOnTheStrand) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, small_batches());  // the default line: 1,024 requests
  auto gpu = executor.handle();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(gpu.relu({static_cast<float>(i)}).get(), std::vector<float>{static_cast<float>(i)});
  EXPECT_EQ(executor.stats().packed_batches, 0u);
}

// GPUBATCH_PACKER chooses which executors use the packer: off none, levels only one with priority
// levels, by default every one. Each caller's order holds either way.
TEST(Packer, TheSwitchChoosesWhichExecutorsUseIt) {
  EnvGuard min("GPUBATCH_PACKER_MIN", "2");
  struct Case {
    const char* mode;  // null: unset
    std::size_t levels;
    bool packs;
  };
  for (const Case k : {Case{"off", 2, false}, Case{"levels", 1, false}, Case{"levels", 2, true}, Case{nullptr, 1, true}}) {
    SCOPED_TRACE(std::string(k.mode ? k.mode : "default") + ", levels " + std::to_string(k.levels));
    std::optional<EnvGuard> mode;
    if (k.mode) mode.emplace("GPUBATCH_PACKER", k.mode);
    FakeDevice::Options o;
    o.delay = 200us;  // batches form behind the device
    auto device = std::make_shared<FakeDevice>(o);
    BatchConfig c = small_batches();
    c.priority_levels = k.levels;
    BatchExecutor executor(device, c);
    crowd(executor.handle(), 2, 2000);
    if (k.packs) EXPECT_GT(executor.stats().packed_batches, 0u);
    else EXPECT_EQ(executor.stats().packed_batches, 0u);
    EXPECT_EQ(executor.stats().completed, 4000u);
    expect_each_callers_order(device->markers(), 2);
  }
}

// A submit that fails on the packer's thread fails that batch's requests with the device's error
// (and recovers the device); the batches before and after complete. The fault is armed while a
// burst keeps the device busy, so the next submit is a batch the strand formed behind it.
TEST(Packer, AFailedSubmitFailsItsOwnBatchOnly) {
  EnvGuard min("GPUBATCH_PACKER_MIN", "4");
  FakeDevice::Options o;
  o.delay = 300us;
  auto device = std::make_shared<FakeDevice>(o);
  BatchConfig c = small_batches();
  c.max_batch_size = 8;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> all;
  for (int i = 0; i < 64; ++i) all.push_back(gpu.relu({1.0f}));
  device->fail_next_submit(ErrorCode::device_lost);
  for (int i = 0; i < 64; ++i) all.push_back(gpu.relu({1.0f}));
  std::size_t failed = 0, ok = 0;
  for (auto& f : all) {
    ASSERT_TRUE(ready_within(f, 30s));
    try {
      EXPECT_EQ(f.get(), std::vector<float>{1.0f});
      ++ok;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::device_lost) << e.what();
      ++failed;
    }
  }
  EXPECT_GE(failed, 1u);
  EXPECT_LE(failed, 8u) << "only the batch whose submit failed";
  EXPECT_EQ(failed + ok, 128u);
  EXPECT_GE(device->recoveries(), 1);
  EXPECT_GT(executor.stats().packed_batches, 0u);
}

// Shutdown (drain) waits for batches the packer holds: the device's submits are held while a
// burst goes in, then released; every request resolves with its value.
TEST(Packer, ShutdownWaitsForWhatThePackerHolds) {
  EnvGuard min("GPUBATCH_PACKER_MIN", "4");
  auto device = std::make_shared<FakeDevice>();
  BatchConfig c = small_batches();
  c.max_batch_size = 8;
  auto executor = std::make_unique<BatchExecutor>(device, c);
  auto gpu = executor->handle();
  // The first, lone request is submitted on its caller's thread (a thread of its own, held
  // there); the burst then waits for the strand.
  device->hold_submits();
  auto lone = std::async(std::launch::async, [gpu] { return gpu.relu({0.5f}).get(); });
  ASSERT_TRUE(device->wait_for_submits_entered(1));
  std::vector<std::future<std::vector<float>>> burst;
  for (int i = 0; i < 200; ++i) burst.push_back(gpu.relu({static_cast<float>(i)}));
  auto stop = std::async(std::launch::async, [&] { executor->shutdown(ShutdownMode::drain); });
  EXPECT_EQ(stop.wait_for(50ms), std::future_status::timeout) << "shutdown waits for the held batches";
  device->release_submits();
  ASSERT_TRUE(ready_within(stop, 30s));
  ASSERT_TRUE(ready_within(lone, 30s));
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(ready_within(burst[static_cast<std::size_t>(i)], 30s));
    EXPECT_EQ(burst[static_cast<std::size_t>(i)].get(), std::vector<float>{static_cast<float>(i)});
  }
  EXPECT_GT(executor->stats().packed_batches, 0u);
}

}  // namespace
}  // namespace gpubatch::testing
