#pragma once
// One large element-wise request as chunks that pipeline (DESIGN.md "Large requests", issue 12):
// the calling thread copies chunk k+1 of the request's vector into pinned memory while the GPU
// runs chunk k, whose kernel reads that memory (and b's, for ops of two inputs) and writes its
// results into pinned memory in place (a dot: its partial sum, added up in double), and copies an earlier chunk's results back into the request's own buffer. Each copy is
// spread over the executor's helpers (split_copy). Up to kSlots chunks are on the device at once.
//
// Why: a lone 4,194,304-float relu from vectors spent its time one stage after the other on the
// H100 (copy in 0.63 ms, device 0.66 ms, copy out 0.60 ms; BENCHMARKS.md third session of
// 2026-11-27); in chunks the device's part hides under the copies.
//
// The chunks are ordinary batches of one request each (Request::from_host ... deliver_to on the
// pool's buffers), so planning, recording, frames, faults and errors are those of any batch.
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/host_buffer.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::detail {
class GpuContext;
}

namespace gpubatch::gpu {

class VulkanBatchDevice;

// Whether a request can go in chunks: an element-wise op (relu ... clamp, add ... lerp) or a chain
// without extra inputs by ranges, a dot by partial sums (added in double on the host), or a
// matmul of two rows or more by blocks of rows of A (B whole in each), from non-empty vectors
// (no HostBuffers). A matmul splits only where B, a row of A and a row of the result each fit
// one of the pool's buffers (matmul_chunk_rows).
bool splittable(const Request& request) noexcept;

// Pinned in/out buffer pairs of one chunk each, kept from request to request. At most kMaxSets are
// leased at once (callers beyond that are not split); a set of a replaced context is dropped.
struct ChunkSet {
  std::shared_ptr<detail::GpuContext> context;
  std::size_t floats = 0;  // each buffer's (a request's chunks use a prefix of them)
  std::vector<HostBuffer> in, out;
  std::vector<HostBuffer> in_b;  // made on the first request of two inputs that leases the set
};

class ChunkPool {
 public:
  static constexpr std::size_t kMaxSets = 4;
  static constexpr std::size_t kSlots = 3;  // chunks on the device at once

  // A set of kSlots pairs of `chunk_floats` each on `context` (allocated on first use); null when
  // kMaxSets are out. Throws Error(out_of_memory) when pinned memory cannot be had.
  std::unique_ptr<ChunkSet> lease(const std::shared_ptr<detail::GpuContext>& context, std::size_t chunk_floats);
  // A set whose chunks have all finished (one with work still on the device is dropped instead:
  // drop()).
  void give_back(std::unique_ptr<ChunkSet> set);
  void drop() noexcept;

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<ChunkSet>> free_;
  std::size_t leased_ = 0;
};

// `request` (splittable) as a chunked batch on `device`, in chunks of half its input, at least
// kMinChunkFloats (or `max_chunk_floats` when that is less) and at most `max_chunk_floats`: takes
// its input vector and submits the first chunk (wait_for() submits the others as it goes); null
// when the pool has no set free. Half, because the fewer the chunks the less each costs beside its
// copies: a lone 4,194,304-float relu took 1.58 ms in chunks of 1 MiB of input, 1.30-1.38 in
// chunks of 2 MiB, 1.08 in 4 MiB and 0.96 in 8 MiB (two chunks; H100, BENCHMARKS.md third session
// of 2026-11-27); the pool's buffers hold max_chunk_floats (4 MiB by default) so that a set stays
// small (kSlots pairs: 24 MiB).
// When that first submit throws, the request gets its vectors back and the error propagates.
inline constexpr std::size_t kMinChunkFloats = 262144;  // 1 MiB
std::size_t chunk_floats_for(std::size_t n, std::size_t max_chunk_floats) noexcept;
// A matmul's rows per chunk: half of M, as many as a buffer of `buffer_floats` holds of A's and
// of the result's rows; 0 (not split) for one row, or where B or one row does not fit a buffer.
std::size_t matmul_chunk_rows(std::size_t m, std::size_t k, std::size_t n, std::size_t buffer_floats) noexcept;
std::unique_ptr<detail::InFlightBatch> submit_chunked(std::shared_ptr<VulkanBatchDevice> device, ChunkPool& pool,
                                                      Request& request, std::size_t max_chunk_floats,
                                                      detail::ParallelRunner& parallel);

}  // namespace gpubatch::gpu
