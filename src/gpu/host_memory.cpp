#include "gpu/host_memory.hpp"

#include <string>

#include "gpu/context.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::gpu {

HostBuffer allocate_host(std::shared_ptr<detail::GpuContext> context, std::size_t floats) {
  if (floats == 0) throw Error(ErrorCode::invalid_argument, "allocate_host: a host buffer needs at least one float");
  if (floats > context->max_allocation_bytes() / sizeof(float))
    throw Error(ErrorCode::out_of_memory, "allocate_host: " + std::to_string(floats) +
                                              " floats exceed the device's largest allocation");
  auto memory = std::make_shared<VulkanHostMemory>();
  memory->allocation = context->memory().allocate(MemoryKind::staging, floats * sizeof(float));
  memory->context = std::move(context);
  memory->data = reinterpret_cast<float*>(memory->allocation.mapped());
  memory->floats = floats;
  return HostBuffer(std::move(memory));
}

const VulkanHostMemory* host_memory_on(const std::shared_ptr<detail::HostMemory>& memory,
                                       const detail::GpuContext* context) noexcept {
  const auto* vulkan = dynamic_cast<const VulkanHostMemory*>(memory.get());
  return vulkan && vulkan->context.get() == context ? vulkan : nullptr;
}

std::exception_ptr foreign_host_buffer(const Request& r, const detail::GpuContext* context) {
  for (const auto* m : {&r.host_a, &r.host_result})
    if (*m && !host_memory_on(*m, context))
      return std::make_exception_ptr(Error(ErrorCode::invalid_argument,
                                           describe_op(r) + ": its host buffer belongs to another device "
                                                            "(allocate it with this device's allocate_host)"));
  return nullptr;
}

}  // namespace gpubatch::gpu
