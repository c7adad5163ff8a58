// GpuCommandBatch: records a queued graph of operations into one command buffer and submits it
// once on the context's timeline. This file queues the operations (the public API, ids, staging
// of upload() data) and follows the device; execute() turns the queue into a plan
// (graph_plan.hpp: steps, fused groups, buffers, staging and readback layout; no Vulkan) and
// graph_record.cpp records and submits it:
//   upload pass    upload() data is in staging already; copied into device-local buffers
//                  (Transfers::copy) or read where it is (direct). Imports are copied once.
//   dispatches     in queue order; runs of element-wise operations of one length fused into one
//                  generated kernel; barriers only between dependent dispatches.
//   download pass  results copied into readback memory (copy), or written there by their kernels
//                  (direct).
// Intermediates live in device-local buffers handed out in step order and taken back after their
// last reader, so a chain ping-pongs between a few buffers; those buffers are kept for the next
// execute and the ones it does not need are freed.
#include "gpubatch/graph.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "gpu/context.hpp"
#include "gpu/custom_kernels.hpp"
#include "gpu/device_identity.hpp"
#include "plan/encoding.hpp"
#include "plan/fusion.hpp"
#include "gpu/graph_impl.hpp"
#include "plan/graph_plan.hpp"
#include "gpu/memory.hpp"
#include "gpu/vk_check.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch {
namespace {

using plan::align_up;
using plan::kDataAlignment;
using gpu::graph::kImport;
using gpu::graph::Source;
using Value = gpu::graph::Value;
using Node = gpu::graph::Node;
using Imported = graph_detail::Imported;

std::atomic<std::uint64_t> g_next_batch{1};

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

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

}  // namespace

GpuCommandBatch::Impl::Impl(Device& d, const GraphOptions& o)
    : device(d), identity(d.identity()), ctx(identity->context()), options(o), serial(g_next_batch.fetch_add(1)) {
  if (options.max_fused_ops < 2) options.max_fused_ops = 2;
  open_commands();
}

GpuCommandBatch::Impl::~Impl() {
  // Never free memory the GPU may still use: the last submission completes first (or the
  // device is lost, and nothing runs any more).
  try {
    settle(std::chrono::nanoseconds::max());
  } catch (const Error&) {
  }
  vkDestroyCommandPool(ctx->device(), pool, nullptr);
}

std::chrono::milliseconds GpuCommandBatch::Impl::watchdog() const { return identity->options().batch_timeout; }

// The command pool and buffer, and the transfer mode, on `ctx`.
void GpuCommandBatch::Impl::open_commands() {
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
void GpuCommandBatch::Impl::settle(std::chrono::nanoseconds timeout) {
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
void GpuCommandBatch::Impl::follow_device(std::size_t staged_bytes) {
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

// ---- ids --------------------------------------------------------------------------------------
void GpuCommandBatch::Impl::check_batch(std::uint64_t batch, const char* what) const {
  if (batch == 0) invalid(std::string(what) + ": invalid (default-constructed) BufferId");
  if (batch != serial)
    invalid(std::string(what) + ": BufferId belongs to another GpuCommandBatch");
}

// An id usable as an operation's input: a pending value or an import.
std::uint32_t GpuCommandBatch::Impl::input_ref(std::uint64_t batch, std::uint64_t gen, std::uint32_t index,
                                               const char* what) const {
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

BufferId GpuCommandBatch::Impl::push(Node node, std::uint32_t out_floats) {
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

std::uint32_t GpuCommandBatch::Impl::checked_floats(std::size_t n, const char* what) const {
  if (n == 0) invalid(std::string(what) + ": empty data");
  if (n > UINT32_MAX || n * sizeof(float) > ctx->max_allocation_bytes())
    throw Error(ErrorCode::request_too_large, std::string(what) + ": " + std::to_string(n) +
                                                  " floats exceed the device's largest buffer");
  return static_cast<std::uint32_t>(n);
}

// Makes `staging` hold at least `bytes`, keeping its first `keep` bytes.
void GpuCommandBatch::Impl::grow_staging(std::size_t bytes, std::size_t keep) {
  if (staging && staging.size() >= bytes) return;
  if (bytes > ctx->max_allocation_bytes())
    throw Error(ErrorCode::out_of_memory, std::to_string(bytes) + " bytes of staging exceed the device's largest allocation");
  gpu::Allocation bigger = ctx->memory().allocate(
      gpu::MemoryKind::upload, std::max<std::size_t>(align_up(bytes + bytes / 2, 4096), 64 * 1024));
  if (keep > 0) std::memcpy(bigger.mapped(), staging.mapped(), keep);
  staging = std::move(bigger);
}

// upload(): the data goes straight into staging memory (its only copy on the host side).
std::size_t GpuCommandBatch::Impl::stage(std::span<const float> data) {
  const std::size_t at = staged, bytes = data.size_bytes();
  grow_staging(at + bytes, staged);
  copier.copy(staging.mapped() + at, data.data(), bytes);  // several threads when large
  staged = align_up(at + bytes, kDataAlignment);
  return at;
}

// ---- execute ------------------------------------------------------------------------------------

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
  hold_host_buffers(values);  // the last execute's are free now
  for (const Node& n : ops)
    for (std::uint32_t i = 0; i < n.arity; ++i)
      if ((n.in[i] & kImport) && imports[n.in[i] & ~kImport].lost)
        throw Error(ErrorCode::device_lost, n.name() + ": imported buffer #" + std::to_string(n.in[i] & ~kImport) +
                                                " was on a device that was lost; import_buffer() it again");

  std::vector<gpu::graph::ImportInfo> import_info;
  import_info.reserve(imports.size());
  for (const Imported& im : imports) import_info.push_back({im.floats, im.uploaded, im.host_memory != nullptr});
  gpu::graph::Input in{ops, values, import_info, options.fuse, options.max_fused_ops, direct, staged_data, {}};
  for (const auto& [bytes, allocation] : recycled) in.recycled.push_back(bytes);
  const gpu::graph::Plan plan = gpu::graph::make_plan(in);
  for (std::size_t v = 0; v < values.size(); ++v) {  // what read() will find
    values[v].downloaded = plan.values[v].downloaded;
    values[v].readback_offset = plan.values[v].readback_offset;
  }
  run(plan, ops, values);
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
    gpu::graph::check_same_length(what, g.floats_of(n.in[0]), g.floats_of(n.in[1]));
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
  gpu::graph::check_same_length("dot", g.floats_of(n.in[0]), g.floats_of(n.in[1]));
  return g.push(std::move(n), 1);
}

BufferId GpuCommandBatch::matmul(BufferId a, BufferId b, std::uint32_t m, std::uint32_t k, std::uint32_t n) {
  Impl& g = checked(impl_);
  Node node;
  node.op = Op::matmul;
  node.arity = 2;
  node.in[0] = g.input_ref(a.batch_, a.generation_, a.index_, "matmul");
  node.in[1] = g.input_ref(b.batch_, b.generation_, b.index_, "matmul");
  gpu::graph::check_matmul_shape(g.floats_of(node.in[0]), g.floats_of(node.in[1]), m, k, n);
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
    gpu::graph::check_same_length(what, g.floats_of(n.in[0]), g.floats_of(n.in[1]));
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

namespace {
// Where a downloaded result is: readback memory, or the HostBuffer it was delivered into.
const float* result_data(const GpuCommandBatch::Impl& g, const Value& v) {
  if (v.host) return v.host->data;
  return reinterpret_cast<const float*>(g.readback.mapped() + v.readback_offset);
}
}  // namespace

void GpuCommandBatch::read_into(BufferId id, std::span<float> out) const {
  const Impl& g = checked(impl_);
  const Value& v = result_of(g, id.batch_, id.generation_, id.index_, "read");
  if (out.size() != v.floats)
    invalid("read: size mismatch: buffer #" + std::to_string(id.index_) + " has " + std::to_string(v.floats) +
            " floats, the destination " + std::to_string(out.size()));
  const float* from = result_data(g, v);
  if (from != out.data()) g.copier.copy(out.data(), from, v.floats * sizeof(float));
}

std::vector<float> GpuCommandBatch::read(BufferId id) const {
  const Impl& g = checked(impl_);
  const Value& v = result_of(g, id.batch_, id.generation_, id.index_, "read");
  std::vector<float> out(v.floats);
  g.copier.copy(out.data(), result_data(g, v), v.floats * sizeof(float));
  return out;
}

const ExecuteStats& GpuCommandBatch::last_execute() const { return checked(impl_).stats; }
const GraphOptions& GpuCommandBatch::options() const { return checked(impl_).options; }
Device& GpuCommandBatch::device() const { return checked(impl_).device; }

}  // namespace gpubatch
