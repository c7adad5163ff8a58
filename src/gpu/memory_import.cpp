// MemoryPool::import_host: a caller's own host allocation (VK_EXT_external_memory_host) as a block
// of the pool, so that an imported HostBuffer is an Allocation like allocate_host's and every path
// that reads or writes host buffers (device address, vkCmdCopyBuffer, flush and invalidate) takes
// it unchanged. The block holds the import, never the caller's memory.
#include "log.hpp"

#include <cstdio>
#include <optional>
#include <string>

#include "gpu/context.hpp"
#include "gpu/memory.hpp"
#include "gpu/vk_check.hpp"

namespace gpubatch::gpu {
namespace {

constexpr auto kHostAllocation = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;

std::string hex(std::uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", bits);
  return text;
}

}  // namespace

Allocation MemoryPool::import_host(void* pointer, VkDeviceSize bytes) {
  // The types this pointer can be imported as (the driver may refuse memory it cannot pin, such
  // as a file mapping: VK_ERROR_INVALID_EXTERNAL_HANDLE, an invalid_argument).
  VkMemoryHostPointerPropertiesEXT host{VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
  check_vk(context_.host_pointer_properties(pointer, &host), "vkGetMemoryHostPointerPropertiesEXT");
  auto block = std::make_unique<Block>(
      Block{MemoryKind::staging, VK_NULL_HANDLE, VK_NULL_HANDLE, 0, nullptr, true, RangeAllocator(bytes), true});
  try {
    VkExternalMemoryBufferCreateInfo external{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
    external.handleTypes = kHostAllocation;
    make_buffer(*block, bytes, &external);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(context_.device(), block->buffer, &req);
    // allocate_host's type where the import allows it, else the best of the staging preferences,
    // all host-visible: the caller goes on using its pointer, and a type that is not coherent
    // needs a mapping for flush() and invalidate().
    const std::uint32_t allowed = host.memoryTypeBits & req.memoryTypeBits;
    const std::uint32_t staging = types_[static_cast<int>(MemoryKind::staging)];
    const auto type = (allowed & (1u << staging)) ? std::optional(staging) : find_type(MemoryKind::staging, allowed);
    if (!type)
      throw Error(ErrorCode::invalid_argument,
                  "import_host: no host-visible memory type can import this memory (types " +
                      hex(host.memoryTypeBits) + " for the pointer, " + hex(req.memoryTypeBits) + " for a buffer)");
    if (req.size > bytes)
      throw Error(ErrorCode::internal, "import_host: a buffer of " + std::to_string(bytes) + " bytes needs " +
                                           std::to_string(req.size) + " bytes of memory");
    VkImportMemoryHostPointerInfoEXT import{VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
    import.handleType = kHostAllocation;
    import.pHostPointer = pointer;
    back_buffer(*block, bytes, *type, &import, "importing " + std::to_string(bytes) + " bytes of host memory");
    log::debug("gpubatch: imported {} bytes of host memory as type {} (flags {}; allowed {})", bytes, *type,
                  hex(context_.memory_properties().memoryTypes[*type].propertyFlags), hex(allowed));
  } catch (...) {
    destroy_block(*block);
    throw;
  }
  std::lock_guard lock(mutex_);
  const std::size_t i = keep_block(std::move(block));
  return allocation_in(i, *blocks_[i]->ranges.allocate(bytes, kAlignment), bytes);
}

}  // namespace gpubatch::gpu
