#pragma once
// The device side of a HostBuffer: a sub-allocation of staging memory (host-cached, pinned, with
// a device address and a VkBuffer the copy engine can use), or the caller's own memory imported
// into a block of its own (VK_EXT_external_memory_host), and the context it belongs to.
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "gpu/memory.hpp"
#include "gpubatch/host_buffer.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::detail {
class GpuContext;
}

namespace gpubatch::gpu {

struct VulkanHostMemory final : detail::HostMemory {
  std::shared_ptr<detail::GpuContext> context;  // declared first: outlives the allocation
  Allocation allocation;
};

// `floats` floats of pinned host memory on `context`. Throws Error(invalid_argument) for 0,
// Error(out_of_memory) when the device cannot provide it.
HostBuffer allocate_host(std::shared_ptr<detail::GpuContext> context, std::size_t floats);

// The caller's `memory` imported in place, as a HostBuffer of its first `floats` floats
// (std::dynamic_extent: all of it). Device::import_host says what it needs and throws.
HostBuffer import_host(std::shared_ptr<detail::GpuContext> context, std::span<float> memory, std::size_t floats);

// Device::import_host's rules for `context` (import available, address and size aligned,
// `floats` within the memory). Throws Error(invalid_argument) naming the rule broken.
void check_import(const detail::GpuContext& context, std::span<float> memory, std::size_t floats);

// Host memory several devices read and write in place: one range imported into each context
// (src/gpu/shared_host_memory.cpp). Members go in reverse order: the imports before the memory
// they pin (`owned`: allocate_shared_host's own allocation; null for the caller's memory).
struct SharedHostMemory final : detail::HostMemory {
  std::unique_ptr<void, void (*)(void*)> owned{nullptr, &std::free};
  std::vector<std::unique_ptr<VulkanHostMemory>> imports;  // one per distinct context
};

// `floats` floats of host memory every context of `contexts` reads and writes in place: one
// allocation, aligned for import, imported into each (VK_EXT_external_memory_host). One context:
// allocate_host's memory. Throws Error(invalid_argument) for 0 floats, no context, or one that
// cannot import host memory; Error(out_of_memory) when the memory cannot be had.
HostBuffer allocate_shared_host(const std::vector<std::shared_ptr<detail::GpuContext>>& contexts, std::size_t floats);

// The caller's `memory` imported into every context of `contexts` (each context's import_host
// rules; std::dynamic_extent: all of it). One context: import_host. Throws as import_host does.
HostBuffer import_shared_host(const std::vector<std::shared_ptr<detail::GpuContext>>& contexts,
                              std::span<float> memory, std::size_t floats);

// The VulkanHostMemory behind a request's host buffer when it belongs to `context` (or, for
// allocate_shared_host's, when it was imported there), else null.
const VulkanHostMemory* host_memory_on(const std::shared_ptr<detail::HostMemory>& memory,
                                       const detail::GpuContext* context) noexcept;

// The same, for memory already checked to be on `context` (host_memory_on when the batch or
// graph was planned): throws Error(internal) when it is not. For a view (detail::HostMemoryView)
// it is the memory viewed; host_byte_offset says where the view begins in it.
const VulkanHostMemory& host_memory_of(const std::shared_ptr<detail::HostMemory>& memory,
                                       const detail::GpuContext* context);
std::size_t host_byte_offset(const detail::HostMemory& memory) noexcept;

// A request's host buffer that is not `context`'s memory (another device's, or the one a
// recover() replaced): the error its request fails with (alone). Null when all is well.
std::exception_ptr foreign_host_buffer(const Request& request, const detail::GpuContext* context);

}  // namespace gpubatch::gpu
