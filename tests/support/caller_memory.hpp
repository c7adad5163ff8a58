#pragma once
// A caller's own memory for Device::import_host: std::aligned_alloc'd to the device's import
// alignment, its size rounded up to it, filled with `fill`.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>

#include "gpubatch/device.hpp"

struct CallerMemory {
  std::unique_ptr<float, decltype(&std::free)> owner{nullptr, &std::free};
  std::span<float> span;
};

inline CallerMemory caller_memory(const gpubatch::Device& device, std::size_t floats, float fill = 0.0f) {
  const std::size_t align = device.host_import_alignment();
  const std::size_t bytes = (floats * sizeof(float) + align - 1) / align * align;
  CallerMemory m;
  m.owner.reset(static_cast<float*>(std::aligned_alloc(align, bytes)));
  m.span = std::span<float>(m.owner.get(), bytes / sizeof(float));
  std::fill(m.span.begin(), m.span.end(), fill);
  return m;
}
