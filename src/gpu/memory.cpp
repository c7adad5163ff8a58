#include "gpu/memory.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "gpu/context.hpp"
#include "gpu/fault_injection.hpp"
#include "gpu/vk_check.hpp"

namespace gpubatch::gpu {
namespace {

constexpr VkMemoryPropertyFlags kHostVisible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
constexpr VkMemoryPropertyFlags kCoherent = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
constexpr VkMemoryPropertyFlags kCached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
constexpr VkMemoryPropertyFlags kDeviceLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;

}  // namespace

Allocation& Allocation::operator=(Allocation&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::exchange(other.pool_, nullptr);
    block_ = other.block_;
    block_index_ = other.block_index_;
    offset_ = other.offset_;
    size_ = other.size_;
  }
  return *this;
}

void Allocation::reset() {
  if (pool_) pool_->release(*this);
  pool_ = nullptr;
}

VkBuffer Allocation::buffer() const { return block_->buffer; }
std::uint64_t Allocation::address() const { return block_->address + offset_; }
std::byte* Allocation::mapped() const {
  std::byte* base = block_->mapped;
  return base ? base + offset_ : nullptr;
}

void Allocation::invalidate() const {
  const auto& b = *block_;
  if (b.coherent || !b.mapped) return;
  const VkDeviceSize atom = pool_->non_coherent_atom_;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  range.memory = b.memory;
  range.offset = offset_ / atom * atom;
  range.size = VK_WHOLE_SIZE;
  vkInvalidateMappedMemoryRanges(pool_->context_.device(), 1, &range);
}

void Allocation::flush() const {
  const auto& b = *block_;
  if (b.coherent || !b.mapped) return;
  const VkDeviceSize atom = pool_->non_coherent_atom_;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  range.memory = b.memory;
  range.offset = offset_ / atom * atom;
  range.size = VK_WHOLE_SIZE;  // the block's end need not be a multiple of the atom
  vkFlushMappedMemoryRanges(pool_->context_.device(), 1, &range);
}

MemoryPool::MemoryPool(detail::GpuContext& context) : context_(context) {
  non_coherent_atom_ = context.limits().nonCoherentAtomSize;
  for (auto kind : {MemoryKind::device_local, MemoryKind::upload, MemoryKind::readback, MemoryKind::staging})
    types_[static_cast<int>(kind)] = memory_type(kind);
  if (context.transfer_family() != context.queue_family())
    families_ = {context.queue_family(), context.transfer_family()};
}

MemoryPool::~MemoryPool() {
  for (auto& b : blocks_)
    if (b) destroy_block(*b);
}

// Preference lists: the first memory type that has every flag of an entry wins.
std::uint32_t MemoryPool::memory_type(MemoryKind kind) const {
  std::vector<std::pair<VkMemoryPropertyFlags, VkMemoryPropertyFlags>> wanted;  // (must have, must not)
  switch (kind) {
    case MemoryKind::device_local:
      wanted = {{kDeviceLocal, kHostVisible}, {kDeviceLocal, 0}, {0, 0}};
      break;
    case MemoryKind::upload:
      wanted = {{kHostVisible | kCoherent, kCached | kDeviceLocal}, {kHostVisible | kCoherent, 0}, {kHostVisible, 0}};
      break;
    case MemoryKind::readback:
      wanted = {{kHostVisible | kCached | kCoherent, 0}, {kHostVisible | kCached, 0}, {kHostVisible, 0}};
      break;
    case MemoryKind::staging:  // system memory the CPU caches; device-local (ReBAR) only as a fallback
      wanted = {{kHostVisible | kCached | kCoherent, kDeviceLocal}, {kHostVisible | kCached, kDeviceLocal},
                {kHostVisible | kCached, 0}, {kHostVisible, 0}};
      break;
  }
  const auto& props = context_.memory_properties();
  for (auto [must, must_not] : wanted)
    for (std::uint32_t i = 0; i < props.memoryTypeCount; ++i) {
      const auto flags = props.memoryTypes[i].propertyFlags;
      if ((flags & must) == must && (flags & must_not) == 0) return i;
    }
  throw Error(ErrorCode::no_device, "the device offers no host-visible memory");
}

std::size_t MemoryPool::create_block(MemoryKind kind, VkDeviceSize size) {
  VkDevice device = context_.device();
  auto block = std::make_unique<Block>(Block{kind, VK_NULL_HANDLE, VK_NULL_HANDLE, 0, nullptr, true, RangeAllocator(size)});
  VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  buffer_info.size = size;
  buffer_info.usage = kBufferUsage;
  // CONCURRENT across the compute and transfer families: a block's sub-ranges are written by one
  // queue and read by the other batch after batch, and NVIDIA (the device with a transfer family)
  // keeps no per-family layout for buffers, so ownership transfers would buy nothing but barriers.
  buffer_info.sharingMode = families_.empty() ? VK_SHARING_MODE_EXCLUSIVE : VK_SHARING_MODE_CONCURRENT;
  buffer_info.queueFamilyIndexCount = static_cast<std::uint32_t>(families_.size());
  buffer_info.pQueueFamilyIndices = families_.empty() ? nullptr : families_.data();
  check_vk(vkCreateBuffer(device, &buffer_info, nullptr, &block->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, block->buffer, &req);
  std::uint32_t type = types_[static_cast<int>(kind)];
  if (!(req.memoryTypeBits & (1u << type))) {
    vkDestroyBuffer(device, block->buffer, nullptr);
    throw Error(ErrorCode::internal, "chosen memory type cannot back a storage buffer");
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &flags};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = type;
  const VkResult r = FaultInjector::fire(Fault::device_out_of_memory)
                         ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                         : vkAllocateMemory(device, &alloc, nullptr, &block->memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device, block->buffer, nullptr);
    throw Error(error_code_for(r), "allocating a " + std::to_string(size >> 20) +
                                       " MiB memory block failed (VkResult " + std::to_string(r) + ")");
  }
  check_vk(vkBindBufferMemory(device, block->buffer, block->memory, 0), "vkBindBufferMemory");
  const auto flags_of_type = context_.memory_properties().memoryTypes[type].propertyFlags;
  if (flags_of_type & kHostVisible) {
    void* p = nullptr;
    check_vk(vkMapMemory(device, block->memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    block->mapped = static_cast<std::byte*>(p);
    block->coherent = (flags_of_type & kCoherent) != 0;
  }
  VkBufferDeviceAddressInfo address_info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  address_info.buffer = block->buffer;
  block->address = vkGetBufferDeviceAddress(device, &address_info);
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    if (!blocks_[i]) {
      blocks_[i] = std::move(block);
      return i;
    }
  blocks_.push_back(std::move(block));
  return blocks_.size() - 1;
}

void MemoryPool::destroy_block(Block& b) {
  VkDevice device = context_.device();
  if (b.mapped) vkUnmapMemory(device, b.memory);
  vkDestroyBuffer(device, b.buffer, nullptr);
  vkFreeMemory(device, b.memory, nullptr);
}

Allocation MemoryPool::allocate(MemoryKind kind, VkDeviceSize size) {
  if (size == 0) size = kAlignment;
  if (size > context_.max_allocation_bytes())
    throw Error(ErrorCode::out_of_memory, std::to_string(size) + " bytes exceed the device's largest allocation (" +
                                              std::to_string(context_.max_allocation_bytes()) + " bytes)");
  std::lock_guard lock(mutex_);
  Allocation a;
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    auto& b = blocks_[i];
    if (!b || b->kind != kind) continue;
    if (auto offset = b->ranges.allocate(size, kAlignment)) {
      a.pool_ = this;
      a.block_ = b.get();
      a.block_index_ = i;
      a.offset_ = *offset;
      a.size_ = size;
      return a;
    }
  }
  const VkDeviceSize block_size = size > kBlockSize ? (size + kAlignment - 1) / kAlignment * kAlignment : kBlockSize;
  const std::size_t i = create_block(kind, block_size);
  a.pool_ = this;
  a.block_ = blocks_[i].get();
  a.block_index_ = i;
  a.offset_ = *blocks_[i]->ranges.allocate(size, kAlignment);
  a.size_ = size;
  return a;
}

void MemoryPool::release(const Allocation& a) {
  std::lock_guard lock(mutex_);
  auto& b = blocks_[a.block_index_];
  b->ranges.release(a.offset_, a.size_);
  // Oversized blocks exist for one large request; give their memory back once it is done.
  if (b->ranges.empty() && b->ranges.capacity() > kBlockSize) {
    destroy_block(*b);
    b.reset();
  }
}

MemoryStats MemoryPool::stats(MemoryKind kind) const {
  std::lock_guard lock(mutex_);
  MemoryStats s;
  for (const auto& b : blocks_)
    if (b && b->kind == kind) {
      ++s.blocks;
      s.reserved_bytes += b->ranges.capacity();
      s.used_bytes += b->ranges.used();
    }
  return s;
}

void ensure(Allocation& a, MemoryPool& pool, MemoryKind kind, std::size_t bytes) {
  if (a && a.size() >= bytes) return;
  a.reset();
  const std::size_t grown = (bytes + bytes / 2 + 4095) / 4096 * 4096;
  a = pool.allocate(kind, std::max<std::size_t>(grown, 64 * 1024));
}

}  // namespace gpubatch::gpu
