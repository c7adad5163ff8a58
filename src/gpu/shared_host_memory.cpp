// HostBuffers several devices share (gpubatch::allocate_host / import_host over a list of
// devices; DESIGN.md "Large requests"): one range of host memory imported into each device
// (VK_EXT_external_memory_host), so that a device set can place and re-run the requests that use
// it on any member. host_memory_on (host_memory.cpp) finds the import of the context at hand.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "gpu/context.hpp"
#include "gpu/host_memory.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::gpu {
namespace {

using Contexts = std::vector<std::shared_ptr<detail::GpuContext>>;

// Each device once, in the order given (one listed twice is imported once).
Contexts distinct(const Contexts& contexts, const char* what) {
  if (contexts.empty()) throw Error(ErrorCode::invalid_argument, std::string(what) + ": no devices");
  Contexts out;
  for (const auto& c : contexts)
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

std::size_t import_alignment_of_all(const Contexts& contexts) {
  std::size_t align = 1;
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    const std::size_t a = contexts[i]->host_import_alignment();
    if (a == 0)
      throw Error(ErrorCode::invalid_argument,
                  "allocate_host: device " + std::to_string(i) + " (" + contexts[i]->info().name +
                      ") cannot import host memory (no VK_EXT_external_memory_host), so no buffer can be shared "
                      "by these devices; allocate one from each device instead");
    align = std::max(align, a);  // powers of two: the largest is a multiple of every other
  }
  return align;
}

// Imports [data, data + bytes) into every context; the buffer shows its first `floats`.
HostBuffer share(std::shared_ptr<SharedHostMemory> shared, const Contexts& contexts, float* data, std::size_t bytes,
                 std::size_t floats) {
  for (const auto& c : contexts) {
    auto part = std::make_unique<VulkanHostMemory>();
    part->allocation = c->memory().import_host(data, bytes);
    part->context = c;
    part->data = data;
    part->floats = floats;
    shared->imports.push_back(std::move(part));
  }
  shared->data = data;
  shared->floats = floats;
  return HostBuffer(std::move(shared));
}

}  // namespace

HostBuffer allocate_shared_host(const Contexts& contexts, std::size_t floats) {
  const Contexts devices = distinct(contexts, "allocate_host");
  if (floats == 0) throw Error(ErrorCode::invalid_argument, "allocate_host: a host buffer needs at least one float");
  if (devices.size() == 1) return allocate_host(devices.front(), floats);
  const std::size_t align = import_alignment_of_all(devices);
  for (const auto& c : devices)
    if (floats > c->max_allocation_bytes() / sizeof(float))
      throw Error(ErrorCode::out_of_memory, "allocate_host: " + std::to_string(floats) +
                                                " floats exceed the largest allocation of " + c->info().name);
  const std::size_t bytes = (floats * sizeof(float) + align - 1) / align * align;
  auto shared = std::make_shared<SharedHostMemory>();
  shared->owned.reset(std::aligned_alloc(align, bytes));
  if (!shared->owned)
    throw Error(ErrorCode::out_of_memory, "allocate_host: " + std::to_string(bytes) + " bytes of host memory");
  auto* const data = static_cast<float*>(shared->owned.get());
  return share(std::move(shared), devices, data, bytes, floats);
}

HostBuffer import_shared_host(const Contexts& contexts, std::span<float> memory, std::size_t floats) {
  const Contexts devices = distinct(contexts, "import_host");
  if (devices.size() == 1) return import_host(devices.front(), memory, floats);
  if (floats == std::dynamic_extent) floats = memory.size();
  for (const auto& c : devices) check_import(*c, memory, floats);
  return share(std::make_shared<SharedHostMemory>(), devices, memory.data(), memory.size_bytes(), floats);
}

}  // namespace gpubatch::gpu
