// The Vulkan memory pool: many sub-allocations share a few blocks; oversized requests get a block
// of their own that is returned when freed; host-visible kinds are mapped and addressable.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "gpu/context.hpp"
#include "gpubatch/error.hpp"
#include "gpu/memory.hpp"
#include "test_device.hpp"

using namespace gpubatch::gpu;

TEST(MemoryPool, ManyAllocationsShareOneBlock) {
  auto& pool = test_device().context()->memory();
  const auto before = pool.stats(MemoryKind::upload);
  {
    std::vector<Allocation> allocations;
    for (int i = 0; i < 500; ++i) allocations.push_back(pool.allocate(MemoryKind::upload, 4096 + i));
    const auto during = pool.stats(MemoryKind::upload);
    EXPECT_LE(during.blocks, before.blocks + 1) << "500 small buffers fit one 64 MiB block";
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

// Blocks are made and freed outside the pool's lock: threads making blocks of their own at once,
// beside threads taking small allocations, each get disjoint memory, and every oversized block is
// given back.
TEST(MemoryPool, ThreadsMakingBlocksAtOnceGetDisjointMemory) {
  auto& pool = test_device().context()->memory();
  pool.allocate(MemoryKind::readback, 1000);  // a block for the small ones (a fresh pool has none)
  const auto before = pool.stats(MemoryKind::readback);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 2; ++round) {
        const VkDeviceSize size = t < 3 ? MemoryPool::kBlockSize + 4096 * (t + 1) : 1000 + t;
        Allocation a = pool.allocate(MemoryKind::readback, size);
        if (a.size() < size || a.mapped() == nullptr) ++failures;
        std::memset(a.mapped(), t + 1, static_cast<std::size_t>(size));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        for (VkDeviceSize i = 0; i < size; i += 4096)
          if (a.mapped()[i] != static_cast<std::byte>(t + 1)) ++failures;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << "no allocation overlapped another";
  const auto after = pool.stats(MemoryKind::readback);
  EXPECT_EQ(after.used_bytes, before.used_bytes) << "all returned";
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes) << "the oversized blocks were freed";
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
