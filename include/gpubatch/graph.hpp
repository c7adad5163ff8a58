#pragma once
// GpuCommandBatch: queue a graph of operations over GPU-resident buffers, then run all of it with
// one upload pass, one submission and one download pass.
//
//   gpubatch::GpuCommandBatch g(device);
//   auto x = g.upload(xs);                          // nothing runs yet
//   auto y = g.add(g.scale(g.relu(x), 2.0f), g.upload(bias));
//   g.execute();                                    // 1 upload pass, 1 kernel (fused), 1 download
//   std::vector<float> out = g.read(y);
//
// With pinned memory of the device (Device::allocate_host), no CPU copy is made of the data at
// all: upload(host_buffer) reads the caller's buffer in place and deliver_to(id, host_buffer)
// has the result written straight into one (the copy engine copies from and to it with
// Transfers::copy; the kernels read and write it through its device address with
// Transfers::direct):
//
//   gpubatch::HostBuffer xs = device.allocate_host(n), out = device.allocate_host(n);
//   ... fill xs ...
//   auto y = g.relu(g.upload(xs));
//   g.deliver_to(y, out);                           // before execute(): the copy is recorded
//   g.execute();                                    // out holds relu(xs)
//
// Consecutive element-wise operations of equal length are fused into one kernel generated and
// compiled at run time (cached by the chain's shape); intermediates that must exist in memory
// share recycled device buffers, so a chain of any length over N floats (each operation taking
// the previous one's result, and inputs) holds at most 3 N-float intermediates at a time,
// besides its inputs and the results it downloads.
//
// Buffer lifetime: ids returned by upload() and by operations belong to the next execute().
// After it, the results it downloaded are readable until the execute after; they cannot feed
// operations of a later execute (upload the data again, or import it). Ids from import_buffer()
// stay valid, on the GPU, for the batch's lifetime and are uploaded once.
// A result is downloaded when no later operation of the same execute consumes it, or when keep()
// asked for it. A GpuCommandBatch is used by one thread at a time; several batches may share a
// device across threads. Every misuse throws Error(invalid_argument) naming the cause (data larger
// than the device can hold: request_too_large).
//
// HostBuffers: the batch holds the memory of every HostBuffer given to it until the execute
// that reads or writes it has completed, so the caller may drop its HostBuffer at once. The
// buffer is read (uploads, imports) or written (deliveries) during that execute, not when the
// call is made: leave its contents alone until execute() returns. One execute reads or writes
// a given HostBuffer once (it cannot be both an upload and a delivery target of one execute).
// Plain span uploads are copied by the CPU; copies of 1 MiB and more, and reads of that size,
// are spread over a few threads.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/host_buffer.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch {

// One buffer of one GpuCommandBatch. A default-constructed id is invalid.
class BufferId {
 public:
  BufferId() = default;
  bool valid() const noexcept { return batch_ != 0; }
  friend bool operator==(const BufferId&, const BufferId&) = default;

 private:
  friend class GpuCommandBatch;
  BufferId(std::uint64_t batch, std::uint64_t generation, std::uint32_t index)
      : batch_(batch), generation_(generation), index_(index) {}
  std::uint64_t batch_ = 0;
  std::uint64_t generation_ = 0;  // 0: imported; else the execute it belongs to (1, 2, ...)
  std::uint32_t index_ = 0;
};

// How data gets to and from the kernels.
enum class Transfers : std::uint8_t {
  // `direct` where the device's working memory is host-visible anyway (integrated GPUs, CPU
  // devices such as lavapipe), else `copy`.
  automatic,
  // Uploads are copied from staging into device-local buffers (vkCmdCopyBuffer), results copied
  // from device-local buffers into host readback memory: best where kernels read data repeatedly
  // and device memory is much faster than the bus (discrete GPUs).
  copy,
  // Kernels read uploads straight from staging memory and write downloaded results straight into
  // readback memory, through their device addresses: no copy commands; only intermediates live in
  // device-local buffers.
  direct,
};

struct GraphOptions {
  bool fuse = true;                  // fuse consecutive element-wise operations into one kernel
  std::uint32_t max_fused_ops = 64;  // operations per generated kernel (>= 2)
  Transfers transfers = Transfers::automatic;
};

// What one execute() did.
struct ExecuteStats {
  std::uint64_t operations = 0;       // operations run
  std::uint64_t submissions = 0;      // queue submissions (0 or 1)
  std::uint64_t uploads = 0;          // upload passes (0 or 1)
  std::uint64_t downloads = 0;        // download passes (0 or 1)
  std::uint64_t dispatches = 0;       // compute dispatches recorded
  std::uint64_t fused_dispatches = 0;  // of those, generated fused kernels
  std::uint64_t kernels_compiled = 0;  // generated kernels compiled by this execute (cache misses)
  std::uint64_t bytes_up = 0;          // bytes of input data (staged, or read from HostBuffers)
                                       // and kernel tables sent to the device
  std::uint64_t bytes_down = 0;        // bytes of results downloaded (readback or HostBuffers)
  std::uint64_t host_bytes = 0;        // of bytes_up and bytes_down: data read from or written
                                       // into callers' HostBuffers in place (no CPU copy)
  std::uint64_t device_bytes = 0;      // device-local memory this execute's buffers needed at
                                       // once (intermediates; with Transfers::copy also uploads
                                       // and results; never imports)
  bool direct = false;                 // whether it ran with Transfers::direct
};

class GpuCommandBatch {
 public:
  explicit GpuCommandBatch(Device& device, const GraphOptions& options = {});
  ~GpuCommandBatch();
  GpuCommandBatch(GpuCommandBatch&&) noexcept;
  GpuCommandBatch& operator=(GpuCommandBatch&&) noexcept;
  GpuCommandBatch(const GpuCommandBatch&) = delete;
  GpuCommandBatch& operator=(const GpuCommandBatch&) = delete;

  // Data for the next execute, copied now into host-visible staging memory (its only host-side
  // copy); execute() makes it the kernels'. Empty data is refused.
  BufferId upload(std::span<const float> data);
  BufferId upload(std::initializer_list<float> data) { return upload(std::span<const float>(data.begin(), data.size())); }
  // Data that stays on the GPU across executes (weights, constants): uploaded by the next
  // execute(), never again.
  BufferId import_buffer(std::span<const float> data);
  BufferId import_buffer(std::initializer_list<float> data) { return import_buffer(std::span<const float>(data.begin(), data.size())); }

  // The same from the caller's pinned memory (Device::allocate_host or import_host on this
  // batch's device), without a CPU copy: the next execute reads the buffer in place, so its
  // contents must stay as they are until execute() returns; the batch holds the memory until
  // then (the caller may drop its HostBuffer). An empty buffer, or one of another device (or of
  // the one recover() replaced), throws Error(invalid_argument).
  BufferId upload(const HostBuffer& data);
  BufferId import_buffer(const HostBuffer& data);  // copied into device memory by the next execute
  // Have the next execute write result `id` straight into `out` (no readback memory, no CPU
  // copy): a copy command from device memory, or its kernel writing there. Call it before
  // execute(); `id` must be a result of the pending execute (an intermediate becomes a
  // downloaded result, as with keep()), `out` exactly size(id) floats of this device's memory,
  // neither an upload of this execute nor another result's target. Else Error(invalid_argument),
  // and the batch is as before. After execute(), `out` holds the values; read(id) copies them
  // from there.
  void deliver_to(BufferId id, HostBuffer& out);

  // Operations: each checks its inputs, queues itself and returns its result's id.
  // Element-wise, one per element-wise op of the table (gpubatch/op_table.hpp): relu(x),
  // scale(x, factor), add(a, b), sub, mul, sigmoid, tanh, swish, gelu, lerp(a, b, t), abs, exp,
  // clamp(x, lo, hi), ...
#define GPUBATCH_GRAPH_METHOD(name, kind, arity, scalars, params, ...) \
  GPUBATCH_IF_EW_##kind(BufferId name(GPUBATCH_OPERANDS_##arity(BufferId) GPUBATCH_FLOAT_PARAMS_##scalars params);)
  GPUBATCH_OPS(GPUBATCH_GRAPH_METHOD)
#undef GPUBATCH_GRAPH_METHOD
  BufferId dot(BufferId a, BufferId b);  // one float
  BufferId matmul(BufferId a, BufferId b, std::uint32_t m, std::uint32_t k, std::uint32_t n);
  // Any element-wise op of the table: `scalar` and `scalar2` are its scalars (scale's factor,
  // lerp's t, clamp's lo and hi).
  BufferId apply(Op op, BufferId a, BufferId b = {}, float scalar = 0.0f, float scalar2 = 0.0f);
  // A kernel registered with register_kernel() on this batch's device.
  BufferId custom(std::string_view kernel, BufferId a, float scalar = 0.0f);
  BufferId custom(std::string_view kernel, BufferId a, BufferId b, float scalar = 0.0f);

  // Also download `id` (a result that later operations consume) at the next execute.
  void keep(BufferId id);

  // Runs everything queued since the last execute: one upload pass, one submission, the
  // dispatches in order, one download pass; waits for it. On failure (compile_failed,
  // out_of_memory, device_lost) nothing queued for it remains: its ids become unreadable.
  void execute();

  // A result of the last execute(), copied by the CPU (from readback memory, or from the
  // HostBuffer it was delivered to). To get a result without any copy, deliver_to() it.
  std::vector<float> read(BufferId id) const;
  void read_into(BufferId id, std::span<float> out) const;  // out.size() must equal size(id)
  std::size_t size(BufferId id) const;                       // floats

  const ExecuteStats& last_execute() const;
  const GraphOptions& options() const;
  Device& device() const;

  struct Impl;  // opaque

 private:
  std::unique_ptr<Impl> impl_;
  static BufferId make_id(std::uint64_t batch, std::uint64_t generation, std::uint32_t index) {
    return BufferId(batch, generation, index);
  }
};

}  // namespace gpubatch
