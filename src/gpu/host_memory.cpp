#include "gpu/host_memory.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
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

// Device::import_host's rules: a device that can import, memory aligned in address and size,
// `floats` within it. Throws Error(invalid_argument) naming the rule broken.
void check_import(const detail::GpuContext& context, std::span<float> memory, std::size_t floats) {
  const std::size_t align = context.host_import_alignment();
  const auto invalid = [](const std::string& what) { throw Error(ErrorCode::invalid_argument, "import_host: " + what); };
  if (align == 0)
    invalid("the device " + context.info().name +
            " cannot import host memory (no VK_EXT_external_memory_host); use allocate_host");
  const std::string rule = " is not a multiple of the device's import alignment of " + std::to_string(align) +
                           " bytes (" + std::to_string(align / sizeof(float)) + " floats)";
  if (memory.empty()) invalid("the memory is empty");
  if (reinterpret_cast<std::uintptr_t>(memory.data()) % align != 0) invalid("the memory's address" + rule);
  if (memory.size_bytes() % align != 0) invalid("the memory's size of " + std::to_string(memory.size_bytes()) + " bytes" + rule);
  if (floats == 0 || floats > memory.size())
    invalid(std::to_string(floats) + " floats asked of a span of " + std::to_string(memory.size()));
  if (memory.size_bytes() > context.max_allocation_bytes())
    throw Error(ErrorCode::out_of_memory, "import_host: " + std::to_string(memory.size_bytes()) +
                                              " bytes exceed the device's largest allocation");
}


HostBuffer import_host(std::shared_ptr<detail::GpuContext> context, std::span<float> memory, std::size_t floats) {
  if (floats == std::dynamic_extent) floats = memory.size();
  check_import(*context, memory, floats);
  auto host = std::make_shared<VulkanHostMemory>();
  host->allocation = context->memory().import_host(memory.data(), memory.size_bytes());
  host->context = std::move(context);
  host->data = memory.data();
  host->floats = floats;
  return HostBuffer(std::move(host));
}

const VulkanHostMemory* host_memory_on(const std::shared_ptr<detail::HostMemory>& memory,
                                       const detail::GpuContext* context) noexcept {
  if (const auto* view = dynamic_cast<const detail::HostMemoryView*>(memory.get())) return host_memory_on(view->of, context);
  if (const auto* vulkan = dynamic_cast<const VulkanHostMemory*>(memory.get()))
    return vulkan->context.get() == context ? vulkan : nullptr;
  if (const auto* shared = dynamic_cast<const SharedHostMemory*>(memory.get()))
    for (const auto& part : shared->imports)
      if (part->context.get() == context) return part.get();
  return nullptr;
}

const VulkanHostMemory& host_memory_of(const std::shared_ptr<detail::HostMemory>& memory,
                                       const detail::GpuContext* context) {
  const VulkanHostMemory* m = host_memory_on(memory, context);
  if (!m) throw Error(ErrorCode::internal, "a host buffer is not on the device that uses it (checked when planned)");
  return *m;
}

std::size_t host_byte_offset(const detail::HostMemory& memory) noexcept {
  const auto* view = dynamic_cast<const detail::HostMemoryView*>(&memory);
  return view ? view->first * sizeof(float) + host_byte_offset(*view->of) : 0;
}

std::exception_ptr foreign_host_buffer(const Request& r, const detail::GpuContext* context) {
  for (const auto* m : {&r.host_a, &r.host_b, &r.host_result})
    if (*m && !host_memory_on(*m, context))
      return std::make_exception_ptr(Error(ErrorCode::invalid_argument,
                                           describe_op(r) + ": its host buffer belongs to another device "
                                                            "(take it from this device's allocate_host or import_host)"));
  return nullptr;
}

}  // namespace gpubatch::gpu
