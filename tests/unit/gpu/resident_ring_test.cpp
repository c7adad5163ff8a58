// The resident ring on the device (lavapipe here, under the validation layer): every served op
// against the CPU reference, the kernel's idle exit and re-arm, a full ring, the watchdog
// (a doorbell never rung: device_lost, then a new ring works), and the fallback when the
// device cannot host a ring.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/fault_injection.hpp"
#include "gpu/resident_ring.hpp"
#include "gpu/vulkan_batch_device.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;
using gpubatch::gpu::Fault;
using gpubatch::gpu::FaultInjector;
using gpubatch::gpu::ResidentOptions;
using gpubatch::gpu::ResidentRing;

namespace {

struct Disarm {
  ~Disarm() { FaultInjector::disarm_all(); }
};

// Short idle time: on lavapipe a spinning kernel occupies a CPU thread.
ResidentOptions quick(std::chrono::milliseconds watchdog = std::chrono::milliseconds(20000)) {
  ResidentOptions o;
  o.idle = std::chrono::microseconds(2000);
  o.watchdog = watchdog;
  return o;
}

std::shared_ptr<ResidentRing> open_ring(const ResidentOptions& o = quick()) {
  return ResidentRing::create(test_device().context(), DeviceOptions{}, o);
}

Result serve(ResidentRing& ring, const Request& r) {
  auto batch = ring.try_submit(r);
  if (!batch) throw std::runtime_error("the ring refused the request");
  EXPECT_TRUE(batch->wait_for(std::chrono::seconds(20)));
  Result out;
  batch->take_result(0, out);
  return out;
}

Request make(Op op, std::size_t n, std::mt19937& rng) {
  std::vector<float> a = random_floats(n, rng, -6.0f, 6.0f), b = random_floats(n, rng, -6.0f, 6.0f);
  if (n >= 4) {  // values the kernels must keep as IEEE says
    a[0] = std::numeric_limits<float>::quiet_NaN();
    a[1] = -0.0f;
    a[2] = std::numeric_limits<float>::infinity();
    a[3] = 1e-30f;
  }
  switch (op) {
    case Op::add: return Request::add(std::move(a), std::move(b));
    case Op::sub: return Request::sub(std::move(a), std::move(b));
    case Op::mul: return Request::mul(std::move(a), std::move(b));
    case Op::lerp: return Request::lerp(std::move(a), std::move(b), 0.375f);
    case Op::dot: return Request::dot(random_floats(n, rng), std::move(b));
    case Op::scale: return Request::scale(std::move(a), -1.5f);
    default: return Request::unary(op, std::move(a));
  }
}

}  // namespace

// Both places for results: host memory of their own (the default) and the ring itself, over
// the inputs (GPUBATCH_RESIDENT_RESULTS=ring).
class ResidentResults : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Placement, ResidentResults, ::testing::Values("host", "ring"),
                         [](const auto& info) { return std::string(info.param); });

TEST_P(ResidentResults, ServesEveryOpAsTheReferenceSays) {
  ::setenv("GPUBATCH_RESIDENT_RESULTS", GetParam(), 1);
  auto ring = open_ring();
  ::unsetenv("GPUBATCH_RESIDENT_RESULTS");
  EXPECT_EQ(ring->host_results(), std::string(GetParam()) == "host");
  std::mt19937 rng(11);
  const Op ops[] = {Op::relu, Op::scale, Op::add, Op::sub, Op::mul, Op::sigmoid,
                    Op::tanh, Op::swish, Op::gelu, Op::lerp, Op::dot};
  for (Op op : ops) {
    for (std::size_t n : {1u, 5u, 256u, 257u, 1000u}) {
      const Request r = make(op, n, rng);
      ASSERT_TRUE(ring->fits(r)) << to_string(op) << " " << n;
      const Result got = serve(*ring, r);
      const auto mismatch = reference::check(r, got);
      EXPECT_FALSE(mismatch.has_value()) << to_string(op) << " n=" << n << ": " << mismatch.value_or("");
    }
  }
  // The largest requests a slot holds.
  for (const Request& r : {make(Op::gelu, 2032, rng), make(Op::dot, 1016, rng), make(Op::add, 1016, rng)}) {
    ASSERT_TRUE(ring->fits(r));
    EXPECT_FALSE(reference::check(r, serve(*ring, r)).has_value()) << to_string(r.op);
  }
}

TEST(ResidentRing, RefusesWhatDoesNotFitASlot) {
  std::mt19937 rng(3);
  const std::uint32_t slot = ResidentOptions{}.slot_bytes;
  EXPECT_FALSE(ResidentRing::serves(make(Op::relu, 2033, rng), slot));
  EXPECT_FALSE(ResidentRing::serves(make(Op::add, 1017, rng), slot));
  EXPECT_FALSE(ResidentRing::serves(make(Op::dot, 1017, rng), slot));
  EXPECT_FALSE(ResidentRing::serves(Request::matmul({1, 2, 3, 4}, {1, 2, 3, 4}, 2, 2, 2), slot));
  EXPECT_FALSE(ResidentRing::serves(Request::gradients(random_states(2, rng)), slot));
}

TEST(ResidentRing, KernelLeavesWhenIdleAndIsRearmed) {
  auto ring = open_ring();
  std::mt19937 rng(5);
  const Request r = make(Op::relu, 64, rng);
  EXPECT_FALSE(reference::check(r, serve(*ring, r)).has_value());
  EXPECT_EQ(ring->arms(), 1u);
  // Idle 2 ms: the dispatch ends on its own (generous bound for a loaded 2-core machine).
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ring->kernel_running() && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(ring->kernel_running());
  for (int i = 0; i < 3; ++i) {
    const Request again = make(Op::tanh, 300, rng);
    const auto mismatch = reference::check(again, serve(*ring, again));
    EXPECT_FALSE(mismatch.has_value()) << *mismatch;
  }
  EXPECT_GE(ring->arms(), 2u);
}

TEST(ResidentRing, FullRingRefusesUntilAResultIsDropped) {
  ResidentOptions o = quick();
  o.slots = 4;
  auto ring = open_ring(o);
  std::mt19937 rng(7);
  std::vector<std::unique_ptr<detail::InFlightBatch>> held;
  std::vector<Request> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back(make(Op::sigmoid, 100, rng));
    held.push_back(ring->try_submit(requests.back()));
    ASSERT_NE(held.back(), nullptr);
  }
  const Request extra = make(Op::relu, 10, rng);
  EXPECT_EQ(ring->try_submit(extra), nullptr);  // every slot is held
  for (std::size_t i = 0; i < held.size(); ++i) {
    ASSERT_TRUE(held[i]->wait_for(std::chrono::seconds(20)));
    Result out;
    held[i]->take_result(0, out);
    EXPECT_FALSE(reference::check(requests[i], out).has_value());
  }
  held.erase(held.begin());  // slot 0 is free again: the next ticket goes there
  EXPECT_FALSE(reference::check(extra, serve(*ring, extra)).has_value());
}

TEST(ResidentRing, WatchdogTurnsAStalledRingIntoDeviceLost) {
  Disarm d;
  auto ring = open_ring(quick(std::chrono::milliseconds(300)));
  std::mt19937 rng(9);
  const Request ok = make(Op::relu, 32, rng);
  EXPECT_FALSE(reference::check(ok, serve(*ring, ok)).has_value());
  FaultInjector::arm(Fault::resident_stall);
  const Request stalled = make(Op::add, 32, rng), behind = make(Op::mul, 32, rng);
  auto a = ring->try_submit(stalled);
  auto b = ring->try_submit(behind);  // served in order: it waits behind the stalled one
  ASSERT_TRUE(a && b);
  auto code_of = [](detail::InFlightBatch& batch) {
    try {
      batch.wait_for(std::chrono::seconds(20));
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::internal;
  };
  EXPECT_EQ(code_of(*a), ErrorCode::device_lost);
  EXPECT_EQ(code_of(*b), ErrorCode::device_lost);
  EXPECT_TRUE(ring->lost());
  EXPECT_EQ(ring->try_submit(ok), nullptr);
  a.reset();
  b.reset();
  ring.reset();  // its kernel was told to leave
  auto fresh = open_ring();
  EXPECT_FALSE(reference::check(ok, serve(*fresh, ok)).has_value());
}

TEST(ResidentRing, DeviceWithoutTheFeatureFallsBack) {
  Disarm d;
  FaultInjector::arm(Fault::resident_unavailable);
  try {
    open_ring();
    ADD_FAILURE() << "the ring opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::no_device);
  }
  FaultInjector::arm(Fault::resident_unavailable);
  auto device = std::make_shared<gpu::VulkanBatchDevice>(test_device().identity(), 0);
  EXPECT_FALSE(device->start_resident({}));
  std::mt19937 rng(1);
  EXPECT_EQ(device->try_submit_resident(make(Op::relu, 8, rng)), nullptr);
}

TEST(ResidentRing, BatchDeviceServesThroughItsRing) {
  auto device = std::make_shared<gpu::VulkanBatchDevice>(test_device().identity(), 0);
  detail::ResidentSettings settings;
  settings.idle = std::chrono::microseconds(2000);
  ASSERT_TRUE(device->start_resident(settings));
  std::mt19937 rng(2);
  const Request small = make(Op::swish, 128, rng);
  auto batch = device->try_submit_resident(small);
  ASSERT_NE(batch, nullptr);
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(20)));
  Result out;
  batch->take_result(0, out);
  EXPECT_FALSE(reference::check(small, out).has_value());
  EXPECT_EQ(device->try_submit_resident(make(Op::relu, 5000, rng)), nullptr);  // too big
}
