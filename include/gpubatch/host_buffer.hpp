#pragma once
// Pinned host memory the device reads and writes in place: Device::allocate_host(n) returns a
// HostBuffer the caller fills and hands to a request as its input (Request::from_host) and/or as
// the place its result is written (Request::deliver_to). No CPU copy is made of either: small
// batches' kernels read and write it directly, large batches' copy engine DMAs from and to it
// (docs/DESIGN.md "Large requests"). Device::import_host wraps the caller's own suitably aligned
// memory the same way, where the device can import it. Plain std::vector requests work as before.
#include <cstddef>
#include <memory>
#include <span>
#include <utility>

namespace gpubatch {

namespace detail {
// What a HostBuffer holds; the device layer derives from it (the memory, its VkBuffer, its
// device). Requests share it, so memory in flight lives until the device is done with it.
struct HostMemory {
  virtual ~HostMemory() = default;
  float* data = nullptr;
  std::size_t floats = 0;
};

// Floats [first, first + floats) of another HostMemory, which it keeps alive: a device set cuts
// a large request from HostBuffers into such ranges, one per device (src/executor/
// device_set_batch.cpp); the device layer resolves it to the memory it views.
struct HostMemoryView final : HostMemory {
  HostMemoryView(std::shared_ptr<HostMemory> memory, std::size_t first_float, std::size_t count)
      : of(std::move(memory)), first(first_float) {
    data = of->data + first_float;
    floats = count;
  }
  std::shared_ptr<HostMemory> of;
  std::size_t first = 0;
};
}  // namespace detail

class HostBuffer {
 public:
  HostBuffer() = default;  // empty: no memory
  HostBuffer(HostBuffer&&) noexcept = default;
  HostBuffer& operator=(HostBuffer&&) noexcept = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::span<float> span() noexcept { return memory_ ? std::span<float>(memory_->data, memory_->floats) : std::span<float>(); }
  std::span<const float> span() const noexcept {
    return memory_ ? std::span<const float>(memory_->data, memory_->floats) : std::span<const float>();
  }
  float* data() noexcept { return memory_ ? memory_->data : nullptr; }
  const float* data() const noexcept { return memory_ ? memory_->data : nullptr; }
  std::size_t size() const noexcept { return memory_ ? memory_->floats : 0; }
  bool empty() const noexcept { return size() == 0; }
  float& operator[](std::size_t i) noexcept { return memory_->data[i]; }
  float operator[](std::size_t i) const noexcept { return memory_->data[i]; }
  float* begin() noexcept { return data(); }
  float* end() noexcept { return data() + size(); }
  const float* begin() const noexcept { return data(); }
  const float* end() const noexcept { return data() + size(); }

  // The shared memory (what requests hold). Internal seam; null when empty.
  const std::shared_ptr<detail::HostMemory>& memory() const noexcept { return memory_; }
  explicit HostBuffer(std::shared_ptr<detail::HostMemory> memory) noexcept : memory_(std::move(memory)) {}

 private:
  std::shared_ptr<detail::HostMemory> memory_;
};

}  // namespace gpubatch
