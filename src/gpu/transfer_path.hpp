#pragma once
// The copy-engine path for large batches (DESIGN.md "Large requests"). The CPU packs a batch into
// host-cached staging memory with ordinary cached stores; vkCmdCopyBuffer on the transfer queue
// moves it to device-local memory; the compute submission waits for that copy on the upload
// timeline, runs its kernels on device-local memory and copies the results to host-cached
// readback memory. Batch k+1's upload (transfer queue) thus overlaps batch k's compute and
// download (compute queue).
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gpu/memory.hpp"
#include "gpubatch/device.hpp"

namespace gpubatch::detail {
class GpuContext;
}

namespace gpubatch::gpu {

// Which batches take the copy-engine path: those whose upload (tables and inputs) holds at least
// `bytes`, and, unless `streaming_too`, only those whose kernels prefer device memory
// (BatchPlan::prefers_device_memory: matmul, per-segment custom kernels).
struct CopyEngineRule {
  std::uint64_t bytes = 0;
  bool streaming_too = true;
  bool takes(std::size_t upload_bytes, bool prefers_device_memory) const noexcept {
    return upload_bytes >= bytes && (streaming_too || prefers_device_memory);
  }
};
// options.copy_engine_bytes, else GPUBATCH_COPY_ENGINE_BYTES, each for every batch; else the
// default: 256 KiB for batches that prefer device memory (matmul, per-segment custom kernels) on
// a device with memory of its own, never for the others, and never anywhere on a device whose memory is host memory.
CopyEngineRule copy_engine_rule(const detail::GpuContext& ctx, const DeviceOptions& options);

// Direct-path batches (no copy engine) whose upload holds at least this many bytes are packed
// into host-cached memory (MemoryKind::staging) instead of write-combined memory: the CPU's copy
// runs at cached speed and the kernels read it across the bus all the same. On the H200 one
// thread's memcpy into write-combined memory moved ~6 GB/s, into cached memory ~15 GB/s.
// GPUBATCH_CACHED_UPLOAD_BYTES (bytes, or "never"), else 256 KiB.
std::uint64_t cached_upload_bytes();

// Direct-path batches whose upload holds at most this many bytes (and fewer than
// cached_upload_bytes()) are packed into device-local memory the host maps (MemoryKind::
// upload_near), where the device has it: a lone caller's kernels then read their input without
// a round trip across the bus. GPUBATCH_NEAR_UPLOAD_BYTES (bytes, or "off": no batch), else 64 KiB.
std::uint64_t near_upload_bytes();
// The same line for a lone batch (at most kNearLoneRequests requests), where only its own
// latency is at stake: GPUBATCH_NEAR_LONE_BYTES (bytes, or "off": the line above), else every
// such batch below cached_upload_bytes(). On the H200 a lone caller of 64 KiB and 240 KiB gained
// 2-4 and 7-9 us at p50 from it; batches of many requests at 1 M/s offered gained at p50 too
// (about 40 us of 175) but their p99 was 0.88-2.9 ms in most runs where the 64 KiB line had
// 0.49-0.78 ms outside the episodes both had (BENCHMARKS.md, twentieth session of 2026-11-29),
// so that line stays at 64 KiB.
std::uint64_t near_lone_bytes();
inline constexpr std::size_t kNearLoneRequests = 2;
// Batches from cached_upload_bytes() on go to device-local memory the host maps too, where the
// device has it, instead of host-cached memory: GPUBATCH_NEAR_BIG (on/off), else on.
bool near_big();

// How copy-engine batches return results: false, copied back by vkCmdCopyBuffer after the
// kernels (the default); true, written by the kernels straight into host memory (readback or the
// caller's HostBuffer) over the bus, so the compute queue runs no copy. GPUBATCH_COPY_RESULTS =
// engine | kernel; anything else is an invalid_config Error.
bool copy_results_by_kernel();

// Whether built-in element-wise kernels do sixteen elements per invocation (four vec4s;
// op_kernel.glsl's GPUBATCH_VECTOR; DESIGN.md "Large requests"): GPUBATCH_EW_VECTOR = on | off, for
// side-by-side runs; unset, `device_default` (on for a device of host cores, where each lane's load
// is a scalar gather and wide ones pay: lavapipe 1.33-1.38x the requests/s of 256-float relu at
// four per invocation, 1.03-1.29x more at sixteen; off
// on a GPU, where fewer, wider loads across the bus lost 10-20 % on the H100). Anything else is
// an invalid_config Error.
bool ew_vector_kernels(bool device_default);

// GPUBATCH_UPLOAD_WAIT = host: the host waits for a batch's upload before it submits the batch's
// compute (which then waits on no semaphore); unset or "device": the compute submission waits on
// the upload timeline (the default). A diagnostic for RELIABILITY.md "A copy-engine batch that
// never completes"; anything else is an invalid_config Error.
bool upload_wait_on_host();

// Requests of at least `bytes` (input + output) that an executor may hand over as chunks, and
// the largest chunk's input floats (DeviceOptions::split_bytes; chunked_request.hpp): options,
// else GPUBATCH_SPLIT_BYTES (bytes or "never"), else 8 MiB on a device with memory of its own,
// never on one whose memory is host memory; the chunk, GPUBATCH_SPLIT_CHUNK_BYTES, else 4 MiB.
struct SplitRule {
  std::uint64_t bytes = 0;
  std::size_t chunk_floats = 0;
};
SplitRule split_rule(const detail::GpuContext& ctx, const DeviceOptions& options);

// A device's rules for where batches' data goes, read once when it opens.
struct PathRules {
  CopyEngineRule copy_engine;
  bool results_by_kernel = false;            // copy_results_by_kernel()
  std::uint64_t cached_upload_bytes = 0;     // cached_upload_bytes()
  std::uint64_t near_upload_bytes = 0;       // near_upload_bytes()
  std::uint64_t near_lone_bytes = 0;         // near_lone_bytes()
  bool near_big = false;                     // near_big()
  bool ew_vector = false;                    // ew_vector_kernels()
  bool upload_wait_on_host = false;          // upload_wait_on_host()
  bool early_results = false;                // early_results() (early_results.hpp)
  SplitRule split;                           // split_rule()
  std::uint64_t copy_part_bytes = 0;         // copy_part_bytes()
};

// A batch's input copy is shared out among the submitting thread and idle completion threads
// (ParallelRunner) only in parts of at least this many bytes: below it a helper's wake-up costs
// more than its share of the copy saves. GPUBATCH_COPY_PART_BYTES (bytes, at least 4 KiB), else
// 256 KiB; for side-by-side runs (BENCHMARKS.md, thirty-ninth session).
std::uint64_t copy_part_bytes();

// Where a direct-path batch's tables and inputs go (`has_near`: MemoryPool::has_near_upload()).
enum class UploadPlace { near, write_combined, cached };
UploadPlace upload_place(std::uint64_t upload_bytes, std::size_t requests, const PathRules& rules, bool has_near);

// One extra region copied by the GPU: from a caller's HostBuffer into device memory, or back.
struct BufferCopy {
  VkBuffer buffer = VK_NULL_HANDLE;  // the host buffer
  VkDeviceSize host_offset = 0;
  VkDeviceSize device_offset = 0;    // into the frame's device input or output area
  VkDeviceSize bytes = 0;
};

// The regions of [0, total) that `holes` (ranges [device_offset, device_offset + bytes), any
// order, not overlapping) leave, in order, as copies between two buffers at the same offsets plus
// `src_base` and `dst_base`. A batch's host buffers are copied by the GPU on their own: copying the
// staging area over their ranges too moved every such byte twice each way (on the H100 a lone
// 4,194,304-float relu from and into HostBuffers took 1.56 ms, about 32 MiB at the engines' rate).
std::vector<VkBufferCopy> staged_regions(std::size_t total, std::span<const BufferCopy> holes,
                                         VkDeviceSize src_base, VkDeviceSize dst_base);

// The part of a batch frame the copy-engine path uses; reused batch after batch.
class TransferFrame {
 public:
  TransferFrame() = default;
  TransferFrame(const TransferFrame&) = delete;
  TransferFrame& operator=(const TransferFrame&) = delete;
  // Frees the command pool (the allocations free themselves). Call before the device goes.
  void destroy(VkDevice device) noexcept;

  // Makes room for a batch: staging and device input of `upload_bytes`, device output of
  // `output_bytes`.
  void prepare(detail::GpuContext& ctx, std::size_t upload_bytes, std::size_t output_bytes);
  std::byte* host() const { return staging_.mapped(); }
  std::uint64_t input_address() const { return device_in_.address(); }
  std::uint64_t output_address() const { return device_out_.address(); }

  // Records and submits the upload of the first `bytes` of staging (and of `extra`, caller
  // buffers read in place) into the device input; returns the upload timeline value to wait for.
  std::uint64_t upload(detail::GpuContext& ctx, std::size_t bytes, std::span<const BufferCopy> extra);
  // Records, after the batch's kernels, the copy of `bytes` of results into `readback` (and of
  // `extra` into caller buffers), with the barriers that make them visible to the host.
  void record_download(VkCommandBuffer cmd, const Allocation& readback, std::size_t bytes,
                       std::span<const BufferCopy> extra) const;

 private:
  Allocation staging_, device_in_, device_out_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
};

}  // namespace gpubatch::gpu
