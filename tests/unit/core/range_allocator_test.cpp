// The offset allocator behind every sub-allocation, tested against a byte-map model.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "gpu/range_allocator.hpp"

using gpubatch::gpu::RangeAllocator;

TEST(RangeAllocator, FirstFitAlignedAndCoalescing) {
  RangeAllocator a(1024);
  auto x = a.allocate(100, 256);
  auto y = a.allocate(100, 256);
  auto z = a.allocate(100, 256);
  ASSERT_TRUE(x && y && z);
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 256u);
  EXPECT_EQ(*z, 512u);
  EXPECT_FALSE(a.allocate(600, 1)) << "no room for 600 contiguous bytes";
  a.release(*y, 100);
  a.release(*x, 100);
  a.release(*z, 100);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.free_ranges(), 1u) << "freed neighbours coalesce back into one range";
  auto all = a.allocate(1024, 256);
  ASSERT_TRUE(all);
  EXPECT_EQ(*all, 0u);
}

TEST(RangeAllocator, ExactFitAndZeroSize) {
  RangeAllocator a(64);
  auto x = a.allocate(64, 64);
  ASSERT_TRUE(x);
  EXPECT_FALSE(a.allocate(1, 1));
  a.release(*x, 64);
  auto z = a.allocate(0, 16);  // treated as one byte: distinct offsets for distinct allocations
  auto w = a.allocate(0, 16);
  ASSERT_TRUE(z && w);
  EXPECT_NE(*z, *w);
}

TEST(RangeAllocator, RandomisedAgainstModel) {
  std::mt19937 rng(2024);
  constexpr std::uint64_t kCapacity = 1 << 16;
  RangeAllocator a(kCapacity);
  std::vector<int> owner(kCapacity, -1);  // which live allocation holds each byte
  std::map<int, std::pair<std::uint64_t, std::uint64_t>> live;
  int next_id = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      const std::uint64_t size = 1 + rng() % 2000;
      const std::uint64_t align = std::uint64_t{1} << (rng() % 9);
      auto off = a.allocate(size, align);
      if (!off) continue;
      ASSERT_EQ(*off % align, 0u);
      ASSERT_LE(*off + size, kCapacity);
      for (std::uint64_t i = *off; i < *off + size; ++i) {
        ASSERT_EQ(owner[i], -1) << "byte " << i << " handed out twice";
        owner[i] = next_id;
      }
      live[next_id++] = {*off, size};
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      for (std::uint64_t i = it->second.first; i < it->second.first + it->second.second; ++i) owner[i] = -1;
      a.release(it->second.first, it->second.second);
      live.erase(it);
    }
    std::uint64_t used = 0;
    for (auto& [id, r] : live) used += r.second;
    ASSERT_EQ(a.used(), used);
  }
  for (auto& [id, r] : live) a.release(r.first, r.second);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.free_ranges(), 1u);
}
