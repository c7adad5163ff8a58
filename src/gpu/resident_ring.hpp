#pragma once
// Resident mode's device side (DESIGN.md "Resident mode"): a persistent kernel
// (shaders/resident.comp) on a compute queue of its own serves a ring of request slots in
// device-local host-visible memory. A request is copied into its slot and announced by a
// doorbell word; no command buffer is recorded or submitted for it. The kernel leaves after an
// idle time and is re-armed (one pre-recorded submission) by the next request or by a waiter
// that finds it gone; a watchdog turns a request with no answer into device_lost.
#include <vulkan/vulkan.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpubatch/batch_device.hpp"
#include "gpu/context.hpp"

namespace gpubatch::gpu {

struct ResidentOptions {
  std::chrono::microseconds idle{1000};       // the kernel leaves after this long without work
  std::chrono::milliseconds watchdog{60000};  // a request unanswered this long: device_lost
  std::uint32_t slots = 32;
  std::uint32_t slot_bytes = 8192;  // 64 bytes of header, the rest data (2032 floats)
};

class ResidentRing : public std::enable_shared_from_this<ResidentRing> {
 public:
  // Opens the ring on a second compute queue of `main`'s device, or, where that device has
  // none (lavapipe) or GPUBATCH_RESIDENT_DEVICE=own, on a VkDevice of its own on the same GPU
  // (opened with `options`). Throws Error(no_device) saying why the device cannot host it (no
  // device-local host-visible memory, no device clock), or what setting it up threw.
  static std::shared_ptr<ResidentRing> create(const std::shared_ptr<detail::GpuContext>& main,
                                              const DeviceOptions& options,
                                              const ResidentOptions& resident);
  ~ResidentRing();
  ResidentRing(const ResidentRing&) = delete;
  ResidentRing& operator=(const ResidentRing&) = delete;

  // Whether a (valid) request is served here: relu scale add sub mul sigmoid tanh swish gelu
  // lerp and dot, with its data fitting a slot (dot: at most 1024 elements, and both inputs in
  // the slot: 1016 with the default 8 KiB slots).
  static bool serves(const Request& request, std::uint32_t slot_bytes) noexcept;
  bool fits(const Request& request) const noexcept { return serves(request, options_.slot_bytes); }

  // Copies the request into the next slot and rings its doorbell: a batch of one. Null when the
  // slot is still in use (the ring is full) or the ring is lost. Throws Error(device_lost) when
  // the kernel's submission fails. Thread-safe.
  std::unique_ptr<detail::InFlightBatch> try_submit(const Request& request);

  // The watchdog fired or the device was lost: every request in the ring fails with
  // device_lost, and nothing more is accepted (make a new ring).
  bool lost() const noexcept { return lost_.load(std::memory_order_acquire); }
  std::uint64_t arms() const noexcept { return arms_.load(std::memory_order_relaxed); }
  // Whether the kernel's dispatch is still running (it has not left after its idle time).
  bool kernel_running();
  // Asks the kernel to leave and waits for it (up to a second). Requests still in the ring are
  // served first only if the kernel reaches them before it sees the exit word.
  void stop() noexcept;
  bool own_device() const noexcept { return own_device_; }
  // Whether the kernel writes results and done words into host memory of their own (the
  // default where the device has a host-cached type; GPUBATCH_RESIDENT_RESULTS=ring: over the
  // inputs in the ring, read back across the bus).
  bool host_results() const noexcept { return host_results_; }
  const ResidentOptions& options() const noexcept { return options_; }

 private:
  friend class ResidentTicket;
  ResidentRing() = default;
  void setup(const ResidentOptions& resident);
  void record();
  std::uint32_t* word(std::size_t index) const;  // into the mapped ring
  std::uint32_t* slot_word(std::uint32_t slot, std::uint32_t index) const;
  // The slot's result side: the same layout as a ring slot (done word, dot's result, data from
  // word kHeaderWords), in the results buffer or in the ring itself.
  std::uint32_t* out_word(std::uint32_t slot, std::uint32_t index) const;
  void setup_results();
  // Under mutex_: submits the kernel when it is not running and a ticket waits for it.
  void ensure_running_locked();
  void mark_lost_locked(const char* why);
  // A waiter's periodic look: re-arm a kernel that left, and the watchdog.
  void poke(std::uint32_t ticket, std::chrono::steady_clock::time_point submitted);
  bool done(std::uint32_t ticket) const noexcept;
  void release(std::uint32_t ticket) noexcept;
  void copy_result(std::uint32_t ticket, bool dot, std::uint32_t n, float* out);

  std::shared_ptr<detail::GpuContext> ctx_;
  bool own_device_ = false;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::uint32_t family_ = 0;
  ResidentOptions options_;
  std::uint32_t slot_words_ = 0;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  std::byte* mapped_ = nullptr;
  std::uint64_t address_ = 0;
  // The results buffer (host_results_), else none: results go over the inputs in the ring.
  VkBuffer results_buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory results_memory_ = VK_NULL_HANDLE;
  bool host_results_ = false;
  std::byte* out_ = nullptr;        // slot 0's first word on the result side
  std::uint64_t out_address_ = 0;   // its device address
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;

  mutable std::mutex mutex_;  // the slots' bookkeeping, the host's writes into the ring, arming
  std::uint32_t next_ticket_ = 1;         // guarded
  // Per slot, guarded. Tickets run through all 2^32 values (0 included after the wrap); the
  // slot of ticket t is (t - 1) % slots, which stays in step across the wrap (slots is 2^k).
  struct SlotState {
    std::uint32_t written = 0;  // the last ticket written to it
    bool used = false;          // `written` is meaningful
    bool held = false;          // a live batch holds it (its result not yet dropped)
  };
  std::vector<SlotState> slots_;
  bool submitted_ = false;                // guarded: the kernel's dispatch may be running
  std::atomic<bool> lost_{false};
  std::atomic<std::uint64_t> arms_{0};
};

}  // namespace gpubatch::gpu
