#pragma once
// The plan of one GpuCommandBatch::execute(): what the queued operations become before anything is
// recorded. Pure data and pure functions, no Vulkan, so that fusion, buffer reuse and the staging
// layout can be tested without a device (tests/unit/plan/graph_plan_test.cpp). graph_record.cpp
// turns a plan into buffers, tables and one command buffer; graph.cpp queues the operations.
//
// Staging memory of an execute: [upload() data | segment and fused tables | imports' data];
// every offset in a plan is absolute within it. Readback memory: the downloaded values, in
// value order. Data in a caller's HostBuffer (an upload or import from one, a result delivered
// into one) takes no room in either: it is copied from or to the buffer by the copy engine, or
// read or written there by the kernels (direct transfers).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/custom_kernel.hpp"
#include "plan/fusion.hpp"
#include "gpubatch/host_buffer.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::gpu::graph {

// A value reference: an index into the execute's values, or kImport | an index into the imports.
inline constexpr std::uint32_t kImport = 0x80000000u;
inline constexpr std::size_t kNone = SIZE_MAX;
// Device buffers are sized in these units (MemoryPool::kAlignment; graph_record.cpp checks).
inline constexpr std::size_t kBufferAlignment = 256;

enum class Source : std::uint8_t { upload, op };

// An upload or an operation's result, of one execute.
struct Value {
  Source source = Source::op;
  std::uint32_t floats = 0;
  std::size_t staged_offset = 0;  // upload: where upload() put the data in staging memory
  // An upload read in place from this caller's HostBuffer (staged_offset unused), or a result
  // delivered into it (deliver_to(); no readback room). Held until the execute is done.
  std::shared_ptr<detail::HostMemory> host;
  bool keep = false;
  bool downloaded = false;  // set from the plan by execute
  std::size_t readback_offset = 0;
};

struct Node {
  Op op = Op::relu;
  std::shared_ptr<const CustomKernel> kernel;  // custom operation
  std::uint32_t in[2] = {0, 0};
  std::uint32_t arity = 1;
  float scalar = 0.0f;
  float scalar2 = 0.0f;  // an element-wise op's second scalar (clamp's hi)
  std::uint32_t m = 0, k = 0, n = 0;
  std::uint32_t out = 0;

  bool fusable() const { return kernel ? kernel->kind == KernelKind::elementwise : gpu::fusable(op); }
  std::string name() const { return kernel ? "custom kernel '" + kernel->name + "'" : std::string(to_string(op)); }
};

// What the planner needs to know of an imported buffer.
struct ImportInfo {
  std::uint32_t floats = 0;
  bool uploaded = false;  // by an earlier execute: already on the device
  bool host = false;      // its data is in a caller's HostBuffer (copied from there, not staged)
};

struct Input {
  std::span<const Node> nodes;
  std::span<const Value> values;
  std::span<const ImportInfo> imports;
  bool fuse = true;
  std::uint32_t max_fused_ops = 64;
  bool direct = false;          // Transfers::direct: uploads stay in staging, results go to readback
  std::size_t staged_data = 0;  // bytes of upload() data at the start of staging
  std::vector<std::size_t> recycled;  // sizes of the device buffers the last execute left to reuse
};

enum class StepKind : std::uint8_t { elementwise, dot, matmul, fused, custom_elementwise, custom_segment };

// One dispatch (two for a dot of several blocks) of the recorded command buffer.
struct Step {
  StepKind kind = StepKind::elementwise;
  std::uint32_t first_node = 0, node_count = 1;
  FusedShape shape;                      // fused
  std::string fused_key;                 // fused: the kernel cache's key of `shape`
  std::vector<std::uint32_t> inputs;     // fused: external inputs (value refs), in table order
  std::vector<std::uint32_t> outputs;    // fused: stored values, in table order
  std::uint32_t blocks = 0;
  std::uint32_t len = 0;                 // its segment's length: the fused result's, else input a's
  std::size_t segment_offset = 0;        // in staging
  std::size_t io_offset = 0, scalar_offset = 0;  // fused tables, in staging
  std::size_t scratch_offset = 0;        // dot: first partial, in floats
  bool dot_final = false;
};

// Where a value lives while the execute runs. Neither buffer nor staged: written straight into
// readback (a result downloaded with direct transfers), or nowhere (not materialized).
struct Placement {
  bool downloaded = false;
  std::size_t readback_offset = 0;  // when downloaded
  std::size_t buffer = kNone;       // index into Plan::buffers
  std::size_t staged_at = kNone;    // an upload the kernels read: its offset in staging
  bool host = false;                // read or written by the kernels in its caller's HostBuffer
};

// A device-local buffer of the execute. Several values may share one when their lifetimes do not
// overlap (a chain's intermediates ping-pong between a few buffers).
struct Buffer {
  std::size_t bytes = 0;
  bool recycled = false;  // one of Input::recycled of exactly `bytes`, else a new allocation
};

// A copy from staging into a device buffer, or data the kernels read where it is staged.
struct Upload {
  std::uint32_t ref = 0;            // a value, or kImport | an import
  std::size_t bytes = 0;
  std::size_t staging_offset = 0;
  std::size_t buffer = kNone;       // a value's: index into Plan::buffers (kNone: read in place)
  bool from_host = false;           // copied from the caller's HostBuffer (staging_offset unused)
};

// A result copied from its device buffer into readback or into the HostBuffer it is delivered
// to (one its kernel wrote there is not).
struct Download {
  std::size_t buffer = 0;  // index into Plan::buffers
  std::size_t readback_offset = 0;  // unless to_host
  std::size_t bytes = 0;
  std::uint32_t value = 0;
  bool to_host = false;    // into Value::host
};

struct Plan {
  std::vector<Placement> values;  // one per Input::values
  std::vector<Step> steps;
  std::vector<Buffer> buffers;    // in the order they are first needed
  std::vector<Upload> uploads;    // consumed uploads (value order), then imports not yet uploaded
  std::vector<Download> downloads;  // in value order
  std::size_t staged_data = 0;    // Input::staged_data
  std::size_t table_end = 0;      // end of the tables (and start of the imports' data) in staging
  std::size_t staged_bytes = 0;   // all of staging
  std::size_t readback_bytes = 0;
  std::size_t zeros_offset = 0;   // max_blocks zeroed words (the kernels' block counters)
  std::size_t max_blocks = 1;
  std::size_t scratch_floats = 0;  // dot partials
  std::uint64_t data_up = 0, data_down = 0;  // bytes of data (not tables) each way
  std::uint64_t host_bytes = 0;  // of those, read from or delivered into callers' HostBuffers

  // No operations and nothing to upload: execute() submits nothing.
  bool empty() const { return steps.empty() && uploads.empty(); }
  bool downloads_any() const { return data_down > 0; }
  std::size_t device_bytes() const;
  bool any_dot_final() const;
};

// The length of a value reference.
std::uint32_t floats_of(const Input& in, std::uint32_t ref);
Plan make_plan(const Input& in);

// The checks an operation makes when it is queued; each throws Error(invalid_argument).
void check_same_length(std::string_view what, std::uint32_t a, std::uint32_t b);
void check_matmul_shape(std::uint32_t a_floats, std::uint32_t b_floats, std::uint32_t m, std::uint32_t k,
                        std::uint32_t n);

}  // namespace gpubatch::gpu::graph
