#pragma once
// A Vulkan device opened for compute, and the synchronous path: one request, one submission,
// wait. Copies of a Device share the same underlying device; executors and graphs built from it
// share its memory, kernels and pipeline cache. When the device is lost and re-created (the
// executor recovers it, docs/RELIABILITY.md), every copy, executor, graph and registered kernel
// moves to the new one together.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpubatch/ops.hpp"

namespace gpubatch {

namespace detail {
class BatchDevice;
class DeviceIdentity;
class GpuContext;
}  // namespace detail

struct DeviceOptions {
  // Which device: an index into Device::available() or a substring of its name. Empty: the
  // GPUBATCH_DEVICE environment variable, else the best (discrete, integrated, virtual, CPU).
  std::string selector;
  // Khronos validation layer. Unset: on when GPUBATCH_VALIDATION=1. When it is asked for but the
  // layer is not installed (validation_layer_installed()), the device opens without it and a
  // warning is logged once a process.
  std::optional<bool> validation;
  // Where the pipeline cache lives. Empty: GPUBATCH_CACHE_DIR, else $XDG_CACHE_HOME/gpubatch,
  // else ~/.cache/gpubatch. "none" disables the on-disk cache.
  std::string pipeline_cache_dir;
  // Largest request (input + output bytes) accepted; 0: what the device can hold in one buffer.
  // Larger requests fail with request_too_large.
  std::uint64_t max_request_bytes = 0;
  // The synchronous path gives up on a submission that has not completed after this long and
  // reports device_lost (a watchdog: a hung GPU must not hang the caller).
  std::chrono::milliseconds batch_timeout{60000};
  // The synchronous path polls its submission's completion for up to this long before it blocks
  // in the driver (a blocking wait's wake-up costs 20-30 us on the H200; a small request's whole
  // round trip 14 us). 0 blocks at once. Unset: GPUBATCH_RUN_SPIN_US, else 200 us. At most 10 ms.
  std::optional<std::chrono::microseconds> completion_spin;
  // Batches whose upload (inputs and tables) holds at least this many bytes go through the copy
  // engine: host-cached staging, vkCmdCopyBuffer to device-local memory on a transfer queue,
  // kernels on device memory, a copy back (docs/DESIGN.md "Large requests"). 0: every batch;
  // UINT64_MAX: none. Unset: GPUBATCH_COPY_ENGINE_BYTES (a number or "never"), else only batches
  // whose kernels prefer device memory (matmul, per-segment custom kernels) from 256 KiB on a
  // device with memory of its own; kernels that stream their inputs read host memory directly at
  // any size, which was faster on the H100 in 24 of 25 comparisons; none where device memory is
  // host memory (lavapipe, iGPUs).
  std::optional<std::uint64_t> copy_engine_bytes;
  // An executor's element-wise request (one input, a std::vector: relu ... clamp, a chain without
  // extra inputs) of at least this many input + output bytes, from a std::future or
  // handle.run(), is cut into chunks that pipeline: the caller's thread copies chunk k+1 into
  // pinned memory while the GPU runs chunk k and an earlier chunk's result is copied out
  // (docs/DESIGN.md "Large requests"). UINT64_MAX: never. Unset: GPUBATCH_SPLIT_BYTES (a number or
  // "never"), else 8 MiB on a device with memory of its own and never where device memory is
  // host memory (lavapipe, iGPUs).
  std::optional<std::uint64_t> split_bytes;
};

struct DeviceInfo {
  std::uint32_t index = 0;
  std::string name;
  std::string type;  // "discrete", "integrated", "virtual", "cpu", "other"
  std::string driver;
  std::uint32_t api_version = 0;
  std::array<std::uint8_t, 16> pipeline_cache_uuid{};
  std::uint64_t max_buffer_bytes = 0;  // largest single buffer the device can hold
  // "0000:00:06.0" where the driver reports it (VK_EXT_pci_bus_info); empty otherwise.
  std::string pci_address;
  // The CPUs that take the device's interrupts (Linux, read when the device opened; empty where
  // unknown, e.g. lavapipe). A thread that submits and waits from one of them answers a lone
  // request about three times slower (H200: 47-53 us against 14-17): keep latency-critical
  // callers off them (docs/DESIGN.md "The GPU's interrupt CPU"). Filled by Device::info(), not
  // by Device::available().
  std::vector<int> interrupt_cpus;
};

// Data movement and work done by a device since it was opened (all paths together).
struct DeviceCounters {
  std::uint64_t submissions = 0;
  std::uint64_t dispatches = 0;
  std::uint64_t uploads = 0;    // upload passes
  std::uint64_t downloads = 0;  // download passes
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  std::uint64_t pipelines_created = 0;      // pipelines built by this process
  std::uint64_t pipeline_cache_hits = 0;    // of those, built from the on-disk cache
  // Copy-engine uploads of large batches (DESIGN.md "Large requests"), not in `submissions`:
  // those count one compute submission per batch on either path.
  std::uint64_t copy_submissions = 0;
  // Command buffers recorded for batches; a batch whose frame already holds its dispatches (a
  // lone caller's next request of the same op and size) is submitted without one.
  std::uint64_t batch_recordings = 0;
  // Lone small results taken as they landed, before the batch's timeline signal (DESIGN.md "The
  // lone caller", early results; GPUBATCH_EARLY_RESULTS=off turns the early look off).
  std::uint64_t early_results = 0;
};

class Device {
 public:
  // Opens a device; throws Error(no_device) when Vulkan offers none (the message says how to
  // install lavapipe).
  explicit Device(const DeviceOptions& options = {});
  ~Device();
  Device(const Device&);
  Device& operator=(const Device&);
  Device(Device&&) noexcept;
  Device& operator=(Device&&) noexcept;

  // Every device Vulkan offers, in the order selection prefers them.
  static std::vector<DeviceInfo> available();

  // The device as it is now (after a recovery: the re-created one). The reference stays valid
  // as long as any copy of this Device.
  const DeviceInfo& info() const;
  // Totals since the Device was opened, across recoveries.
  DeviceCounters counters() const;

  // The synchronous path: validates, uploads, dispatches, downloads, with one submission, and
  // waits. Throws Error on bad input or device failure. Safe to call from several threads.
  Result run(const Request& request);

  // `floats` floats of pinned host memory this device reads and writes in place: fill it and pass
  // it as a request's input (Request::from_host) or result (Request::deliver_to); no CPU copy is
  // made. It keeps the device alive. Throws Error(invalid_argument) for 0 floats,
  // Error(out_of_memory) when the memory cannot be had.
  HostBuffer allocate_host(std::size_t floats) const;

  // The caller's own memory as a HostBuffer, used in place like allocate_host's (requests, and
  // GpuCommandBatch's upload, import_buffer and deliver_to), where the device can import host
  // memory (VK_EXT_external_memory_host: host_import_alignment() > 0). No copy is made and the
  // memory is not taken over:
  // - `memory`'s address and its size in bytes must both be multiples of host_import_alignment()
  //   (4096 on lavapipe and on the H100): e.g. std::aligned_alloc(alignment, bytes rounded up to it).
  // - The buffer holds its first `floats` floats (std::dynamic_extent: all of them), so a result
  //   of any length fits: a request reads or writes exactly the buffer's size().
  // - The caller keeps the memory allocated, and never frees it, while the HostBuffer or any
  //   Request or GpuCommandBatch given it lives, and while an executor holds a request using it:
  //   an executor drops its copy of a request a little after the request's future resolves (its
  //   shutdown() waits for that). Freeing it earlier is undefined behaviour: the device may still
  //   read or write it, and the driver still holds it imported.
  // - The host and the device share it as with allocate_host's memory: write inputs before
  //   submitting, read results after they are reported, touch nothing in between.
  // Throws Error(invalid_argument) where the device cannot import, for empty or misaligned
  // memory, for `floats` of 0 or past the memory, and for memory the driver refuses (one it
  // cannot pin, such as some file mappings; importing one range twice may be refused too);
  // Error(out_of_memory) when the device cannot take it. It keeps the device alive, like
  // allocate_host's buffers.
  HostBuffer import_host(std::span<float> memory, std::size_t floats = std::dynamic_extent) const;
  // What import_host needs of an address and a size, in bytes (minImportedHostPointerAlignment);
  // 0 where the device cannot import host memory.
  std::size_t host_import_alignment() const;

  // Internal seams for the executor and the graph.
  std::shared_ptr<detail::BatchDevice> batch_device() const;
  // The current context: take it at the start of an operation and keep it for that operation.
  std::shared_ptr<detail::GpuContext> context() const;
  std::shared_ptr<detail::DeviceIdentity> identity() const;

 private:
  std::shared_ptr<detail::DeviceIdentity> identity_;
  std::shared_ptr<detail::BatchDevice> batch_device_;
  std::chrono::milliseconds batch_timeout_{60000};
  std::chrono::microseconds run_spin_{0};
};

// `floats` floats of pinned host memory that every device of `devices` reads and writes in place:
// one allocation, imported into each (VK_EXT_external_memory_host), for an executor over several
// devices (BatchExecutor(std::vector<Device>)). A request that reads or writes it runs on
// whichever device the set places it on, and once more on another when that one is lost; with
// Device::allocate_host's memory it could run only on the device that allocated it. One device
// (or one listed twice): that device's allocate_host. The buffer keeps every device alive; a
// device that recover() re-created no longer has it (its requests run on the others). Throws
// Error(invalid_argument) for no devices, 0 floats, or a device that cannot import host memory
// (Device::host_import_alignment() == 0); Error(out_of_memory) when the memory cannot be had.
HostBuffer allocate_host(std::span<const Device> devices, std::size_t floats);

// The caller's own memory imported into every device of `devices`, used in place as
// allocate_host(devices, n)'s is: the rules and lifetime of Device::import_host hold for each
// device (address and size aligned to every device's host_import_alignment(); the caller keeps
// the memory while any request or buffer holding it lives). One device (or one listed twice):
// that device's import_host. Throws as Device::import_host does, for the first device that
// refuses, and Error(invalid_argument) for no devices.
HostBuffer import_host(std::span<const Device> devices, std::span<float> memory,
                       std::size_t floats = std::dynamic_extent);

// Messages the Khronos validation layer has printed in this process (all devices). Tests fail
// when it moves.
std::uint64_t validation_message_count() noexcept;

// Whether the Vulkan loader finds VK_LAYER_KHRONOS_validation (so that validation can be on).
bool validation_layer_installed();

}  // namespace gpubatch
