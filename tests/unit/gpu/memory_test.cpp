// The Vulkan memory pool: many sub-allocations share a few blocks; oversized requests get a block
// of their own that is returned when freed; host-visible kinds are mapped and addressable.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/fault_injection.hpp"
#include "gpubatch/error.hpp"
#include "gpu/memory.hpp"
#include "test_device.hpp"

using namespace gpubatch::gpu;

TEST(MemoryPool, ManyAllocationsShareOneBlock) {
  MemoryPool pool(*test_device().context(), /*grow_ahead=*/false);
  const auto before = pool.stats(MemoryKind::upload);
  EXPECT_EQ(before.blocks, 0u);
  {
    std::vector<Allocation> allocations;
    for (int i = 0; i < 500; ++i) allocations.push_back(pool.allocate(MemoryKind::upload, 4096 + i));
    const auto during = pool.stats(MemoryKind::upload);
    EXPECT_EQ(during.blocks, 1u) << "500 small buffers (2.1 MiB) fit the first block";
    EXPECT_EQ(during.reserved_bytes, MemoryPool::kFirstBlockSize);
    for (std::size_t i = 1; i < allocations.size(); ++i) {
      EXPECT_EQ(allocations[i].offset() % MemoryPool::kAlignment, 0u);
      EXPECT_NE(allocations[i].address(), allocations[i - 1].address());
      ASSERT_NE(allocations[i].mapped(), nullptr);
      std::memset(allocations[i].mapped(), static_cast<int>(i), allocations[i].size());
    }
    for (std::size_t i = 1; i < allocations.size(); ++i)
      ASSERT_EQ(static_cast<unsigned char>(allocations[i].mapped()[allocations[i].size() - 1]),
                static_cast<unsigned char>(i)) << "allocations do not overlap";
  }
  EXPECT_EQ(pool.stats(MemoryKind::upload).used_bytes, before.used_bytes) << "all returned";
}

TEST(MemoryPool, OversizedAllocationGetsItsOwnBlockAndGivesItBack) {
  auto& pool = test_device().context()->memory();
  pool.wait_for_growth();  // a grow-ahead block of an earlier test must not land in between
  const auto before = pool.stats(MemoryKind::device_local);
  {
    Allocation big = pool.allocate(MemoryKind::device_local, MemoryPool::kBlockSize + 12345);
    const auto during = pool.stats(MemoryKind::device_local);
    EXPECT_EQ(during.blocks, before.blocks + 1);
    EXPECT_GE(big.size(), MemoryPool::kBlockSize + 12345);
    EXPECT_NE(big.address(), 0u);
  }
  EXPECT_EQ(pool.stats(MemoryKind::device_local).blocks, before.blocks);
}

TEST(MemoryPool, MovedAllocationIsReleasedOnce) {
  auto& pool = test_device().context()->memory();
  const auto before = pool.stats(MemoryKind::readback).used_bytes;
  {
    Allocation a = pool.allocate(MemoryKind::readback, 1000);
    Allocation b = std::move(a);
    EXPECT_FALSE(a);
    EXPECT_TRUE(b);
    Allocation c;
    c = std::move(b);
    EXPECT_EQ(pool.stats(MemoryKind::readback).used_bytes, before + 1000);
  }
  EXPECT_EQ(pool.stats(MemoryKind::readback).used_bytes, before);
}

TEST(MemoryPool, AllocationBeyondTheDeviceLimitIsOutOfMemory) {
  auto ctx = test_device().context();
  try {
    ctx->memory().allocate(MemoryKind::device_local, ctx->max_allocation_bytes() + 1);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (const gpubatch::Error& e) {
    EXPECT_EQ(e.code(), gpubatch::ErrorCode::out_of_memory);
  }
}

// A kind's first block is small (pinning 64 MiB took 16-22 ms on the H100 inside a submit); once
// more than half of the kind's pool is in use, the pool's grower makes a full block in the
// background, and the allocations that follow land in it without making one themselves.
TEST(MemoryPool, TheFirstBlockIsSmallAndGrowAheadMakesAFullOneInTheBackground) {
  MemoryPool pool(*test_device().context(), /*grow_ahead=*/true);
  Allocation a = pool.allocate(MemoryKind::staging, 1 << 20);
  pool.wait_for_growth();
  auto s = pool.stats(MemoryKind::staging);
  EXPECT_EQ(s.blocks, 1u);
  EXPECT_EQ(s.reserved_bytes, MemoryPool::kFirstBlockSize) << "a quarter used: no growth";
  Allocation b = pool.allocate(MemoryKind::staging, 1536 << 10);  // 2.5 of 4 MiB used
  pool.wait_for_growth();
  s = pool.stats(MemoryKind::staging);
  EXPECT_EQ(s.blocks, 2u);
  EXPECT_EQ(s.reserved_bytes, MemoryPool::kFirstBlockSize + MemoryPool::kBlockSize);
  std::vector<Allocation> more;
  for (int i = 0; i < 8; ++i) more.push_back(pool.allocate(MemoryKind::staging, 3 << 20));
  EXPECT_EQ(pool.stats(MemoryKind::staging).blocks, 2u) << "24 MiB more fit the grown block";
  for (auto& m : more) {
    ASSERT_NE(m.mapped(), nullptr);
    std::memset(m.mapped(), 0x5a, m.size());
  }
  EXPECT_EQ(pool.stats(MemoryKind::device_local).blocks, 0u) << "other kinds untouched";
}

// A first block as large as the allocation needs (twice it, up to a full block).
TEST(MemoryPool, AFirstBlockFitsTwiceItsAllocation) {
  MemoryPool pool(*test_device().context(), /*grow_ahead=*/false);
  Allocation a = pool.allocate(MemoryKind::readback, 3 << 20);
  EXPECT_EQ(pool.stats(MemoryKind::readback).reserved_bytes, VkDeviceSize{6} << 20);
  Allocation b = pool.allocate(MemoryKind::device_local, 40 << 20);
  EXPECT_EQ(pool.stats(MemoryKind::device_local).reserved_bytes, MemoryPool::kBlockSize);
}

// Grow-ahead never takes a fault a test armed (its failure would be silent): the armed fault is
// met by the next block a request itself needs.
TEST(MemoryPool, GrowAheadLeavesAnArmedFaultToTheRequests) {
  struct Disarm {
    ~Disarm() { FaultInjector::disarm_all(); }
  } disarm;
  MemoryPool pool(*test_device().context(), /*grow_ahead=*/true);
  Allocation a = pool.allocate(MemoryKind::upload, 1 << 20);  // first block, 4 MiB
  FaultInjector::arm(Fault::device_out_of_memory);
  const auto fired = FaultInjector::fired(Fault::device_out_of_memory);
  Allocation b = pool.allocate(MemoryKind::upload, 1536 << 10);  // fits; starts the grower
  pool.wait_for_growth();
  EXPECT_EQ(pool.stats(MemoryKind::upload).blocks, 2u);
  EXPECT_EQ(FaultInjector::fired(Fault::device_out_of_memory), fired);
  try {
    pool.allocate(MemoryKind::upload, MemoryPool::kBlockSize + 1);
    ADD_FAILURE() << "expected the armed out_of_memory";
  } catch (const gpubatch::Error& e) {
    EXPECT_EQ(e.code(), gpubatch::ErrorCode::out_of_memory);
  }
  EXPECT_EQ(FaultInjector::fired(Fault::device_out_of_memory), fired + 1);
}

// A pool destroyed while its grower makes a block, with allocations racing on other threads,
// waits for the grower and frees everything (the validation layer reports a leaked block).
TEST(MemoryPool, APoolDestroyedWhileGrowingFreesEverything) {
  for (int round = 0; round < 3; ++round) {
    MemoryPool pool(*test_device().context(), /*grow_ahead=*/true);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&pool, t] {
        std::vector<Allocation> held;
        for (int i = 0; i < 40; ++i) {
          held.push_back(pool.allocate(t ? MemoryKind::readback : MemoryKind::upload, (64 + i) << 10));
          if (i % 3 == 0) held.erase(held.begin());
        }
      });
    for (auto& t : threads) t.join();
    Allocation last = pool.allocate(MemoryKind::device_local, 3 << 20);  // 3 of 6 MiB: no growth
    Allocation more = pool.allocate(MemoryKind::device_local, 1 << 20);  // 4 of 6: the grower starts
  }  // the allocations go first, then the pool, possibly mid-growth
}
