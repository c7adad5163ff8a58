// The copy-engine path (DESIGN.md "Large requests"): batches at or above the byte threshold go
// host staging -> device-local (vkCmdCopyBuffer, upload timeline) -> kernels -> copy back. On
// lavapipe there is one queue family, so the upload runs on the compute queue; the path, its
// semaphores and its barriers are the same, and the validation layer watches them.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <limits>
#include <random>
#include <mutex>
#include <string>
#include <thread>

#include "gpubatch/batch_device.hpp"
#include "gpu/context.hpp"
#include "gpu/transfer_path.hpp"
#include "gpu/fault_injection.hpp"
#include "gpu/vulkan_batch_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/copy_engine_ops.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {

// The copy-engine tests' request mix (tests/support/copy_engine_ops.hpp; bench/first_batches.cpp
// replays it).
Request random_op(std::mt19937& rng, std::size_t n) { return random_copy_engine_op(rng, n); }

::testing::AssertionResult all_match(detail::InFlightBatch& batch, const std::vector<Request>& requests) {
  if (!batch.wait_for(std::chrono::seconds(120))) return ::testing::AssertionFailure() << "batch did not finish";
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Result result;
    batch.take_result(i, result);
    if (const auto mismatch = reference::check(requests[i], result))
      return ::testing::AssertionFailure() << "request " << i << " (" << describe_op(requests[i]) << "): " << *mismatch;
  }
  return ::testing::AssertionSuccess();
}

std::vector<const Request*> pointers_to(const std::vector<Request>& requests) {
  std::vector<const Request*> out;
  for (const auto& r : requests) out.push_back(&r);
  return out;
}

}  // namespace

TEST(CopyEngine, MixedSmallAndLargeRequestsInOneBatchMatchTheReference) {
  Device device = open_with_threshold(0);  // every batch through the copy engine
  std::mt19937 rng(7);
  for (int round = 0; round < 3; ++round) {
    std::vector<Request> requests;
    for (int i = 0; i < 60; ++i) requests.push_back(random_op(rng, 1 + rng() % 3000));
    requests.push_back(Request::relu(random_floats(300000, rng)));
    requests.push_back(Request::dot(random_floats(200000, rng), random_floats(200000, rng)));
    const auto before = device.counters();
    auto batch = device.batch_device()->submit(pointers_to(requests));
    EXPECT_TRUE(all_match(*batch, requests));
    const auto after = device.counters();
    EXPECT_EQ(after.submissions - before.submissions, 1u) << "one compute submission";
    EXPECT_EQ(after.copy_submissions - before.copy_submissions, 1u) << "one upload submission";
  }
}

TEST(CopyEngine, BatchesChooseTheirPathByBytesAroundTheThreshold) {
  constexpr std::uint64_t kThreshold = 256 * 1024;
  Device device = open_with_threshold(kThreshold);
  std::mt19937 rng(11);
  // relu's upload: one 48-byte segment record, a block table entry (4 bytes) per 256 elements
  // padded to 16 bytes, and the input.
  for (std::size_t floats : {std::size_t{60000}, std::size_t{64000}, std::size_t{65536}, std::size_t{70000}}) {
    std::vector<Request> requests;
    requests.push_back(Request::relu(random_floats(floats, rng)));
    const std::size_t upload = 48 + ((floats + 255) / 256 * 4 + 15) / 16 * 16 + floats * 4;
    const bool via_copy_engine = upload >= kThreshold;
    const auto before = device.counters();
    auto batch = device.batch_device()->submit(pointers_to(requests));
    EXPECT_TRUE(all_match(*batch, requests)) << floats << " floats";
    EXPECT_EQ(device.counters().copy_submissions - before.copy_submissions, via_copy_engine ? 1u : 0u)
        << floats << " floats";
    EXPECT_EQ(device.counters().submissions - before.submissions, 1u);
  }
}

TEST(CopyEngine, ManyBatchesInFlightAtOnce) {
  Device device = open_with_threshold(64 * 1024);
  std::mt19937 rng(13);
  std::vector<std::vector<Request>> batches(8);
  std::vector<std::unique_ptr<detail::InFlightBatch>> in_flight;
  for (auto& requests : batches) {
    for (int i = 0; i < 20; ++i) requests.push_back(random_op(rng, 1 + rng() % 40000));
    in_flight.push_back(device.batch_device()->submit(pointers_to(requests)));
  }
  for (std::size_t b = 0; b < batches.size(); ++b) EXPECT_TRUE(all_match(*in_flight[b], batches[b])) << "batch " << b;
}

// `threads` threads, each calling Device::run on `per_thread` random requests of up to 200,000
// floats; every result checked. A watchdog error on a thread is counted, not thrown there (which
// would end the test binary): docs/RELIABILITY.md "A copy-engine batch that never completes".
static void run_from_threads(Device& device, int threads_n, int per_thread) {
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  for (int t = 0; t < threads_n; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int i = 0; i < per_thread; ++i) {
        Request r = random_op(rng, 1000 + rng() % 200000);
        try {
          if (reference::check(r, device.run(r))) ++mismatches;
        } catch (const Error& e) {
          std::lock_guard lock(errors_mutex);
          errors.push_back(e.what());
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, the first: " << (errors.empty() ? "" : errors.front());
}

TEST(CopyEngine, ThreadsRunningLargeRequestsConcurrently) {
  Device device = open_with_threshold(0);
  run_from_threads(device, 4, 6);
}

// The same load on the direct path, and on the copy engine from one thread: beside the test
// above they tell which part a hang belongs to (RELIABILITY.md).
TEST(CopyEngine, ThreadsRunningLargeRequestsConcurrentlyOnTheDirectPath) {
  Device device = open_with_threshold(std::numeric_limits<std::uint64_t>::max());
  run_from_threads(device, 4, 6);
}

TEST(CopyEngine, OneThreadRunningLargeRequests) {
  Device device = open_with_threshold(0);
  run_from_threads(device, 1, 24);
}

TEST(CopyEngine, DefaultThresholdFollowsTheDevicesMemory) {
  Device device;
  auto vulkan = std::dynamic_pointer_cast<gpu::VulkanBatchDevice>(device.batch_device());
  ASSERT_TRUE(vulkan);
  if (std::getenv("GPUBATCH_COPY_ENGINE_BYTES")) GTEST_SKIP() << "GPUBATCH_COPY_ENGINE_BYTES is set";
  if (device.info().type == "cpu")  // lavapipe: device memory is host memory, a copy buys nothing
    EXPECT_EQ(vulkan->copy_engine_bytes(), std::numeric_limits<std::uint64_t>::max());
  else if (device.info().type == "discrete") {
    // Only for batches that prefer device memory (matmul, per-segment kernels): the others go direct.
    EXPECT_EQ(vulkan->copy_engine_bytes(), 256u * 1024);
    EXPECT_FALSE(vulkan->copy_engine_streaming());
  }
}

// The default's rule: streaming batches (every op but matmul) read host memory directly at any
// size, because on the H100 that beat the copy engine in 24 of 25 comparisons (DESIGN.md "Large
// requests"); batches that prefer device memory copy their inputs there first. A threshold
// set by the caller applies to every batch.
TEST(CopyEngine, RuleTakesStreamingBatchesOnlyWhenSetExplicitly) {
  const gpu::CopyEngineRule by_default{256 * 1024, false}, explicit_line{256 * 1024, true};
  EXPECT_FALSE(by_default.takes(64 << 20, false));
  EXPECT_TRUE(by_default.takes(256 * 1024, true));
  EXPECT_FALSE(by_default.takes(256 * 1024 - 1, true));
  EXPECT_TRUE(explicit_line.takes(256 * 1024, false));
  EXPECT_FALSE(explicit_line.takes(1000, true));
}

TEST(CopyEngine, EnvironmentKnobIsParsedAndBadValuesAreTyped) {
  ::setenv("GPUBATCH_COPY_ENGINE_BYTES", "4096", 1);
  {
    Device device;
    auto vulkan = std::dynamic_pointer_cast<gpu::VulkanBatchDevice>(device.batch_device());
    EXPECT_EQ(vulkan->copy_engine_bytes(), 4096u);
    EXPECT_TRUE(vulkan->copy_engine_streaming());
  }
  ::setenv("GPUBATCH_COPY_ENGINE_BYTES", "lots", 1);
  try {
    Device device;
    ADD_FAILURE() << "a bad GPUBATCH_COPY_ENGINE_BYTES was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
  }
  ::unsetenv("GPUBATCH_COPY_ENGINE_BYTES");
}

// Direct-path batches from 256 KiB of upload on are packed into host-cached memory: results are
// the same on either side of the line and with it moved; a bad value is a typed error.
TEST(CopyEngine, CachedUploadLineKeepsResultsAndBadValuesAreTyped) {
  for (const char* line : {"never", "0", "262144"}) {
    ::setenv("GPUBATCH_CACHED_UPLOAD_BYTES", line, 1);
    Device device = open_with_threshold(std::numeric_limits<std::uint64_t>::max());
    std::mt19937 rng(17);
    std::vector<Request> requests;
    for (int i = 0; i < 6; ++i) requests.push_back(random_op(rng, 1 + rng() % 90000));
    auto batch = device.batch_device()->submit(pointers_to(requests));
    EXPECT_TRUE(all_match(*batch, requests)) << "GPUBATCH_CACHED_UPLOAD_BYTES=" << line;
  }
  ::setenv("GPUBATCH_CACHED_UPLOAD_BYTES", "big", 1);
  try {
    Device device;
    ADD_FAILURE() << "a bad GPUBATCH_CACHED_UPLOAD_BYTES was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
  }
  ::unsetenv("GPUBATCH_CACHED_UPLOAD_BYTES");
}

// Small direct-path batches pack into device-local memory the host maps, where the device has
// it over a large heap; a lone batch (at most two requests) up to its own line; the rest as
// before. The rule alone:
TEST(CopyEngine, UploadPlaceFollowsTheLines) {
  gpu::PathRules rules;
  rules.cached_upload_bytes = 256 * 1024;
  rules.near_upload_bytes = 64 * 1024;
  rules.near_lone_bytes = std::numeric_limits<std::uint64_t>::max();  // the default: below the cached line
  using gpu::UploadPlace;
  const std::size_t many = 3, lone = gpu::kNearLoneRequests;
  EXPECT_EQ(gpu::upload_place(1024, many, rules, true), UploadPlace::near);
  EXPECT_EQ(gpu::upload_place(64 * 1024, many, rules, true), UploadPlace::near) << "the line is inclusive";
  EXPECT_EQ(gpu::upload_place(64 * 1024 + 1, many, rules, true), UploadPlace::write_combined);
  EXPECT_EQ(gpu::upload_place(64 * 1024 + 1, lone, rules, true), UploadPlace::near) << "a lone batch's line";
  EXPECT_EQ(gpu::upload_place(256 * 1024 - 1, 1, rules, true), UploadPlace::near);
  EXPECT_EQ(gpu::upload_place(256 * 1024, 1, rules, true), UploadPlace::cached) << "the cached line first";
  EXPECT_EQ(gpu::upload_place(1024, 1, rules, false), UploadPlace::write_combined) << "no such memory";
  EXPECT_EQ(gpu::upload_place(256 * 1024, many, rules, true), UploadPlace::cached);
  rules.near_lone_bytes = 0;  // GPUBATCH_NEAR_LONE_BYTES=off: the general line for lone batches too
  EXPECT_EQ(gpu::upload_place(64 * 1024 + 1, 1, rules, true), UploadPlace::write_combined);
  EXPECT_EQ(gpu::upload_place(64 * 1024, 1, rules, true), UploadPlace::near);
  rules.near_big = true;  // GPUBATCH_NEAR_BIG (the default): past the cached line too
  EXPECT_EQ(gpu::upload_place(256 * 1024, many, rules, true), UploadPlace::near);
  EXPECT_EQ(gpu::upload_place(64 << 20, 1, rules, true), UploadPlace::near);
  EXPECT_EQ(gpu::upload_place(256 * 1024, many, rules, false), UploadPlace::cached) << "no such memory";
  EXPECT_EQ(gpu::upload_place(100 * 1024, many, rules, true), UploadPlace::write_combined) << "between the lines";
  rules.near_lone_bytes = std::numeric_limits<std::uint64_t>::max();
  rules.near_upload_bytes = 0;  // GPUBATCH_NEAR_UPLOAD_BYTES=off: no batch at all
  EXPECT_EQ(gpu::upload_place(256 * 1024, many, rules, true), UploadPlace::cached);
  EXPECT_EQ(gpu::upload_place(1024, 1, rules, true), UploadPlace::write_combined);
  EXPECT_EQ(gpu::upload_place(1024, many, rules, true), UploadPlace::write_combined);
}

// Results are the same with the near line on, moved and off, batch after batch in one frame
// (a lone caller's recorded command buffer reused over near memory); a bad value is typed.
TEST(CopyEngine, NearUploadLineKeepsResultsAndBadValuesAreTyped) {
  ::setenv("GPUBATCH_NEAR_MEMORY", "separate", 1);  // near frames of their own on lavapipe too
  for (const char* line : {"off", "65536", "4096"}) {
    ::setenv("GPUBATCH_NEAR_UPLOAD_BYTES", line, 1);
    ::setenv("GPUBATCH_NEAR_LONE_BYTES", line[0] == '4' ? "off" : "100000", 1);
    ::setenv("GPUBATCH_NEAR_BIG", line[0] == '6' ? "off" : "on", 1);
    Device device = open_with_threshold(std::numeric_limits<std::uint64_t>::max());
    std::mt19937 rng(29);
    for (int b = 0; b < 4; ++b) {
      std::vector<Request> requests;
      // Batches 0-1 small, 2 of a few thousand floats, 3 past the cached line (256 KiB).
      const std::size_t most = b < 2 ? 256 : b == 2 ? 9000 : 120000;
      for (int i = 0; i < 1 + b % 3; ++i) requests.push_back(random_op(rng, 1 + rng() % most));
      auto batch = device.batch_device()->submit(pointers_to(requests));
      EXPECT_TRUE(all_match(*batch, requests)) << "GPUBATCH_NEAR_UPLOAD_BYTES=" << line << ", batch " << b;
    }
  }
  ::unsetenv("GPUBATCH_NEAR_LONE_BYTES");
  ::unsetenv("GPUBATCH_NEAR_MEMORY");
  for (const char* name :
       {"GPUBATCH_NEAR_UPLOAD_BYTES", "GPUBATCH_NEAR_LONE_BYTES", "GPUBATCH_NEAR_BIG", "GPUBATCH_NEAR_MEMORY"}) {
    ::setenv(name, "near", 1);
    try {
      Device device;
      ADD_FAILURE() << "a bad " << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    }
    ::unsetenv(name);
  }
}

// A device whose own heap has no room for a near frame: the batch packs into system memory and
// succeeds; that frame does not try again (one refused allocation, not one per batch).
TEST(CopyEngine, ANearFrameTheDeviceHasNoRoomForFallsBackToSystemMemory) {
  ::setenv("GPUBATCH_NEAR_MEMORY", "separate", 1);
  Device device = open_with_threshold(std::numeric_limits<std::uint64_t>::max());
  ::unsetenv("GPUBATCH_NEAR_MEMORY");
  std::mt19937 rng(31);
  const auto before = gpu::FaultInjector::fired(gpu::Fault::device_out_of_memory);
  gpu::FaultInjector::arm(gpu::Fault::device_out_of_memory);  // the batch's first allocation: its near frame
  for (int b = 0; b < 3; ++b) {
    std::vector<Request> requests{random_op(rng, 1 + rng() % 4000)};
    auto batch = device.batch_device()->submit(pointers_to(requests));
    EXPECT_TRUE(all_match(*batch, requests)) << "batch " << b;
    EXPECT_EQ(gpu::FaultInjector::fired(gpu::Fault::device_out_of_memory), before + 1) << "batch " << b;
    if (b == 0) gpu::FaultInjector::arm(gpu::Fault::device_out_of_memory);  // would hit a retried near frame
  }
  gpu::FaultInjector::disarm_all();
}

// GPUBATCH_UPLOAD_WAIT=host (a diagnostic): the host waits for each upload and the compute
// submission waits on no semaphore; results are the same. A bad value is a typed error.
TEST(CopyEngine, UploadWaitOnTheHostKeepsResultsAndBadValuesAreTyped) {
  for (const char* mode : {"host", "device"}) {
    ::setenv("GPUBATCH_UPLOAD_WAIT", mode, 1);
    Device device = open_with_threshold(0);  // every batch through the copy engine
    std::mt19937 rng(23);
    for (int b = 0; b < 3; ++b) {
      std::vector<Request> requests;
      for (int i = 0; i < 8; ++i) requests.push_back(random_op(rng, 1 + rng() % 50000));
      auto batch = device.batch_device()->submit(pointers_to(requests));
      EXPECT_TRUE(all_match(*batch, requests)) << "GPUBATCH_UPLOAD_WAIT=" << mode;
    }
  }
  ::setenv("GPUBATCH_UPLOAD_WAIT", "sometimes", 1);
  try {
    Device device;
    ADD_FAILURE() << "a bad GPUBATCH_UPLOAD_WAIT was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    EXPECT_NE(std::string(e.what()).find("GPUBATCH_UPLOAD_WAIT"), std::string::npos) << e.what();
  }
  ::unsetenv("GPUBATCH_UPLOAD_WAIT");
}

// A failed upload submission, a lost wait or device memory that cannot be had: the batch fails
// with its typed error, and the next batch on the same device runs and is right.
TEST(CopyEngine, FaultsFailTheirBatchAndTheNextOneRuns) {
  using gpu::Fault;
  using gpu::FaultInjector;
  struct Disarm {
    ~Disarm() { FaultInjector::disarm_all(); }
  } disarm;
  Device device = open_with_threshold(0);
  std::mt19937 rng(17);
  const std::pair<Fault, ErrorCode> faults[] = {{Fault::submit_device_lost, ErrorCode::device_lost},
                                                {Fault::wait_device_lost, ErrorCode::device_lost},
                                                {Fault::device_out_of_memory, ErrorCode::out_of_memory}};
  for (const auto& [fault, code] : faults) {
    // Out of memory needs an allocation: a request larger than a pool block (64 MiB) and than
    // anything this frame held before.
    const std::size_t floats = fault == Fault::device_out_of_memory ? 17u << 20 : 1u << 20;
    std::vector<Request> requests;
    requests.push_back(Request::relu(random_floats(floats, rng)));
    FaultInjector::arm(fault);
    try {
      auto batch = device.batch_device()->submit(pointers_to(requests));
      batch->wait_for(std::chrono::seconds(60));
      ADD_FAILURE() << "fault " << static_cast<int>(fault) << " did not fail the batch";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
    FaultInjector::disarm_all();
    auto batch = device.batch_device()->submit(pointers_to(requests));
    EXPECT_TRUE(all_match(*batch, requests)) << "after fault " << static_cast<int>(fault);
  }
}

// The staging copy leaves out the ranges host buffers fill, so no byte crosses the bus twice.
TEST(CopyEngine, StagedRegionsSkipHostBufferRangesInAnyOrder) {
  using gpu::BufferCopy;
  const auto regions = [](std::size_t total, std::vector<BufferCopy> holes) {
    std::vector<std::array<VkDeviceSize, 3>> out;
    for (const VkBufferCopy& c : gpu::staged_regions(total, holes, 1000, 5000))
      out.push_back({c.srcOffset, c.dstOffset, c.size});
    return out;
  };
  using R = std::vector<std::array<VkDeviceSize, 3>>;
  EXPECT_EQ(regions(0, {}), R{});
  EXPECT_EQ(regions(64, {}), (R{{1000, 5000, 64}}));
  // Two holes given out of order, one at the very start; a gap between them and a tail.
  EXPECT_EQ(regions(100, {{VK_NULL_HANDLE, 0, 40, 20}, {VK_NULL_HANDLE, 0, 0, 16}}),
            (R{{1016, 5016, 24}, {1060, 5060, 40}}));
  // Holes that cover everything, and one that runs past the end.
  EXPECT_EQ(regions(32, {{VK_NULL_HANDLE, 0, 0, 16}, {VK_NULL_HANDLE, 0, 16, 16}}), R{});
  EXPECT_EQ(regions(48, {{VK_NULL_HANDLE, 0, 32, 64}}), (R{{1000, 5000, 32}}));
}
