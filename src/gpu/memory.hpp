#pragma once
// Sub-allocation of a few large Vulkan allocations. Each block is one VkDeviceMemory bound to one
// VkBuffer that spans it, so a sub-range is (buffer, offset) and, through its device address,
// reachable from any kernel. Requests larger than a block get a block of their own.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu/range_allocator.hpp"

namespace gpubatch::detail {
class GpuContext;
}

namespace gpubatch::gpu {

enum class MemoryKind {
  device_local,  // GPU-only working memory
  upload,        // host-visible, written by the CPU, read by the GPU (write-combined where offered)
  readback,      // host-visible and host-cached where offered, written by the GPU, read by the CPU
  // Host memory (host-cached, not device-local, where offered) that the copy engine reads and
  // writes: the CPU fills it with ordinary cached stores (write-combined memory takes one thread's
  // memcpy at ~6 GB/s on the H200) and vkCmdCopyBuffer moves it. HostBuffers live here too.
  staging,
  // Device-local memory the host maps (resizable BAR), for direct-path batches' tables and inputs
  // (small, lone and large ones: upload_place in transfer_path.hpp): the CPU's writes to it are posted (write-combined) and the kernels' reads are local,
  // where reads of system memory cross the bus. On the H200 a lone 256-float relu's submit and
  // spin took 14.13-14.32 us p50 with the input there against 14.73-15.25 us in system memory
  // (bench/probes/bar-input). Where the device has no such memory over a large heap (at least
  // kNearHeapBytes: a 256 MiB BAR is the driver's to use) it is the upload kind's type
  // (MemoryPool::has_near_upload() says which).
  upload_near,
};
inline constexpr int kMemoryKinds = 5;

// Every block's buffer has these (storage, copies both ways, device address), imported host
// memory's too: the context checks that the device can import host memory into such a buffer.
inline constexpr VkBufferUsageFlags kBufferUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
    VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;

class MemoryPool;
struct MemoryBlock;

// One sub-allocation; returns itself to the pool when destroyed. Move-only.
class Allocation {
 public:
  Allocation() = default;
  Allocation(Allocation&& other) noexcept { *this = std::move(other); }
  Allocation& operator=(Allocation&& other) noexcept;
  ~Allocation() { reset(); }
  void reset();

  explicit operator bool() const { return pool_ != nullptr; }
  VkBuffer buffer() const;
  VkDeviceSize offset() const { return offset_; }
  VkDeviceSize size() const { return size_; }
  std::uint64_t address() const;  // device address of the first byte
  std::byte* mapped() const;      // null unless host-visible
  bool coherent() const;          // host-coherent (or not host-visible)
  // Makes GPU writes visible to the host where the memory is not coherent.
  void invalidate() const;
  // Makes host writes visible to the device where the memory is not coherent.
  void flush() const;

 private:
  friend class MemoryPool;
  VkMappedMemoryRange mapped_range() const;  // for invalidate() and flush()
  MemoryPool* pool_ = nullptr;
  MemoryBlock* block_ = nullptr;  // stable: blocks are never moved while allocations live
  std::size_t block_index_ = 0;
  VkDeviceSize offset_ = 0, size_ = 0;
};

struct MemoryStats {
  std::uint64_t blocks = 0;
  std::uint64_t reserved_bytes = 0;  // sum of block sizes
  std::uint64_t used_bytes = 0;      // sum of live sub-allocations
};

struct MemoryBlock {
  MemoryKind kind;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  std::uint64_t address = 0;
  std::byte* mapped = nullptr;
  bool coherent = true;
  RangeAllocator ranges;
  // A caller's host memory (MemoryPool::import_host): one allocation spans it, no other is made
  // in it, and it is destroyed (not the caller's memory) when that allocation is released.
  bool imported = false;
};

class MemoryPool {
 public:
  static constexpr VkDeviceSize kBlockSize = 64ull << 20;
  static constexpr VkDeviceSize kAlignment = 256;

  explicit MemoryPool(detail::GpuContext& context);
  ~MemoryPool();

  // Throws Error(out_of_memory) when the device cannot provide it.
  Allocation allocate(MemoryKind kind, VkDeviceSize size);
  // The caller's host memory [pointer, pointer + bytes) as an allocation over a block of its own,
  // with the usage, sharing and device address of every block (src/gpu/memory_import.cpp).
  // Needs context.host_import_alignment() > 0, and pointer and bytes aligned to it (the caller
  // checks). Throws Error(invalid_argument) for memory the device cannot import, else as vk_check.
  Allocation import_host(void* pointer, VkDeviceSize bytes);
  // The pool's own blocks of `kind` (imported memory is the caller's: not counted).
  MemoryStats stats(MemoryKind kind) const;
  // MemoryKind::upload_near is device-local memory of its own, not the upload kind's type.
  bool has_near_upload() const noexcept { return near_upload_; }
  static constexpr VkDeviceSize kNearHeapBytes = 1ull << 30;

 private:
  friend class Allocation;
  using Block = MemoryBlock;
  void release(const Allocation& a);
  std::unique_ptr<Block> make_block(MemoryKind kind, VkDeviceSize size) const;
  std::optional<Allocation> allocate_in_blocks(MemoryKind kind, VkDeviceSize size);
  // The steps of making a block, shared by make_block and import_host (`next`: what an import
  // chains in). They throw, leaving the half-made block to destroy_block.
  void make_buffer(Block& b, VkDeviceSize size, const void* next) const;
  void back_buffer(Block& b, VkDeviceSize bytes, std::uint32_t type, const void* next, const std::string& what) const;
  std::size_t keep_block(std::unique_ptr<Block> block);  // under mutex_: its index in blocks_
  Allocation allocation_in(std::size_t block, VkDeviceSize offset, VkDeviceSize size);
  void destroy_block(Block& b) const;
  std::uint32_t memory_type(MemoryKind kind) const;
  // The first type of `kind`'s preference list among `allowed` (a memoryTypeBits mask).
  std::optional<std::uint32_t> find_type(MemoryKind kind, std::uint32_t allowed) const;

  detail::GpuContext& context_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Block>> blocks_;  // index stable; null once a dedicated block is freed
  std::uint32_t types_[kMemoryKinds];
  // Where the copy engine has its own queue family, every block is shared CONCURRENT between it
  // and the compute family (no ownership transfers; see DESIGN.md "Large requests").
  std::vector<std::uint32_t> families_;
  VkDeviceSize non_coherent_atom_ = 1;
  bool near_upload_ = false;
};

// Makes `a` hold at least `bytes`, growing with headroom (x1.5, at least 64 KiB) so that a frame
// reused batch after batch settles at its working size after a few batches.
void ensure(Allocation& a, MemoryPool& pool, MemoryKind kind, std::size_t bytes);

}  // namespace gpubatch::gpu
