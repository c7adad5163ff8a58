#pragma once
// Offset allocator over one block of memory: first fit over an address-ordered free list, with
// neighbours coalesced on free. Knows nothing of Vulkan, so it is tested on its own.
#include <cstdint>
#include <map>
#include <optional>

namespace gpubatch::gpu {

class RangeAllocator {
 public:
  explicit RangeAllocator(std::uint64_t capacity) : capacity_(capacity) {
    if (capacity > 0) free_[0] = capacity;
  }

  // An offset that is a multiple of `alignment` (a power of two) with `size` bytes free after it.
  std::optional<std::uint64_t> allocate(std::uint64_t size, std::uint64_t alignment) {
    if (size == 0) size = 1;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const std::uint64_t start = it->first, length = it->second;
      const std::uint64_t aligned = (start + alignment - 1) & ~(alignment - 1);
      if (aligned - start > length || length - (aligned - start) < size) continue;
      free_.erase(it);
      if (aligned > start) free_[start] = aligned - start;
      const std::uint64_t end = aligned + size;
      if (start + length > end) free_[end] = start + length - end;
      used_ += size;
      return aligned;
    }
    return std::nullopt;
  }

  void release(std::uint64_t offset, std::uint64_t size) {
    if (size == 0) size = 1;
    used_ -= size;
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + size == next->first) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += size;
        return;
      }
    }
    free_[offset] = size;
  }

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t used() const { return used_; }
  bool empty() const { return used_ == 0; }
  std::size_t free_ranges() const { return free_.size(); }

 private:
  std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> length
};

}  // namespace gpubatch::gpu
