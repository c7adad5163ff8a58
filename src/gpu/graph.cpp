// GpuCommandBatch: records a queued graph of operations into one command buffer and submits it
// once on the context's timeline:
//   upload pass    upload() wrote the data into staging memory already; with Transfers::copy it
//                  is copied (vkCmdCopyBuffer) into device-local buffers, with Transfers::direct
//                  the kernels read it where it is. Imports are copied into their own buffers once.
//   dispatches     in queue order; runs of element-wise operations of one length fused into one
//                  generated kernel; barriers only between dependent dispatches (read after
//                  write, write after read or write, tracked per buffer).
//   download pass  results copied from device-local buffers into readback memory (copy), or
//                  written there by their kernels (direct).
// Intermediates live in device-local buffers handed out in step order and taken back after their
// last reader, so a chain ping-pongs between a few buffers; those buffers are kept for the next
// execute and the ones it does not need are freed.
#include "gpubatch/graph.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>

#include "gpu/batch_layout.hpp"
#include "gpu/context.hpp"
#include "gpu/custom_kernels.hpp"
#include "gpu/device_identity.hpp"
#include "gpu/encoding.hpp"
#include "gpu/fusion.hpp"
#include "gpu/glsl_compiler.hpp"
#include "gpu/kernels.hpp"
#include "gpu/memory.hpp"
#include "gpu/vk_check.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch {
namespace {

using gpu::align_up;
using gpu::ceil_div;
using gpu::kDataAlignment;

std::atomic<std::uint64_t> g_next_batch{1};

// A value reference: an index into the pending values, or kImport | an index into the imports.
constexpr std::uint32_t kImport = 0x80000000u;

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

enum class Source : std::uint8_t { upload, op };

// An upload or an operation's result, of one execute.
struct Value {
  Source source = Source::op;
  std::uint32_t floats = 0;
  std::size_t staged_offset = 0;  // upload: where upload() put the data in staging memory
  bool keep = false;
  bool downloaded = false;  // set by execute
  std::size_t readback_offset = 0;
};

struct Imported {
  std::uint32_t floats = 0;
  std::vector<float> host;  // until its upload
  gpu::Allocation device;
  bool uploaded = false;
  bool lost = false;  // it was on a device that was lost and re-created (follow_device())
};

struct Node {
  Op op = Op::relu;
  std::shared_ptr<const gpu::CustomKernel> kernel;  // custom operation
  std::uint32_t in[2] = {0, 0};
  std::uint32_t arity = 1;
  float scalar = 0.0f;
  float scalar2 = 0.0f;  // an element-wise op's second scalar (clamp's hi)
  std::uint32_t m = 0, k = 0, n = 0;
  std::uint32_t out = 0;

  bool fusable() const {
    return kernel ? kernel->kind == KernelKind::elementwise : gpu::fusable(op);
  }
  std::string name() const { return kernel ? "custom kernel '" + kernel->name + "'" : std::string(to_string(op)); }
};

enum class StepKind : std::uint8_t { elementwise, dot, matmul, fused, custom_elementwise, custom_segment };

// One dispatch (two for a dot of several blocks) of the recorded command buffer.
struct Step {
  StepKind kind = StepKind::elementwise;
  std::uint32_t first_node = 0, node_count = 1;
  VkPipeline pipeline = VK_NULL_HANDLE;
  gpu::FusedShape shape;                 // fused
  std::vector<std::uint32_t> inputs;     // fused: external inputs (value refs), in table order
  std::vector<std::uint32_t> outputs;    // fused: stored values, in table order
  std::uint32_t blocks = 0;
  std::size_t segment_offset = 0;        // in staging
  std::size_t io_offset = 0, scalar_offset = 0;  // fused tables, in staging
  std::size_t scratch_offset = 0;        // dot: first partial, in floats
  bool dot_final = false;
};

// True when the device has no device-local memory the host cannot see (integrated GPUs, CPU
// devices): copying between staging and device-local buffers then buys nothing.
bool device_memory_is_host_visible(const detail::GpuContext& ctx) {
  const auto& props = ctx.memory_properties();
  for (std::uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    const auto flags = props.memoryTypes[i].propertyFlags;
    if ((flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && !(flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) return false;
  }
  return true;
}

// The `hazards` of a dispatch: device ranges it reads and writes (by start address).
struct Access {
  std::vector<std::uint64_t> reads, writes;
};

}  // namespace

struct GpuCommandBatch::Impl {
  Device device;
  std::shared_ptr<detail::DeviceIdentity> identity;
  std::shared_ptr<detail::GpuContext> ctx;  // the context this graph's buffers live on
  GraphOptions options;
  bool direct = false;  // Transfers::direct in effect
  std::uint64_t serial = g_next_batch.fetch_add(1);
  std::uint64_t generation = 1;  // of the next execute
  std::vector<Value> pending;
  std::vector<Node> nodes;
  std::vector<Value> done;  // the last execute's values (generation - 1)
  bool last_failed = false;
  std::vector<Imported> imports;
  ExecuteStats stats;

  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  std::uint64_t in_flight = 0;  // timeline value not yet waited for (set after a watchdog)
  gpu::Allocation staging, readback, scratch;
  std::size_t staged = 0;  // bytes of upload() data at the start of `staging`, for the next execute
  std::multimap<VkDeviceSize, gpu::Allocation> recycled;  // device buffers of the last execute

  Impl(Device& d, const GraphOptions& o) : device(d), identity(d.identity()), ctx(identity->context()), options(o) {
    if (options.max_fused_ops < 2) options.max_fused_ops = 2;
    open_commands();
  }

  ~Impl() {
    // Never free memory the GPU may still use: the last submission completes first (or the
    // device is lost, and nothing runs any more).
    try {
      settle(std::chrono::nanoseconds::max());
    } catch (const Error&) {
    }
    vkDestroyCommandPool(ctx->device(), pool, nullptr);
  }

  std::chrono::milliseconds watchdog() const { return identity->options().batch_timeout; }

  // The command pool and buffer, and the transfer mode, on `ctx`.
  void open_commands() {
    direct = options.transfers == Transfers::direct ||
             (options.transfers == Transfers::automatic && device_memory_is_host_visible(*ctx));
    VkCommandPoolCreateInfo info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    info.queueFamilyIndex = ctx->queue_family();
    gpu::check_vk(vkCreateCommandPool(ctx->device(), &info, nullptr, &pool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    const VkResult r = vkAllocateCommandBuffers(ctx->device(), &alloc, &commands);
    if (r != VK_SUCCESS) {
      vkDestroyCommandPool(ctx->device(), pool, nullptr);
      pool = VK_NULL_HANDLE;
      gpu::throw_vk(r, "vkAllocateCommandBuffers");
    }
  }

  // An earlier execute that the watchdog gave up on must complete before its memory is reused:
  // polls the timeline's real counter for up to `timeout` (1 ms apart: only after a watchdog).
  // Throws Error(device_lost) when the device is lost or the time runs out.
  void settle(std::chrono::nanoseconds timeout) {
    if (!in_flight) return;
    const auto start = std::chrono::steady_clock::now();
    while (ctx->completed_value() < in_flight) {
      if (std::chrono::steady_clock::now() - start >= timeout)
        throw Error(ErrorCode::device_lost,
                    "graph execute: an earlier execute has still not completed " + std::to_string(watchdog().count()) +
                        " ms after the watchdog (DeviceOptions::batch_timeout) gave up on it; the device is presumed hung");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    in_flight = 0;
  }

  // After the device was re-created (DeviceIdentity::recover(), e.g. by an executor on it), the
  // graph moves to the new one. The first `staged_bytes` of staging (this execute's upload()
  // data; host memory) are copied over; buffers of the lost device are dropped, and imports
  // already uploaded there are gone (an execute that uses one fails with device_lost: import it
  // again).
  void follow_device(std::size_t staged_bytes) {
    auto current = identity->context();
    if (current == ctx) return;
    try {
      settle(std::chrono::nanoseconds::max());
    } catch (const Error&) {  // lost: nothing runs there any more
      in_flight = 0;
    }
    const std::shared_ptr<detail::GpuContext> old = std::exchange(ctx, std::move(current));
    gpu::Allocation old_staging = std::move(staging);  // destroyed before `old`
    readback.reset();
    scratch.reset();
    recycled.clear();
    for (Imported& im : imports) {
      im.lost = im.lost || im.uploaded;
      im.device.reset();
    }
    vkDestroyCommandPool(old->device(), pool, nullptr);
    pool = VK_NULL_HANDLE;
    commands = VK_NULL_HANDLE;
    open_commands();  // if it throws, execute() opens them next time
    if (staged_bytes > 0) {
      grow_staging(staged_bytes, 0);
      std::memcpy(staging.mapped(), old_staging.mapped(), staged_bytes);
    }
  }

  // ---- ids ------------------------------------------------------------------------------------
  void check_batch(std::uint64_t batch, const char* what) const {
    if (batch == 0) invalid(std::string(what) + ": invalid (default-constructed) BufferId");
    if (batch != serial)
      invalid(std::string(what) + ": BufferId belongs to another GpuCommandBatch");
  }

  // An id usable as an operation's input: a pending value or an import.
  std::uint32_t input_ref(std::uint64_t batch, std::uint64_t gen, std::uint32_t index, const char* what) const {
    check_batch(batch, what);
    if (gen == 0) {
      if (index >= imports.size()) invalid(std::string(what) + ": no imported buffer #" + std::to_string(index));
      return kImport | index;
    }
    if (gen < generation)
      invalid(std::string(what) + ": buffer #" + std::to_string(index) + " belongs to execute " + std::to_string(gen) +
              ", which has run; read() it and upload() it again, or import_buffer() data that must stay on the GPU");
    if (gen > generation || index >= pending.size())
      invalid(std::string(what) + ": no buffer #" + std::to_string(index));
    return index;
  }

  std::uint32_t floats_of(std::uint32_t ref) const {
    return ref & kImport ? imports[ref & ~kImport].floats : pending[ref].floats;
  }

  BufferId push(Node node, std::uint32_t out_floats) {
    if (pending.size() >= kImport - 1) invalid("too many buffers in one execute");
    Value v;
    v.source = Source::op;
    v.floats = out_floats;
    const auto index = static_cast<std::uint32_t>(pending.size());
    node.out = index;
    pending.push_back(std::move(v));
    nodes.push_back(std::move(node));
    return GpuCommandBatch::make_id(serial, generation, index);
  }

  std::uint32_t checked_floats(std::size_t n, const char* what) const {
    if (n == 0) invalid(std::string(what) + ": empty data");
    if (n > UINT32_MAX || n * sizeof(float) > ctx->max_allocation_bytes())
      throw Error(ErrorCode::request_too_large, std::string(what) + ": " + std::to_string(n) +
                                                    " floats exceed the device's largest buffer");
    return static_cast<std::uint32_t>(n);
  }

  // Makes `staging` hold at least `bytes`, keeping its first `keep` bytes.
  void grow_staging(std::size_t bytes, std::size_t keep) {
    if (staging && staging.size() >= bytes) return;
    if (bytes > ctx->max_allocation_bytes())
      throw Error(ErrorCode::out_of_memory, std::to_string(bytes) + " bytes of staging exceed the device's largest allocation");
    gpu::Allocation bigger = ctx->memory().allocate(
        gpu::MemoryKind::upload, std::max<std::size_t>(align_up(bytes + bytes / 2, 4096), 64 * 1024));
    if (keep > 0) std::memcpy(bigger.mapped(), staging.mapped(), keep);
    staging = std::move(bigger);
  }

  // upload(): the data goes straight into staging memory (its only copy on the host side).
  std::size_t stage(std::span<const float> data) {
    const std::size_t at = staged, bytes = data.size_bytes();
    grow_staging(at + bytes, staged);
    std::memcpy(staging.mapped() + at, data.data(), bytes);
    staged = align_up(at + bytes, kDataAlignment);
    return at;
  }

  // ---- execute --------------------------------------------------------------------------------
  void execute();
  gpu::Allocation take(VkDeviceSize bytes, std::vector<gpu::Allocation>& held,
                       std::multimap<VkDeviceSize, std::size_t>& free_now, std::size_t& index);
};

namespace {

// Size classes for recycling: a buffer serves requests from half its size up to its size.
bool fits(VkDeviceSize have, VkDeviceSize want) { return have >= want && have / 2 <= want; }

}  // namespace

gpu::Allocation GpuCommandBatch::Impl::take(VkDeviceSize bytes, std::vector<gpu::Allocation>& held,
                                            std::multimap<VkDeviceSize, std::size_t>& free_now, std::size_t& index) {
  bytes = align_up(bytes, gpu::MemoryPool::kAlignment);
  if (auto it = free_now.lower_bound(bytes); it != free_now.end() && fits(it->first, bytes)) {
    index = it->second;
    free_now.erase(it);
    return {};
  }
  index = held.size();
  if (auto it = recycled.lower_bound(bytes); it != recycled.end() && fits(it->first, bytes)) {
    gpu::Allocation a = std::move(it->second);
    recycled.erase(it);
    return a;
  }
  return ctx->memory().allocate(gpu::MemoryKind::device_local, bytes);
}

void GpuCommandBatch::Impl::execute() {
  // Whatever happens below, the queued work is consumed: its ids become the last execute's.
  std::vector<Value> values = std::move(pending);
  std::vector<Node> ops = std::move(nodes);
  const std::size_t staged_data = staged;  // upload() data already in staging
  staged = 0;
  pending.clear();
  nodes.clear();
  done.clear();
  ++generation;
  last_failed = true;
  stats = {};
  follow_device(staged_data);  // the device as it is now
  if (!pool) open_commands();
  settle(watchdog());
  for (const Node& n : ops)
    for (std::uint32_t i = 0; i < n.arity; ++i)
      if ((n.in[i] & kImport) && imports[n.in[i] & ~kImport].lost)
        throw Error(ErrorCode::device_lost, n.name() + ": imported buffer #" + std::to_string(n.in[i] & ~kImport) +
                                                " was on a device that was lost; import_buffer() it again");

  auto& memory = ctx->memory();
  auto& kernels = ctx->kernels();
  VkDevice vk = ctx->device();
  auto length = [&](std::uint32_t ref) {
    return ref & kImport ? imports[ref & ~kImport].floats : values[ref].floats;
  };

  // 1. Which values are consumed, and which are downloaded.
  std::vector<std::uint32_t> uses(values.size(), 0);
  for (const Node& n : ops)
    for (std::uint32_t i = 0; i < n.arity; ++i)
      if (!(n.in[i] & kImport)) ++uses[n.in[i]];
  for (std::size_t v = 0; v < values.size(); ++v)
    values[v].downloaded = values[v].source == Source::op && (values[v].keep || uses[v] == 0);

  // 2. Steps: runs of fusable operations of one length become one fused dispatch.
  std::vector<Step> steps;
  std::vector<std::uint32_t> step_of(ops.size());
  for (std::uint32_t i = 0; i < ops.size(); ++i) {
    const Node& n = ops[i];
    if (options.fuse && n.fusable() && !steps.empty()) {
      Step& last = steps.back();
      const Node& first = ops[last.first_node];
      const bool open = (last.kind == StepKind::fused || last.kind == StepKind::elementwise ||
                         last.kind == StepKind::custom_elementwise) &&
                        first.fusable() && values[first.out].floats == values[n.out].floats &&
                        last.node_count < options.max_fused_ops;
      if (open) {
        last.kind = StepKind::fused;
        ++last.node_count;
        step_of[i] = static_cast<std::uint32_t>(steps.size() - 1);
        continue;
      }
    }
    Step s;
    s.first_node = i;
    if (n.kernel) s.kind = n.kernel->kind == KernelKind::elementwise ? StepKind::custom_elementwise : StepKind::custom_segment;
    else if (n.op == Op::dot) s.kind = StepKind::dot;
    else if (n.op == Op::matmul) s.kind = StepKind::matmul;
    else s.kind = StepKind::elementwise;
    step_of[i] = static_cast<std::uint32_t>(steps.size());
    steps.push_back(std::move(s));
  }

  // 3. Which values need memory, and until when. Uploads nobody consumes are not uploaded.
  constexpr std::int64_t kNever = -2;
  std::vector<std::int64_t> def_step(values.size(), -1), last_use(values.size(), kNever);
  std::vector<bool> materialized(values.size(), false);
  for (std::uint32_t i = 0; i < ops.size(); ++i) def_step[ops[i].out] = step_of[i];
  for (std::uint32_t i = 0; i < ops.size(); ++i)
    for (std::uint32_t j = 0; j < ops[i].arity; ++j) {
      const std::uint32_t r = ops[i].in[j];
      if (r & kImport) continue;
      if (def_step[r] != step_of[i]) {
        materialized[r] = true;
        last_use[r] = std::max<std::int64_t>(last_use[r], step_of[i]);
      }
    }
  for (std::size_t v = 0; v < values.size(); ++v)
    if (values[v].downloaded) materialized[v] = true;

  // Device buffers: taken in step order, given back after their last reader, so a chain's
  // intermediates ping-pong between a few buffers.
  std::vector<gpu::Allocation> held;
  std::multimap<VkDeviceSize, std::size_t> free_now;
  std::vector<std::size_t> phys(values.size(), SIZE_MAX);
  auto assign = [&](std::size_t v) {
    std::size_t index = 0;
    gpu::Allocation a = take(std::size_t{values[v].floats} * sizeof(float), held, free_now, index);
    if (index == held.size()) held.push_back(std::move(a));
    phys[v] = index;
  };
  std::vector<std::vector<std::uint32_t>> release_after(steps.size());
  // With direct transfers, uploads stay in staging memory and results go straight to readback.
  for (std::size_t v = 0; v < values.size(); ++v)
    if (values[v].source == Source::upload && materialized[v] && !direct) assign(v);
  for (std::size_t v = 0; v < values.size(); ++v)
    if (materialized[v] && !values[v].downloaded && last_use[v] >= 0)
      release_after[static_cast<std::size_t>(last_use[v])].push_back(static_cast<std::uint32_t>(v));
  {
    std::size_t i = 0;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      for (; i < ops.size() && step_of[i] == s; ++i)
        if (materialized[ops[i].out] && !(direct && values[ops[i].out].downloaded)) assign(ops[i].out);
      for (std::uint32_t v : release_after[s])
        if (phys[v] != SIZE_MAX) free_now.emplace(held[phys[v]].size(), phys[v]);  // else: staged
    }
  }
  for (const auto& a : held) stats.device_bytes += a.size();
  stats.direct = direct;

  // 4. Kernels, tables and staging layout.
  // Staging: [upload() data | tables | imports' data]; table offsets are absolute.
  std::size_t table_end = staged_data, max_blocks = 1, scratch_floats = 0;
  auto reserve = [&](std::size_t bytes) {
    const std::size_t at = table_end;
    table_end += align_up(bytes, kDataAlignment);
    return at;
  };
  for (Step& s : steps) {
    const Node& n = ops[s.first_node];
    const std::uint32_t len = s.kind == StepKind::matmul || s.kind == StepKind::dot ? length(n.in[0]) : values[n.out].floats;
    s.segment_offset = reserve(sizeof(gpu::SegmentRecord));
    switch (s.kind) {
      case StepKind::elementwise:
        s.pipeline = kernels.get(gpu::kernel_name(n.op));
        s.blocks = ceil_div(len, gpu::kWorkgroupSize);
        break;
      case StepKind::custom_elementwise:
        s.pipeline = kernels.get_or_build(n.kernel->key, n.kernel->spirv);
        s.blocks = ceil_div(len, gpu::kWorkgroupSize);
        break;
      case StepKind::custom_segment:
        s.pipeline = kernels.get_or_build(n.kernel->key, n.kernel->spirv);
        s.blocks = 1;
        break;
      case StepKind::dot:
        s.pipeline = kernels.get(gpu::kernel_name(Op::dot));
        s.blocks = gpu::dot_blocks(len);
        s.dot_final = s.blocks > 1;
        s.scratch_offset = scratch_floats;
        if (s.dot_final) scratch_floats += s.blocks;
        break;
      case StepKind::matmul:
        s.pipeline = kernels.get(gpu::kernel_name(Op::matmul));
        s.blocks = gpu::matmul_blocks(n.m, n.n);
        break;
      case StepKind::fused: {
        // Values computed inside the group are registers; the rest are external inputs.
        std::map<std::uint32_t, std::int32_t> local, external;
        gpu::FusedShape& shape = s.shape;
        for (std::uint32_t i = s.first_node; i < s.first_node + s.node_count; ++i) {
          const Node& node = ops[i];
          gpu::FusedStep fs;
          fs.op = node.op;
          fs.kernel = node.kernel;
          fs.arity = node.arity;
          for (std::uint32_t j = 0; j < node.arity; ++j) {
            const std::uint32_t r = node.in[j];
            if (auto it = local.find(r); it != local.end() && !(r & kImport)) {
              fs.operand[j] = it->second;
            } else {
              auto [e, inserted] = external.emplace(r, static_cast<std::int32_t>(s.inputs.size()));
              if (inserted) s.inputs.push_back(r);
              fs.operand[j] = -(e->second + 1);
            }
          }
          const std::uint32_t n_scalars = node.kernel ? 1 : gpu::scalars(node.op);
          if (n_scalars > 0) fs.scalar = static_cast<std::int32_t>(shape.scalars);
          shape.scalars += n_scalars;
          const auto index = static_cast<std::int32_t>(shape.steps.size());
          local[node.out] = index;
          shape.steps.push_back(std::move(fs));
          if (materialized[node.out]) {
            shape.outputs.push_back(static_cast<std::uint32_t>(index));
            s.outputs.push_back(node.out);
          }
        }
        shape.inputs = static_cast<std::uint32_t>(s.inputs.size());
        const std::string key = gpu::fused_key(shape);
        if (kernels.has(key)) {
          s.pipeline = kernels.get_or_build(key, {});
        } else {
          const std::string source = gpu::fused_source(shape);
          spdlog::debug("gpubatch: compiling fused kernel {}", key);
          const auto spirv = gpu::compile_compute_glsl(source, "fused-kernel");
          s.pipeline = kernels.get_or_build(key, spirv);
          ++stats.kernels_compiled;
        }
        s.blocks = ceil_div(len, gpu::kWorkgroupSize);
        s.io_offset = reserve((s.inputs.size() + s.outputs.size()) * sizeof(std::uint64_t));
        s.scalar_offset = reserve(std::max<std::size_t>(shape.scalars, 1) * sizeof(float));
        break;
      }
    }
    max_blocks = std::max<std::size_t>(max_blocks, s.blocks);
  }
  const std::size_t zeros_offset = reserve(max_blocks * sizeof(std::uint32_t));
  std::size_t staged_bytes = table_end;
  struct Copy {
    const float* data;
    std::size_t bytes, staging_offset;
    VkBuffer dst;
    VkDeviceSize dst_offset;
  };
  std::vector<Copy> uploads;  // dst null: read by the kernels where it is staged
  std::vector<std::size_t> staged_at(values.size(), SIZE_MAX);
  for (std::size_t v = 0; v < values.size(); ++v)
    if (values[v].source == Source::upload && materialized[v]) {
      Copy c{nullptr, values[v].floats * sizeof(float), values[v].staged_offset, VK_NULL_HANDLE, 0};
      if (phys[v] != SIZE_MAX) c.dst = held[phys[v]].buffer(), c.dst_offset = held[phys[v]].offset();
      staged_at[v] = c.staging_offset;
      uploads.push_back(c);
    }
  std::vector<std::size_t> new_imports;
  for (std::size_t i = 0; i < imports.size(); ++i)
    if (!imports[i].uploaded) {
      Imported& im = imports[i];
      if (!im.device) im.device = memory.allocate(gpu::MemoryKind::device_local, im.floats * sizeof(float));
      uploads.push_back({im.host.data(), im.host.size() * sizeof(float), staged_bytes, im.device.buffer(), im.device.offset()});
      staged_bytes += align_up(uploads.back().bytes, kDataAlignment);
      new_imports.push_back(i);
    }
  std::size_t readback_bytes = 0;
  for (Value& v : values)
    if (v.downloaded) {
      v.readback_offset = readback_bytes;
      readback_bytes += align_up(v.floats * sizeof(float), kDataAlignment);
    }
  if (ops.empty() && uploads.empty()) {  // nothing to do
    last_failed = false;
    done = std::move(values);
    return;
  }
  if (staged_bytes > ctx->max_allocation_bytes() || readback_bytes > ctx->max_allocation_bytes())
    throw Error(ErrorCode::out_of_memory, "an execute of " + std::to_string(staged_bytes) + " bytes up and " +
                                              std::to_string(readback_bytes) + " down exceeds the device's largest allocation");
  auto ensure = [&](gpu::Allocation& a, gpu::MemoryKind kind, std::size_t bytes) {
    if (bytes == 0 || (a && a.size() >= bytes)) return;
    a.reset();
    a = memory.allocate(kind, std::max<std::size_t>(align_up(bytes + bytes / 4, 4096), 64 * 1024));
  };
  grow_staging(staged_bytes, staged_data);
  ensure(readback, gpu::MemoryKind::readback, readback_bytes);
  ensure(scratch, gpu::MemoryKind::device_local, scratch_floats * sizeof(float));

  // 5. Fill staging: tables, then data (copied once, from the caller's copy).
  std::byte* up = staging.mapped();
  const std::uint64_t up_addr = staging.address();
  auto address = [&](std::uint32_t ref) -> std::uint64_t {
    if (ref & kImport) return imports[ref & ~kImport].device.address();
    if (phys[ref] != SIZE_MAX) return held[phys[ref]].address();
    if (staged_at[ref] != SIZE_MAX) return up_addr + staged_at[ref];
    return readback.address() + values[ref].readback_offset;  // direct download
  };
  std::memset(up + zeros_offset, 0, max_blocks * sizeof(std::uint32_t));
  for (const Copy& c : uploads)
    if (c.data) std::memcpy(up + c.staging_offset, c.data, c.bytes);  // imports (uploads are there)
  for (Step& s : steps) {
    const Node& n = ops[s.first_node];
    gpu::SegmentRecord rec;
    rec.start = 0;
    switch (s.kind) {
      case StepKind::fused: {
        auto* io = reinterpret_cast<std::uint64_t*>(up + s.io_offset);
        for (std::size_t i = 0; i < s.inputs.size(); ++i) io[i] = address(s.inputs[i]);
        for (std::size_t o = 0; o < s.outputs.size(); ++o) io[s.inputs.size() + o] = address(s.outputs[o]);
        auto* scalars = reinterpret_cast<float*>(up + s.scalar_offset);
        scalars[0] = 0.0f;
        for (std::uint32_t i = 0; i < s.node_count; ++i)
          if (const std::int32_t j = s.shape.steps[i].scalar; j >= 0) {
            scalars[j] = ops[s.first_node + i].scalar;
            if (!ops[s.first_node + i].kernel && gpu::scalars(ops[s.first_node + i].op) == 2)
              scalars[j + 1] = ops[s.first_node + i].scalar2;
          }
        rec.a = up_addr + s.io_offset;
        rec.b = up_addr + s.scalar_offset;
        rec.len = values[n.out].floats;
        break;
      }
      default:
        rec.a = address(n.in[0]);
        rec.b = address(n.in[n.arity == 2 ? 1 : 0]);
        rec.dst = address(n.out);
        rec.p0 = n.scalar;
        rec.u0 = std::bit_cast<std::uint32_t>(n.scalar2);  // element-wise: the second scalar
        rec.len = length(n.in[0]);
        if (s.kind == StepKind::dot) rec.u0 = s.blocks;
        if (s.kind == StepKind::matmul) rec.u0 = n.m, rec.u1 = n.k, rec.u2 = n.n;
    }
    std::memcpy(up + s.segment_offset, &rec, sizeof(rec));
  }

  // 6. Record.
  VkCommandBuffer cmd = commands;
  gpu::check_vk(vkResetCommandPool(vk, pool, 0), "vkResetCommandPool");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  gpu::check_vk(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
  auto barrier = [&](VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
    VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    b.srcAccessMask = src;
    b.dstAccessMask = dst;
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
  };
  // Copies grouped by their device-side buffer: one vkCmdCopyBuffer per memory block.
  auto copy_grouped = [&](VkBuffer host_buffer, bool to_device, std::vector<std::pair<VkBuffer, VkBufferCopy>>& regions) {
    std::stable_sort(regions.begin(), regions.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<VkBufferCopy> batch;
    for (std::size_t i = 0; i < regions.size();) {
      const VkBuffer other = regions[i].first;
      batch.clear();
      for (; i < regions.size() && regions[i].first == other; ++i) batch.push_back(regions[i].second);
      if (to_device) vkCmdCopyBuffer(cmd, host_buffer, other, static_cast<std::uint32_t>(batch.size()), batch.data());
      else vkCmdCopyBuffer(cmd, other, host_buffer, static_cast<std::uint32_t>(batch.size()), batch.data());
    }
  };
  std::uint64_t data_up = 0;
  {
    std::vector<std::pair<VkBuffer, VkBufferCopy>> regions;
    for (const Copy& c : uploads) {
      if (c.dst) regions.push_back({c.dst, VkBufferCopy{staging.offset() + c.staging_offset, c.dst_offset, c.bytes}});
      data_up += c.bytes;
    }
    if (!regions.empty()) {
      copy_grouped(staging.buffer(), true, regions);
      barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT);
    }
  }
  const std::uint32_t max_x = ctx->limits().maxComputeWorkGroupCount[0];
  std::unordered_set<std::uint64_t> written, read;  // since the last barrier
  auto dispatch = [&](VkPipeline pipeline, const Step& s, std::uint32_t block_count) {
    gpu::PushConstants pc;
    pc.segments = up_addr + s.segment_offset;
    pc.blocks = up_addr + zeros_offset;
    pc.scratch = scratch ? scratch.address() + s.scratch_offset * sizeof(float) : 0;
    pc.block_count = block_count;
    pc.grid_x = std::min(block_count, max_x);
    pc.segment_count = 1;
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdPushConstants(cmd, kernels.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc), &pc);
    vkCmdDispatch(cmd, pc.grid_x, ceil_div(block_count, pc.grid_x), 1);
    ++stats.dispatches;
  };
  const VkPipeline dot_final = steps.end() != std::find_if(steps.begin(), steps.end(), [](const Step& s) { return s.dot_final; })
                                   ? kernels.get("dot_final")
                                   : VK_NULL_HANDLE;
  for (const Step& s : steps) {
    Access access;
    if (s.kind == StepKind::fused) {
      for (std::uint32_t r : s.inputs) access.reads.push_back(address(r));
      for (std::uint32_t v : s.outputs) access.writes.push_back(address(v));
    } else {
      const Node& n = ops[s.first_node];
      for (std::uint32_t j = 0; j < n.arity; ++j) access.reads.push_back(address(n.in[j]));
      access.writes.push_back(address(n.out));
    }
    bool hazard = false;
    for (auto a : access.reads) hazard |= written.count(a) != 0;
    for (auto a : access.writes) hazard |= written.count(a) != 0 || read.count(a) != 0;
    if (hazard) {
      barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      written.clear();
      read.clear();
    }
    read.insert(access.reads.begin(), access.reads.end());
    written.insert(access.writes.begin(), access.writes.end());
    dispatch(s.pipeline, s, s.blocks);
    if (s.kind == StepKind::fused) ++stats.fused_dispatches;
    if (s.dot_final) {
      barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT);
      dispatch(dot_final, s, 1);
    }
  }
  std::uint64_t data_down = 0;
  if (readback_bytes > 0) {
    std::vector<std::pair<VkBuffer, VkBufferCopy>> regions;
    for (std::size_t v = 0; v < values.size(); ++v)
      if (values[v].downloaded) {
        const VkDeviceSize bytes = values[v].floats * sizeof(float);
        data_down += bytes;
        if (phys[v] == SIZE_MAX) continue;  // written there by its kernel
        const gpu::Allocation& a = held[phys[v]];
        regions.push_back({a.buffer(), VkBufferCopy{a.offset(), readback.offset() + values[v].readback_offset, bytes}});
      }
    if (!regions.empty()) {
      barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
      copy_grouped(readback.buffer(), false, regions);
    }
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
  }
  gpu::check_vk(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");

  // 7. Submit once and wait on the timeline, for at most DeviceOptions::batch_timeout (the
  //    watchdog: a hung GPU must not hang the caller). Past it, in_flight stays set and the next
  //    execute, or the destructor, waits for it before the memory is reused.
  in_flight = ctx->submit(cmd);
  for (const Value& v : values)
    if (v.source == Source::op) ++stats.operations;
  stats.submissions = 1;
  stats.uploads = 1;
  stats.downloads = readback_bytes > 0 ? 1 : 0;
  stats.bytes_up = (table_end - staged_data) + data_up;
  stats.bytes_down = data_down;
  auto& counters = ctx->counters();
  counters.dispatches.fetch_add(stats.dispatches, std::memory_order_relaxed);
  counters.uploads.fetch_add(stats.uploads, std::memory_order_relaxed);
  counters.downloads.fetch_add(stats.downloads, std::memory_order_relaxed);
  counters.bytes_up.fetch_add(stats.bytes_up, std::memory_order_relaxed);
  counters.bytes_down.fetch_add(stats.bytes_down, std::memory_order_relaxed);
  if (!ctx->wait(in_flight, watchdog()))
    throw Error(ErrorCode::device_lost, "graph execute: the device did not complete it within " +
                                            std::to_string(watchdog().count()) +
                                            " ms (watchdog: DeviceOptions::batch_timeout)");
  in_flight = 0;
  if (readback_bytes > 0) readback.invalidate();

  for (std::size_t i : new_imports) {
    imports[i].uploaded = true;
    imports[i].host = {};
  }
  // This execute's buffers are the next one's to reuse; buffers it did not need are freed.
  recycled.clear();
  for (auto& a : held)
    if (a) {
      const VkDeviceSize size = a.size();
      recycled.emplace(size, std::move(a));
    }
  done = std::move(values);
  last_failed = false;
}

// ---- GpuCommandBatch ------------------------------------------------------------------------

GpuCommandBatch::GpuCommandBatch(Device& device, const GraphOptions& options)
    : impl_(std::make_unique<Impl>(device, options)) {}
GpuCommandBatch::~GpuCommandBatch() = default;
GpuCommandBatch::GpuCommandBatch(GpuCommandBatch&&) noexcept = default;
GpuCommandBatch& GpuCommandBatch::operator=(GpuCommandBatch&&) noexcept = default;

namespace {
GpuCommandBatch::Impl& checked(const std::unique_ptr<GpuCommandBatch::Impl>& impl) {
  if (!impl) invalid("use of a moved-from GpuCommandBatch");
  return *impl;
}
}  // namespace

BufferId GpuCommandBatch::upload(std::span<const float> data) {
  Impl& g = checked(impl_);
  Value v;
  v.source = Source::upload;
  v.floats = g.checked_floats(data.size(), "upload");
  if (g.pending.size() >= kImport - 1) invalid("too many buffers in one execute");
  v.staged_offset = g.stage(data);
  g.pending.push_back(std::move(v));
  return make_id(g.serial, g.generation, static_cast<std::uint32_t>(g.pending.size() - 1));
}

BufferId GpuCommandBatch::import_buffer(std::span<const float> data) {
  Impl& g = checked(impl_);
  Imported im;
  im.floats = g.checked_floats(data.size(), "import_buffer");
  im.host.assign(data.begin(), data.end());
  if (g.imports.size() >= kImport - 1) invalid("too many imported buffers");
  g.imports.push_back(std::move(im));
  return make_id(g.serial, 0, static_cast<std::uint32_t>(g.imports.size() - 1));
}

BufferId GpuCommandBatch::apply(Op op, BufferId a, BufferId b, float scalar, float scalar2) {
  Impl& g = checked(impl_);
  const std::string what(to_string(op));
  if (!gpu::fusable(op))
    invalid(what + ": not an element-wise operation (use dot(), matmul())");
  if (op_info(op).rule == ScalarRule::ordered && !(scalar <= scalar2))  // also catches NaN
    invalid(what + ": lo = " + std::to_string(scalar) + ", hi = " + std::to_string(scalar2) +
            ": needs lo <= hi, neither NaN");
  Node n;
  n.op = op;
  n.arity = gpu::arity(op);
  n.scalar = scalar;
  n.scalar2 = scalar2;
  n.in[0] = g.input_ref(a.batch_, a.generation_, a.index_, what.c_str());
  if (n.arity == 2) {
    n.in[1] = g.input_ref(b.batch_, b.generation_, b.index_, what.c_str());
    const auto la = g.floats_of(n.in[0]), lb = g.floats_of(n.in[1]);
    if (la != lb)
      invalid(what + ": size mismatch: a has " + std::to_string(la) + " floats, b has " + std::to_string(lb));
  } else if (b.valid()) {
    invalid(what + " takes one input");
  }
  const std::uint32_t out = g.floats_of(n.in[0]);
  return g.push(std::move(n), out);
}

// One method per element-wise op of the table.
#define GPUBATCH_GRAPH_OPERANDS_1 x, BufferId{}
#define GPUBATCH_GRAPH_OPERANDS_2 a, b
#define GPUBATCH_GRAPH_METHOD(name, kind, arity, scalars, params, ...)                                 \
  GPUBATCH_IF_EW_##kind(                                                                              \
      BufferId GpuCommandBatch::name(GPUBATCH_OPERANDS_##arity(BufferId) GPUBATCH_FLOAT_PARAMS_##scalars params) { \
        return apply(Op::name, GPUBATCH_GRAPH_OPERANDS_##arity GPUBATCH_FLOAT_ARGS_##scalars params);   \
      })
GPUBATCH_OPS(GPUBATCH_GRAPH_METHOD)
#undef GPUBATCH_GRAPH_METHOD

BufferId GpuCommandBatch::dot(BufferId a, BufferId b) {
  Impl& g = checked(impl_);
  Node n;
  n.op = Op::dot;
  n.arity = 2;
  n.in[0] = g.input_ref(a.batch_, a.generation_, a.index_, "dot");
  n.in[1] = g.input_ref(b.batch_, b.generation_, b.index_, "dot");
  const auto la = g.floats_of(n.in[0]), lb = g.floats_of(n.in[1]);
  if (la != lb) invalid("dot: size mismatch: a has " + std::to_string(la) + " floats, b has " + std::to_string(lb));
  return g.push(std::move(n), 1);
}

BufferId GpuCommandBatch::matmul(BufferId a, BufferId b, std::uint32_t m, std::uint32_t k, std::uint32_t n) {
  Impl& g = checked(impl_);
  Node node;
  node.op = Op::matmul;
  node.arity = 2;
  node.in[0] = g.input_ref(a.batch_, a.generation_, a.index_, "matmul");
  node.in[1] = g.input_ref(b.batch_, b.generation_, b.index_, "matmul");
  const std::string dims = std::to_string(m) + "x" + std::to_string(k) + " * " + std::to_string(k) + "x" + std::to_string(n);
  if (m == 0 || k == 0 || n == 0) invalid("matmul: dimensions " + dims + " include a zero");
  const auto la = g.floats_of(node.in[0]), lb = g.floats_of(node.in[1]);
  if (la != std::uint64_t{m} * k)
    invalid("matmul: size mismatch: A has " + std::to_string(la) + " floats, M x K = " + std::to_string(std::uint64_t{m} * k));
  if (lb != std::uint64_t{k} * n)
    invalid("matmul: size mismatch: B has " + std::to_string(lb) + " floats, K x N = " + std::to_string(std::uint64_t{k} * n));
  node.m = m, node.k = k, node.n = n;
  const std::uint32_t out = g.checked_floats(std::size_t{m} * n, "matmul result");
  return g.push(std::move(node), out);
}

BufferId GpuCommandBatch::custom(std::string_view kernel, BufferId a, float scalar) {
  return custom(kernel, a, BufferId{}, scalar);
}

BufferId GpuCommandBatch::custom(std::string_view kernel, BufferId a, BufferId b, float scalar) {
  Impl& g = checked(impl_);
  auto k = g.identity->custom_kernels().find(kernel);
  const std::string what = "custom kernel '" + std::string(kernel) + "'";
  if (!k) invalid(what + ": no kernel of that name is registered on this device");
  Node n;
  n.op = Op::relu;  // unused
  n.kernel = k;
  n.arity = k->inputs;
  n.scalar = scalar;
  n.in[0] = g.input_ref(a.batch_, a.generation_, a.index_, what.c_str());
  if (k->inputs == 2) {
    if (!b.valid()) invalid(what + " takes two inputs");
    n.in[1] = g.input_ref(b.batch_, b.generation_, b.index_, what.c_str());
    const auto la = g.floats_of(n.in[0]), lb = g.floats_of(n.in[1]);
    if (la != lb) invalid(what + ": size mismatch: a has " + std::to_string(la) + " floats, b has " + std::to_string(lb));
  } else if (b.valid()) {
    invalid(what + " takes one input");
  }
  const std::uint32_t out = g.checked_floats(k->output_floats(g.floats_of(n.in[0])), what.c_str());
  return g.push(std::move(n), out);
}

void GpuCommandBatch::keep(BufferId id) {
  Impl& g = checked(impl_);
  const std::uint32_t ref = g.input_ref(id.batch_, id.generation_, id.index_, "keep");
  if (ref & kImport) invalid("keep: an imported buffer is an input, not a result");
  if (g.pending[ref].source != Source::op) invalid("keep: buffer #" + std::to_string(ref) + " is an upload, not a result");
  g.pending[ref].keep = true;
}

void GpuCommandBatch::execute() { checked(impl_).execute(); }

namespace {
const Value& result_of(const GpuCommandBatch::Impl& g, std::uint64_t batch, std::uint64_t gen, std::uint32_t index,
                       const char* what) {
  g.check_batch(batch, what);
  const std::string name = "buffer #" + std::to_string(index);
  if (gen == 0) invalid(std::string(what) + ": imported buffer #" + std::to_string(index) + " is an input, not a result");
  if (gen == g.generation) {
    if (index >= g.pending.size()) invalid(std::string(what) + ": no " + name);
    invalid(std::string(what) + ": " + name + " has not been computed yet: call execute() first");
  }
  if (gen + 1 != g.generation)
    invalid(std::string(what) + ": " + name + " belongs to execute " + std::to_string(gen) +
            "; only the last execute's results can be read");
  if (g.last_failed) invalid(std::string(what) + ": " + name + " belongs to an execute that failed");
  if (index >= g.done.size()) invalid(std::string(what) + ": no " + name);
  const Value& v = g.done[index];
  if (v.source == Source::upload) invalid(std::string(what) + ": " + name + " is an upload, not a result");
  if (!v.downloaded)
    invalid(std::string(what) + ": " + name + " is an intermediate that later operations consumed; keep() it before execute() to read it");
  return v;
}
}  // namespace

std::size_t GpuCommandBatch::size(BufferId id) const {
  const Impl& g = checked(impl_);
  g.check_batch(id.batch_, "size");
  if (id.generation_ == 0) {
    if (id.index_ >= g.imports.size()) invalid("size: no imported buffer #" + std::to_string(id.index_));
    return g.imports[id.index_].floats;
  }
  if (id.generation_ == g.generation && id.index_ < g.pending.size()) return g.pending[id.index_].floats;
  if (id.generation_ + 1 == g.generation && id.index_ < g.done.size()) return g.done[id.index_].floats;
  invalid("size: buffer #" + std::to_string(id.index_) + " of execute " + std::to_string(id.generation_) + " is gone");
}

void GpuCommandBatch::read_into(BufferId id, std::span<float> out) const {
  const Impl& g = checked(impl_);
  const Value& v = result_of(g, id.batch_, id.generation_, id.index_, "read");
  if (out.size() != v.floats)
    invalid("read: size mismatch: buffer #" + std::to_string(id.index_) + " has " + std::to_string(v.floats) +
            " floats, the destination " + std::to_string(out.size()));
  std::memcpy(out.data(), g.readback.mapped() + v.readback_offset, v.floats * sizeof(float));
}

std::vector<float> GpuCommandBatch::read(BufferId id) const {
  const Impl& g = checked(impl_);
  const Value& v = result_of(g, id.batch_, id.generation_, id.index_, "read");
  std::vector<float> out(v.floats);
  std::memcpy(out.data(), g.readback.mapped() + v.readback_offset, v.floats * sizeof(float));
  return out;
}

const ExecuteStats& GpuCommandBatch::last_execute() const { return checked(impl_).stats; }
const GraphOptions& GpuCommandBatch::options() const { return checked(impl_).options; }
Device& GpuCommandBatch::device() const { return checked(impl_).device; }

}  // namespace gpubatch
