#include "gpu/memory.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "gpu/context.hpp"
#include "gpu/env_switch.hpp"
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

// From this allocation's offset, rounded down to the non-coherent atom, to the block's end (which
// need not be a multiple of the atom: hence VK_WHOLE_SIZE).
VkMappedMemoryRange Allocation::mapped_range() const {
  const VkDeviceSize atom = pool_->non_coherent_atom_;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  range.memory = block_->memory;
  range.offset = offset_ / atom * atom;
  range.size = VK_WHOLE_SIZE;
  return range;
}

bool Allocation::coherent() const { return block_->coherent; }

void Allocation::invalidate() const {
  if (block_->coherent || !block_->mapped) return;
  const VkMappedMemoryRange range = mapped_range();
  vkInvalidateMappedMemoryRanges(pool_->context_.device(), 1, &range);
}

void Allocation::flush() const {
  if (block_->coherent || !block_->mapped) return;
  const VkMappedMemoryRange range = mapped_range();
  vkFlushMappedMemoryRanges(pool_->context_.device(), 1, &range);
}

MemoryPool::MemoryPool(detail::GpuContext& context) : context_(context) {
  non_coherent_atom_ = context.limits().nonCoherentAtomSize;
  for (auto kind : {MemoryKind::device_local, MemoryKind::upload, MemoryKind::readback, MemoryKind::staging,
                    MemoryKind::upload_near})
    types_[static_cast<int>(kind)] = memory_type(kind);
  // GPUBATCH_NEAR_MEMORY=separate (tests): blocks of their own even where the type is the upload
  // kind's, so that a device without such memory (lavapipe) runs the near frames' code too.
  // Read whatever the device has: a bad value is an error on every device (the H200's tests found
  // it accepted there, where the device's own type decided first).
  const bool separate = env_switch("GPUBATCH_NEAR_MEMORY", false, "separate", "auto");
  near_upload_ = types_[static_cast<int>(MemoryKind::upload_near)] != types_[static_cast<int>(MemoryKind::upload)] || separate;
  if (context.transfer_family() != context.queue_family())
    families_ = {context.queue_family(), context.transfer_family()};
}

MemoryPool::~MemoryPool() {
  for (auto& b : blocks_)
    if (b) destroy_block(*b);
}

std::uint32_t MemoryPool::memory_type(MemoryKind kind) const {
  if (auto type = find_type(kind, ~0u)) return *type;
  throw Error(ErrorCode::no_device, "the device offers no host-visible memory");
}

// Preference lists: the first memory type that has every flag of an entry wins.
std::optional<std::uint32_t> MemoryPool::find_type(MemoryKind kind, std::uint32_t allowed) const {
  std::vector<std::pair<VkMemoryPropertyFlags, VkMemoryPropertyFlags>> wanted;  // (must have, must not)
  const auto& props = context_.memory_properties();
  switch (kind) {
    case MemoryKind::upload_near:  // device-local host-visible over a large heap, else as upload
      for (std::uint32_t i = 0; i < props.memoryTypeCount; ++i) {
        const auto& t = props.memoryTypes[i];
        const VkMemoryPropertyFlags must = kDeviceLocal | kHostVisible | kCoherent;
        if ((allowed & (1u << i)) && (t.propertyFlags & must) == must && !(t.propertyFlags & kCached) &&
            props.memoryHeaps[t.heapIndex].size >= kNearHeapBytes)
          return i;
      }
      return find_type(MemoryKind::upload, allowed);
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
  for (auto [must, must_not] : wanted)
    for (std::uint32_t i = 0; i < props.memoryTypeCount; ++i) {
      const auto flags = props.memoryTypes[i].propertyFlags;
      if ((allowed & (1u << i)) && (flags & must) == must && (flags & must_not) == 0) return i;
    }
  return std::nullopt;
}

// Without the pool's lock: it touches only the device and the new block.
std::unique_ptr<MemoryBlock> MemoryPool::make_block(MemoryKind kind, VkDeviceSize size) const {
  auto block = std::make_unique<Block>(Block{kind, VK_NULL_HANDLE, VK_NULL_HANDLE, 0, nullptr, true, RangeAllocator(size)});
  try {
    make_buffer(*block, size, nullptr);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(context_.device(), block->buffer, &req);
    const std::uint32_t type = types_[static_cast<int>(kind)];
    if (!(req.memoryTypeBits & (1u << type)))
      throw Error(ErrorCode::internal, "chosen memory type cannot back a storage buffer");
    back_buffer(*block, req.size, type, nullptr, "allocating a " + std::to_string(size >> 20) + " MiB memory block");
  } catch (...) {
    destroy_block(*block);
    throw;
  }
  return block;
}

void MemoryPool::make_buffer(Block& b, VkDeviceSize size, const void* next) const {
  VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, next};
  buffer_info.size = size;
  buffer_info.usage = kBufferUsage;
  // CONCURRENT across the compute and transfer families: a block's sub-ranges are written by one
  // queue and read by the other batch after batch, and NVIDIA (the device with a transfer family)
  // keeps no per-family layout for buffers, so ownership transfers would buy nothing but barriers.
  buffer_info.sharingMode = families_.empty() ? VK_SHARING_MODE_EXCLUSIVE : VK_SHARING_MODE_CONCURRENT;
  buffer_info.queueFamilyIndexCount = static_cast<std::uint32_t>(families_.size());
  buffer_info.pQueueFamilyIndices = families_.empty() ? nullptr : families_.data();
  check_vk(vkCreateBuffer(context_.device(), &buffer_info, nullptr, &b.buffer), "vkCreateBuffer");
}

// Allocates `bytes` of `type` (`what`: the failure's message), binds it to the block's buffer,
// maps it where the host needs a mapping and takes the buffer's device address.
void MemoryPool::back_buffer(Block& b, VkDeviceSize bytes, std::uint32_t type, const void* next,
                             const std::string& what) const {
  VkDevice device = context_.device();
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, next};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &flags};
  alloc.allocationSize = bytes;
  alloc.memoryTypeIndex = type;
  const VkResult r = FaultInjector::fire(Fault::device_out_of_memory)
                         ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                         : vkAllocateMemory(device, &alloc, nullptr, &b.memory);
  if (r != VK_SUCCESS) throw Error(error_code_for(r), what + " failed (VkResult " + std::to_string(r) + ")");
  check_vk(vkBindBufferMemory(device, b.buffer, b.memory, 0), "vkBindBufferMemory");
  const auto flags_of_type = context_.memory_properties().memoryTypes[type].propertyFlags;
  const bool host_visible = (flags_of_type & kHostVisible) != 0;
  b.coherent = !host_visible || (flags_of_type & kCoherent) != 0;
  // Imported memory's host view is the caller's pointer: it is mapped only where flush() and
  // invalidate() need a mapping (a type that is not coherent).
  if (host_visible && !(b.imported && b.coherent)) {
    void* p = nullptr;
    check_vk(vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    b.mapped = static_cast<std::byte*>(p);
  }
  VkBufferDeviceAddressInfo address_info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  address_info.buffer = b.buffer;
  b.address = vkGetBufferDeviceAddress(device, &address_info);
}

std::size_t MemoryPool::keep_block(std::unique_ptr<Block> block) {
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    if (!blocks_[i]) {
      blocks_[i] = std::move(block);
      return i;
    }
  blocks_.push_back(std::move(block));
  return blocks_.size() - 1;
}

Allocation MemoryPool::allocation_in(std::size_t block, VkDeviceSize offset, VkDeviceSize size) {
  Allocation a;
  a.pool_ = this;
  a.block_ = blocks_[block].get();
  a.block_index_ = block;
  a.offset_ = offset;
  a.size_ = size;
  return a;
}

// Null handles (a half-made block's) are ignored by the destroy and free calls.
void MemoryPool::destroy_block(Block& b) const {
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
  {
    std::lock_guard lock(mutex_);
    if (auto a = allocate_in_blocks(kind, size)) return std::move(*a);
  }
  // No block has room: a new one is made without the lock. Made under it, every other allocation
  // and release of the device would wait as long as the driver takes to allocate and pin 64 MiB
  // (milliseconds). Threads that find the pool full at once each make a block; those not needed
  // now stay for later.
  const VkDeviceSize block_size = size > kBlockSize ? (size + kAlignment - 1) / kAlignment * kAlignment : kBlockSize;
  std::unique_ptr<Block> block = make_block(kind, block_size);
  std::lock_guard lock(mutex_);
  const bool oversized = block_size > kBlockSize;  // made for this request alone
  if (!oversized)
    if (auto a = allocate_in_blocks(kind, size)) {  // room appeared meanwhile: the new block waits
      keep_block(std::move(block));
      return std::move(*a);
    }
  const std::size_t i = keep_block(std::move(block));
  return allocation_in(i, *blocks_[i]->ranges.allocate(size, kAlignment), size);
}

// Under mutex_: a sub-allocation in an existing block of `kind`, if one has room.
std::optional<Allocation> MemoryPool::allocate_in_blocks(MemoryKind kind, VkDeviceSize size) {
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    auto& b = blocks_[i];
    if (!b || b->kind != kind || b->imported) continue;
    if (auto offset = b->ranges.allocate(size, kAlignment)) return allocation_in(i, *offset, size);
  }
  return std::nullopt;
}

void MemoryPool::release(const Allocation& a) {
  std::unique_ptr<Block> done;
  {
    std::lock_guard lock(mutex_);
    auto& b = blocks_[a.block_index_];
    b->ranges.release(a.offset_, a.size_);
    // Oversized blocks exist for one large request, an imported one for its one allocation: give
    // their memory back once it is done (freed without the lock, as blocks are made without it).
    if (b->ranges.empty() && (b->imported || b->ranges.capacity() > kBlockSize)) done = std::move(b);
  }
  if (done) destroy_block(*done);
}

MemoryStats MemoryPool::stats(MemoryKind kind) const {
  std::lock_guard lock(mutex_);
  MemoryStats s;
  for (const auto& b : blocks_)
    if (b && b->kind == kind && !b->imported) {
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
