#include "gpu/vulkan_batch_device.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gpu/batch_layout.hpp"
#include "gpu/custom_kernels.hpp"
#include "gpu/encoding.hpp"
#include "gpu/fault_injection.hpp"
#include "gpu/fusion.hpp"
#include "gpu/glsl_compiler.hpp"
#include "gpu/host_memory.hpp"
#include "gpu/kernels.hpp"
#include "gpu/memory.hpp"
#include "gpu/transfer_path.hpp"
#include "gpu/vk_check.hpp"
#include "state_math.hpp"

namespace gpubatch::gpu {

namespace {

// Items the kernel walks for one request: elements, layers, or words of 4 layers.
std::uint32_t work_items(const Request& r) {
  switch (r.op) {
    case Op::gradients: return static_cast<std::uint32_t>(r.states_a.size());
    case Op::interpolate: return static_cast<std::uint32_t>(r.states_a.size() / 4);
    default: return static_cast<std::uint32_t>(input_a(r).size());
  }
}

std::uint32_t blocks_of(const Request& r) {
  switch (r.op) {
    case Op::dot: return dot_blocks(input_a(r).size());
    case Op::matmul: return matmul_blocks(r.m, r.n);
    default: return 0;  // element-wise: blocks cover the group's concatenated items
  }
}

struct OutputSlot {
  std::size_t offset = 0;
  std::size_t bytes = 0;
  bool states = false;
  std::exception_ptr error;  // its group's kernel could not be built: take_result throws this
  bool host = false;         // written into the request's host_result: nothing to take
};


// The requests of one kernel: a built-in op, one chain shape (its fused kernel), or one custom
// kernel. One dispatch each (dot: two).
struct Group {
  Op op = Op::relu;
  std::uint32_t first_request = 0;  // into Frame::order
  std::uint32_t request_count = 0;
  std::uint32_t block_count = 0;
  std::uint32_t first_block = 0;    // into the block table
  std::uint32_t first_segment = 0;  // into the segment table
  bool needs_dot_final = false;
  bool per_segment = false;         // a per_segment custom kernel: one invocation per request
  std::uint32_t representative = 0;  // a request of the group (index into the batch)
  std::uint32_t chain_inputs = 0;    // chain: external inputs (x and the extra inputs)
  std::uint32_t chain_scalars = 0;   // chain: entries of each request's scalar table
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipeline dot_final = VK_NULL_HANDLE;
  std::exception_ptr error;          // set: no dispatch; every request of the group fails
};

// The fused kernel's shape for a chain: step i reads step i-1 (the first reads x, external input
// 0); a binary step's second operand is extra input j = external input j + 1; each step's scalars
// (the op's count in the table, one for a custom step) in step order; only the last step is stored.
FusedShape fused_shape_of(const ChainShape& chain) {
  FusedShape f;
  f.inputs = 1 + chain.inputs();
  const auto& steps = chain.steps();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const ChainStep& step = steps[i];
    FusedStep fs;
    if (step.op == Op::custom) {
      fs.kernel = as_custom_kernel(step.kernel);
      if (!fs.kernel)
        throw Error(ErrorCode::invalid_argument,
                    "kernel '" + (step.kernel ? step.kernel->name : std::string("?")) +
                        "' was not made by register_kernel() (a hand-built CustomKernelInfo carries no code)");
      fs.arity = fs.kernel->inputs;
    } else {
      fs.op = step.op;
      fs.arity = arity(step.op);
    }
    fs.operand[0] = i == 0 ? -1 : static_cast<std::int32_t>(i - 1);
    if (fs.arity == 2) fs.operand[1] = -(step.input + 2);
    const std::uint32_t n_scalars = step.op == Op::custom ? 1 : scalars(step.op);
    if (n_scalars > 0) fs.scalar = static_cast<std::int32_t>(f.scalars);
    f.scalars += n_scalars;
    f.steps.push_back(std::move(fs));
  }
  f.outputs = {static_cast<std::uint32_t>(steps.size() - 1)};
  return f;
}

// "compile_failed: kernel ..." -> "kernel ...": Error::what() starts with its code.
std::string message_of(const Error& e) { return std::string(e.message()); }

}  // namespace

// One input's copy into staging; `start` is where it begins in the batch's input bytes.
struct CopyOp {
  std::byte* dst = nullptr;
  const std::byte* src = nullptr;
  std::size_t bytes = 0;
  std::size_t start = 0;
};

// Everything one in-flight batch owns; reused batch after batch.
struct Frame {
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  VkQueryPool timestamps = VK_NULL_HANDLE;
  Allocation upload, readback, scratch;
  TransferFrame transfer;             // the copy-engine path's staging, device memory, commands
  std::vector<std::uint32_t> order;   // request indices grouped by kernel
  std::vector<std::uint32_t> group_of;  // by request index
  std::vector<std::uint32_t> cursor;    // by group, while sorting
  std::vector<Group> groups;
  std::unordered_map<std::string_view, std::uint32_t> keyed;  // chain / custom key -> group
  std::vector<OutputSlot> outputs;    // by request index
  std::vector<CopyOp> copies;         // the inputs, in staging order
  // Caller host buffers this batch reads or writes: kept alive until the frame is reused (an
  // abandoned batch's never are: the GPU may still use them), and their GPU copies.
  std::vector<std::shared_ptr<detail::HostMemory>> host_refs;
  std::vector<const VulkanHostMemory*> host_results;
  std::vector<BufferCopy> host_in, host_out;
  std::uint64_t timeline_value = 0;
};

namespace {

class VulkanInFlight final : public detail::InFlightBatch {
 public:
  VulkanInFlight(std::shared_ptr<FrameSet> set, Frame* frame) : set_(std::move(set)), frame_(frame) {}

  ~VulkanInFlight() override {
    // Only a finished batch gives its frame back: the GPU may still be using the memory. One that
    // has not finished (abandoned by a watchdog, or its device lost) keeps its frame out of
    // circulation; the frame is destroyed with the device, after vkDeviceWaitIdle.
    try {
      if (done_ || set_->context->wait(frame_->timeline_value, std::chrono::nanoseconds(0)))
        set_->release(frame_);
    } catch (const Error&) {
    }
  }

  bool wait_for(std::chrono::nanoseconds timeout) override {
    if (done_) return true;
    if (!set_->context->wait(frame_->timeline_value, timeout)) return false;
    done_ = true;
    frame_->readback.invalidate();
    for (const VulkanHostMemory* m : frame_->host_results) m->allocation.invalidate();
    return true;
  }

  // One vkGetSemaphoreCounterValue while the batch runs; once the counter has passed it, the
  // zero-timeout wait_for (which returns at once: the context has noted the value) finishes the
  // batch as a blocking wait would, injected faults and hidden completions included.
  bool poll() override {
    if (done_) return true;
    if (set_->context->completed_value() < frame_->timeline_value) return false;
    return wait_for(std::chrono::nanoseconds(0));
  }

  void take_result(std::size_t index, Result& out) override {
    const OutputSlot& slot = frame_->outputs.at(index);
    if (slot.error) std::rethrow_exception(slot.error);
    if (slot.host) {  // the values are in the request's host_result already
      out.values.clear();
      return;
    }
    const std::byte* src = frame_->readback.mapped() + slot.offset;
    if (slot.states) {
      out.states.resize(slot.bytes);
      std::memcpy(out.states.data(), src, slot.bytes);
    } else {
      out.values.resize(slot.bytes / sizeof(float));
      std::memcpy(out.values.data(), src, slot.bytes);
    }
  }

  std::chrono::nanoseconds device_time() const override {
    auto& ctx = *set_->context;
    if (!done_ || !frame_->timestamps) return std::chrono::nanoseconds(-1);
    std::array<std::uint64_t, 2> ticks{};
    if (vkGetQueryPoolResults(ctx.device(), frame_->timestamps, 0, 2, sizeof(ticks), ticks.data(),
                              sizeof(std::uint64_t), VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
      return std::chrono::nanoseconds(-1);
    return std::chrono::nanoseconds(
        static_cast<std::int64_t>(double(ticks[1] - ticks[0]) * ctx.timestamp_period_ns()));
  }

 private:
  std::shared_ptr<FrameSet> set_;
  Frame* frame_;
  bool done_ = false;
};

// Copies a batch's inputs into staging. One thread writing write-combined memory stays far below
// what the memory takes, so a batch with enough input bytes is cut into equal byte ranges (a large
// input split across ranges) that `parallel`'s threads copy at once.
void copy_inputs(const std::vector<CopyOp>& copies, std::size_t total, detail::ParallelRunner& parallel) {
  constexpr std::size_t kBytesPerPart = 256 * 1024;  // below this a helper costs more than it saves
  const std::size_t parts = std::min(parallel.width(), total / kBytesPerPart);
  if (parts <= 1) {
    for (const CopyOp& c : copies) std::memcpy(c.dst, c.src, c.bytes);
    return;
  }
  parallel.run(parts, [&](std::size_t part) {
    const std::size_t begin = total * part / parts, end = total * (part + 1) / parts;
    // The copy holding byte `begin`: the last whose start is <= begin.
    auto it = std::upper_bound(copies.begin(), copies.end(), begin,
                               [](std::size_t at, const CopyOp& c) { return at < c.start; });
    for (--it; it != copies.end() && it->start < end; ++it) {
      const std::size_t from = std::max(begin, it->start), to = std::min(end, it->start + it->bytes);
      if (from < to) std::memcpy(it->dst + (from - it->start), it->src + (from - it->start), to - from);
    }
  });
}

}  // namespace

FrameSet::FrameSet(std::shared_ptr<detail::GpuContext> ctx) : context(std::move(ctx)) {}

FrameSet::~FrameSet() {
  VkDevice device = context->device();
  // A frame abandoned by a watchdog (never given back) may still be pending: let it end (a lost
  // device answers at once) before its command pool goes.
  if (free.size() != frames.size()) vkDeviceWaitIdle(device);
  for (auto& f : frames) {
    if (f->timestamps) vkDestroyQueryPool(device, f->timestamps, nullptr);
    vkDestroyCommandPool(device, f->pool, nullptr);
    f->transfer.destroy(device);
  }
}

Frame* FrameSet::acquire() {
  std::lock_guard lock(mutex);
  if (!free.empty()) {
    Frame* f = free.back();
    free.pop_back();
    return f;
  }
  auto frame = std::make_unique<Frame>();
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = context->queue_family();
  check_vk(vkCreateCommandPool(context->device(), &pool_info, nullptr, &frame->pool), "vkCreateCommandPool");
  // Owned by `frames` from here, so that a failure below leaks nothing.
  frames.push_back(std::move(frame));
  Frame* f = frames.back().get();
  try {
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = f->pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    check_vk(vkAllocateCommandBuffers(context->device(), &alloc, &f->commands), "vkAllocateCommandBuffers");
    if (context->timestamps_supported()) {
      VkQueryPoolCreateInfo q{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      q.queryType = VK_QUERY_TYPE_TIMESTAMP;
      q.queryCount = 2;
      check_vk(vkCreateQueryPool(context->device(), &q, nullptr, &f->timestamps), "vkCreateQueryPool");
    }
  } catch (...) {
    if (f->timestamps) vkDestroyQueryPool(context->device(), f->timestamps, nullptr);
    vkDestroyCommandPool(context->device(), f->pool, nullptr);
    frames.pop_back();
    throw;
  }
  return f;
}

void FrameSet::release(Frame* frame) {
  std::lock_guard lock(mutex);
  free.push_back(frame);
}

VulkanBatchDevice::VulkanBatchDevice(std::shared_ptr<detail::DeviceIdentity> identity,
                                     std::uint64_t max_request_bytes)
    : identity_(std::move(identity)) {
  auto context = identity_->context();
  copy_engine_bytes_ = copy_engine_threshold(*context, identity_->options());
  // Inputs go into one staging allocation and outputs into one readback allocation; leave room
  // for the tables beside them.
  const std::uint64_t device_limit = context->max_allocation_bytes() - (1u << 20);
  max_request_bytes_ = max_request_bytes == 0 ? device_limit : std::min(max_request_bytes, device_limit);
  frames_generation_ = identity_->generation();
  frames_ = std::make_shared<FrameSet>(std::move(context));
}

VulkanBatchDevice::~VulkanBatchDevice() = default;

std::shared_ptr<FrameSet> VulkanBatchDevice::current() const {
  const std::uint64_t generation = identity_->generation();
  std::lock_guard lock(mutex_);
  if (generation != frames_generation_) {  // re-created (by us, a graph or a Device): follow it
    auto context = identity_->context();
    if (context != frames_->context) frames_ = std::make_shared<FrameSet>(std::move(context));
    frames_generation_ = generation;
  }
  return frames_;
}

std::shared_ptr<detail::GpuContext> VulkanBatchDevice::current_context() const { return current()->context; }

std::string VulkanBatchDevice::name() const { return identity_->info().name; }

std::size_t VulkanBatchDevice::max_request_bytes() const { return max_request_bytes_; }

detail::TransferTotals VulkanBatchDevice::transfers() const {
  auto& c = identity_->counters();
  return {c.uploads.load(), c.downloads.load(), c.bytes_up.load(), c.bytes_down.load(),
          c.dispatches.load(), c.submissions.load()};
}

std::size_t VulkanBatchDevice::frames_made() const {
  const auto set = current();
  std::lock_guard lock(set->mutex);
  return set->frames.size();
}

// lavapipe (VK_PHYSICAL_DEVICE_TYPE_CPU): on the 2-core CI machine, completion threads that
// polled it for 200 us took the cores its own threads needed (2 threads x 64 outstanding:
// 204 k requests/s polling, 233 k blocking at once).
bool VulkanBatchDevice::runs_on_host_cpu() const { return identity_->context()->info().type == "cpu"; }

bool VulkanBatchDevice::can_run(const Request& request) const {
  if (!request.host_a && !request.host_result) return true;
  const auto context = identity_->context();
  return !foreign_host_buffer(request, context.get());
}

void VulkanBatchDevice::recover() { identity_->recover(current()->context); }

std::unique_ptr<detail::InFlightBatch> VulkanBatchDevice::submit(std::span<const Request* const> requests) {
  return submit(requests, detail::inline_runner());
}

std::unique_ptr<detail::InFlightBatch> VulkanBatchDevice::submit(std::span<const Request* const> requests,
                                                                 detail::ParallelRunner& parallel) {
  if (requests.empty()) throw Error(ErrorCode::invalid_argument, "a batch needs at least one request");
  // One context for the whole batch, even if recover() replaces it meanwhile.
  const std::shared_ptr<FrameSet> set = current();
  detail::GpuContext* const ctx = set->context.get();
  Frame* frame = set->acquire();
  // From here the frame must go back to the pool on every path.
  auto in_flight = std::make_unique<VulkanInFlight>(set, frame);
  auto& pool = ctx->memory();
  auto& kernels = ctx->kernels();
  auto& counters = ctx->counters();

  // 1. Group requests by kernel: built-ins by op, chains by shape key, custom requests by
  //    kernel key (groups in order of first appearance; a stable counting sort keeps each group
  //    in arrival order).
  const auto n = static_cast<std::uint32_t>(requests.size());
  frame->groups.clear();
  frame->keyed.clear();
  frame->group_of.resize(n);
  std::array<std::uint32_t, kOpCount> builtin_group;
  builtin_group.fill(UINT32_MAX);
  for (std::uint32_t i = 0; i < n; ++i) {
    const Request& r = *requests[i];
    std::uint32_t* slot;
    std::uint32_t foreign = UINT32_MAX;  // a group of its own, failed
    const std::exception_ptr misuse = r.host_a || r.host_result ? foreign_host_buffer(r, ctx) : nullptr;
    if (misuse) {
      slot = &foreign;
    } else if (r.op == Op::chain || r.op == Op::custom) {
      const std::string_view key = r.op == Op::chain ? std::string_view(r.chain->key()) : std::string_view(r.kernel->key);
      slot = &frame->keyed.try_emplace(key, UINT32_MAX).first->second;
    } else {
      slot = &builtin_group[static_cast<std::size_t>(r.op)];
    }
    if (*slot == UINT32_MAX) {
      *slot = static_cast<std::uint32_t>(frame->groups.size());
      Group g;
      g.op = r.op;
      g.representative = i;
      g.error = misuse;
      frame->groups.push_back(g);
    }
    frame->group_of[i] = *slot;
    ++frame->groups[*slot].request_count;
  }
  {
    std::uint32_t first = 0;
    for (Group& g : frame->groups) {
      g.first_request = g.first_segment = first;
      first += g.request_count;
    }
    frame->order.resize(n);
    auto& cursor = frame->cursor;  // each group's next place in `order`
    cursor.resize(frame->groups.size());
    for (std::size_t gi = 0; gi < frame->groups.size(); ++gi) cursor[gi] = frame->groups[gi].first_request;
    for (std::uint32_t i = 0; i < n; ++i) frame->order[cursor[frame->group_of[i]]++] = i;
  }

  // Each group's kernel. One that cannot be built (a chain whose generated kernel does not
  // compile, a pipeline the driver refuses) fails its own requests only: take_result throws.
  for (Group& g : frame->groups) {
    if (g.error) continue;
    const Request& rep = *requests[g.representative];
    try {
      switch (g.op) {
        case Op::chain: {
          const FusedShape shape = fused_shape_of(*rep.chain);
          g.chain_inputs = shape.inputs;
          g.chain_scalars = shape.scalars;
          const std::string key = fused_key(shape);
          if (kernels.has(key)) {
            g.pipeline = kernels.get_or_build(key, {});
          } else {
            spdlog::debug("gpubatch: compiling fused kernel {} for {}", key, describe_op(rep));
            g.pipeline = kernels.get_or_build(key, compile_compute_glsl(fused_source(shape), "fused-kernel"));
          }
          break;
        }
        case Op::custom: {
          auto kernel = as_custom_kernel(rep.kernel);
          if (!kernel)
            throw Error(ErrorCode::invalid_argument,
                        "kernel '" + rep.kernel->name +
                            "' was not made by register_kernel() (a hand-built CustomKernelInfo carries no code)");
          g.per_segment = kernel->kind == KernelKind::per_segment;
          g.pipeline = kernels.get_or_build(kernel->key, kernel->spirv);
          break;
        }
        default:
          g.pipeline = kernels.get(kernel_name(g.op));
          if (g.op == Op::dot) g.dot_final = kernels.get("dot_final");
      }
    } catch (const Error& e) {
      g.error = std::make_exception_ptr(Error(e.code(), describe_op(rep) + ": " + message_of(e)));
    }
  }

  // 2. Sizes: tables first in the upload area, then inputs; outputs in the readback area.
  std::size_t block_entries = 0, scratch_floats = 0, input_bytes_total = 0, output_bytes_total = 0;
  for (Group& g : frame->groups) {
    if (g.error) continue;
    g.first_block = static_cast<std::uint32_t>(block_entries);
    std::uint64_t blocks = 0, items = 0;
    for (std::uint32_t j = 0; j < g.request_count; ++j) {
      const Request& r = *requests[frame->order[g.first_request + j]];
      blocks += blocks_of(r);
      items += work_items(r);
      input_bytes_total += align_up(input_a(r).size() * 4, kDataAlignment) + align_up(r.b.size() * 4, kDataAlignment) +
                           align_up(r.states_a.size(), kDataAlignment) + align_up(r.states_b.size(), kDataAlignment);
      if (g.op == Op::chain) {
        for (const auto& in : r.inputs) input_bytes_total += align_up(in.size() * 4, kDataAlignment);
        input_bytes_total += align_up((g.chain_inputs + 1) * sizeof(std::uint64_t), kDataAlignment) +
                             align_up(std::max<std::size_t>(g.chain_scalars, 1) * sizeof(float), kDataAlignment);
      }
      output_bytes_total += align_up(output_bytes(r), kDataAlignment);
      if (g.op == Op::dot && blocks_of(r) > 1) g.needs_dot_final = true;
    }
    if (g.per_segment) blocks = ceil_div(g.request_count, kWorkgroupSize);
    else if (g.op != Op::dot && g.op != Op::matmul) blocks = ceil_div(items, kWorkgroupSize);
    if (items >= (std::uint64_t{1} << 32) || blocks >= (std::uint64_t{1} << 31))
      throw Error(ErrorCode::request_too_large, "a batch's " + describe_op(*requests[g.representative]) +
                                                    " group exceeds 2^32 elements");
    g.block_count = static_cast<std::uint32_t>(blocks);
    if (g.op == Op::dot) scratch_floats += blocks;
    if (!g.per_segment) block_entries += blocks;  // one-invocation-per-request kernels use none
  }
  const std::size_t segments_bytes = align_up(requests.size() * sizeof(SegmentRecord), kDataAlignment);
  const std::size_t blocks_bytes = align_up(block_entries * 4, kDataAlignment);
  const std::size_t upload_bytes = segments_bytes + blocks_bytes + input_bytes_total;
  if (upload_bytes > ctx->max_allocation_bytes() || output_bytes_total > ctx->max_allocation_bytes())
    throw Error(ErrorCode::out_of_memory, "a batch of " + std::to_string(upload_bytes) +
                                              " bytes exceeds the device's largest allocation");
  if (FaultInjector::fire(Fault::host_out_of_memory))
    throw Error(ErrorCode::out_of_memory, "staging memory for a batch of " + std::to_string(upload_bytes) +
                                              " bytes (injected host out of memory)");
  // Large batches through the copy engine: the CPU packs host-cached staging, the GPU copies it to
  // device memory, kernels work there (the tables' addresses are device addresses) and the
  // results are copied back into readback. Small ones: kernels read staging directly.
  const bool copy_engine = upload_bytes >= copy_engine_bytes_;
  ensure(frame->readback, pool, MemoryKind::readback, output_bytes_total);
  if (copy_engine) frame->transfer.prepare(*ctx, upload_bytes, output_bytes_total);
  else ensure(frame->upload, pool, MemoryKind::upload, upload_bytes);
  if (scratch_floats > 0) ensure(frame->scratch, pool, MemoryKind::device_local, scratch_floats * 4);

  // 3. Pack: inputs copied once, straight into staging; segment and block tables beside them.
  std::byte* up = copy_engine ? frame->transfer.host() : frame->upload.mapped();
  const std::uint64_t up_addr = copy_engine ? frame->transfer.input_address() : frame->upload.address();
  const std::uint64_t down_addr = copy_engine ? frame->transfer.output_address() : frame->readback.address();
  auto* segments = reinterpret_cast<SegmentRecord*>(up);
  auto* block_table = reinterpret_cast<std::uint32_t*>(up + segments_bytes);
  std::size_t in_off = segments_bytes + blocks_bytes, out_off = 0;
  frame->outputs.assign(requests.size(), OutputSlot{});
  frame->copies.clear();
  frame->host_refs.clear();
  frame->host_results.clear();
  frame->host_in.clear();
  frame->host_out.clear();
  std::size_t copy_bytes = 0;
  auto put = [&](const void* data, std::size_t bytes) -> std::uint64_t {
    if (bytes == 0) return 0;
    frame->copies.push_back({up + in_off, static_cast<const std::byte*>(data), bytes, copy_bytes});
    copy_bytes += bytes;
    const std::uint64_t addr = up_addr + in_off;
    in_off += align_up(bytes, kDataAlignment);
    return addr;
  };
  // Input a from a host buffer: read in place by the kernel, or copied by the copy engine.
  auto put_a = [&](const Request& r) -> std::uint64_t {
    if (!r.host_a) return put(r.a.data(), r.a.size() * 4);
    const auto& m = static_cast<const VulkanHostMemory&>(*r.host_a);  // on ctx: checked when grouped
    frame->host_refs.push_back(r.host_a);
    if (!copy_engine) return m.allocation.address();
    const std::size_t bytes = m.floats * sizeof(float);
    frame->host_in.push_back({m.allocation.buffer(), m.allocation.offset(), in_off, bytes});
    const std::uint64_t addr = up_addr + in_off;
    in_off += align_up(bytes, kDataAlignment);
    return addr;
  };
  for (Group& g : frame->groups) {
    if (g.error) {
      for (std::uint32_t j = 0; j < g.request_count; ++j) frame->outputs[frame->order[g.first_request + j]].error = g.error;
      continue;
    }
    std::uint32_t item = 0, block = 0;
    std::uint32_t* blocks = block_table + g.first_block;
    for (std::uint32_t j = 0; j < g.request_count; ++j) {
      const std::uint32_t seg_index = g.first_segment + j;
      const std::uint32_t req_index = frame->order[g.first_request + j];
      const Request& r = *requests[req_index];
      SegmentRecord s;
      const std::size_t out_bytes = output_bytes(r);
      std::uint64_t dst = down_addr + out_off;
      if (r.host_result) {  // straight into the caller's buffer, or copied there from device memory
        const auto& m = static_cast<const VulkanHostMemory&>(*r.host_result);
        frame->host_refs.push_back(r.host_result);
        frame->host_results.push_back(&m);
        if (copy_engine) frame->host_out.push_back({m.allocation.buffer(), m.allocation.offset(), out_off, out_bytes});
        else dst = m.allocation.address();
      }
      frame->outputs[req_index] = {out_off, out_bytes, r.op == Op::interpolate, nullptr, r.host_result != nullptr};
      out_off += align_up(out_bytes, kDataAlignment);
      if (r.op == Op::chain) {
        // a: the address table (x, the extra inputs, the result); b: the scalar table.
        const std::size_t io_bytes = (g.chain_inputs + 1) * sizeof(std::uint64_t);
        const std::size_t scalar_bytes = std::max<std::size_t>(g.chain_scalars, 1) * sizeof(float);
        const std::size_t io_off = in_off, scalar_off = io_off + align_up(io_bytes, kDataAlignment);
        in_off = scalar_off + align_up(scalar_bytes, kDataAlignment);
        auto* io = reinterpret_cast<std::uint64_t*>(up + io_off);
        std::size_t k = 0;
        io[k++] = put_a(r);
        for (const auto& in : r.inputs) io[k++] = put(in.data(), in.size() * 4);
        io[k] = dst;
        auto* scalars = reinterpret_cast<float*>(up + scalar_off);
        scalars[0] = 0.0f;
        std::size_t m = 0;
        for (const ChainStep& step : r.chain->steps()) {
          const std::uint32_t n_scalars = step.op == Op::custom ? 1 : gpu::scalars(step.op);
          if (n_scalars > 0) scalars[m++] = step.scalar;
          if (n_scalars > 1) scalars[m++] = step.scalar2;
        }
        s.a = up_addr + io_off;
        s.b = up_addr + scalar_off;
      } else {
        s.a = r.op == Op::gradients || r.op == Op::interpolate ? put(r.states_a.data(), r.states_a.size())
                                                               : put_a(r);
        s.b = r.op == Op::interpolate ? put(r.states_b.data(), r.states_b.size()) : put(r.b.data(), r.b.size() * 4);
      }
      s.dst = dst;
      s.len = work_items(r);
      s.p0 = r.scalar;
      if (g.per_segment) {
        s.start = j;  // one invocation per request; no block table
        segments[seg_index] = s;
        continue;
      }
      switch (r.op) {
        case Op::dot:
        case Op::matmul: {
          const std::uint32_t nb = blocks_of(r);
          s.start = block;  // first block of this segment; dot's partials go to scratch[block]
          if (r.op == Op::dot) s.u0 = nb;
          else s.u0 = r.m, s.u1 = r.k, s.u2 = r.n;
          for (std::uint32_t t = 0; t < nb; ++t) blocks[block + t] = j;
          block += nb;
          break;
        }
        default: {
          s.start = item;
          if (r.op == Op::interpolate) {
            s.u0 = r.mode == InterpolationMode::slerp ? 1u : 0u;
            s.u1 = static_cast<std::uint32_t>(detail::t_to_fixed16(r.scalar));
          } else {
            s.u0 = std::bit_cast<std::uint32_t>(r.scalar2);  // element-wise: the second scalar
          }
          // Each block's first item lies in this segment when it starts inside [item, item+len).
          const std::uint32_t end = item + s.len;
          for (std::uint32_t b = ceil_div(item, kWorkgroupSize); b * std::uint64_t{kWorkgroupSize} < end; ++b)
            blocks[b] = j;
          item = end;
        }
      }
      segments[seg_index] = s;
    }
  }
  copy_inputs(frame->copies, copy_bytes, parallel);
  const std::uint64_t upload_value = copy_engine ? frame->transfer.upload(*ctx, in_off, frame->host_in) : 0;

  // 4. Record: one dispatch per group, one command buffer, one submission.
  VkCommandBuffer cmd = frame->commands;
  check_vk(vkResetCommandPool(ctx->device(), frame->pool, 0), "vkResetCommandPool");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check_vk(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
  if (frame->timestamps) {
    vkCmdResetQueryPool(cmd, frame->timestamps, 0, 2);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, frame->timestamps, 0);
  }
  const auto table = detail::rho_gradient_table();
  const std::uint32_t max_x = ctx->limits().maxComputeWorkGroupCount[0];
  std::uint64_t dispatches = 0;
  auto dispatch = [&](VkPipeline pipeline, const Group& g, std::uint32_t block_count) {
    PushConstants pc;
    pc.segments = up_addr + g.first_segment * sizeof(SegmentRecord);
    pc.blocks = up_addr + segments_bytes + g.first_block * 4;
    pc.scratch = frame->scratch ? frame->scratch.address() : 0;
    pc.block_count = block_count;
    pc.grid_x = std::min(block_count, max_x);
    pc.segment_count = g.request_count;
    std::copy(table.begin(), table.end(), pc.table);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdPushConstants(cmd, kernels.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc), &pc);
    vkCmdDispatch(cmd, pc.grid_x, ceil_div(block_count, pc.grid_x), 1);
    ++dispatches;
  };
  for (const Group& g : frame->groups) {
    if (g.error) continue;
    dispatch(g.pipeline, g, g.block_count);
    if (g.op == Op::dot && g.needs_dot_final) {
      VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
      vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           0, 1, &barrier, 0, nullptr, 0, nullptr);
      dispatch(g.dot_final, g, g.request_count);
    }
  }
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &to_host, 0, nullptr, 0, nullptr);
  if (copy_engine) frame->transfer.record_download(cmd, frame->readback, out_off, frame->host_out);
  if (frame->timestamps)
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, frame->timestamps, 1);
  check_vk(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");

  try {
    frame->timeline_value = ctx->submit(cmd, upload_value);
  } catch (...) {
    // The upload may still read staging: let it end before the frame goes back to the pool.
    if (upload_value) ctx->wait_upload(upload_value, std::chrono::seconds(10));
    throw;
  }
  counters.dispatches.fetch_add(dispatches, std::memory_order_relaxed);
  counters.uploads.fetch_add(1, std::memory_order_relaxed);
  counters.downloads.fetch_add(1, std::memory_order_relaxed);
  counters.bytes_up.fetch_add(upload_bytes, std::memory_order_relaxed);
  counters.bytes_down.fetch_add(output_bytes_total, std::memory_order_relaxed);
  return in_flight;
}

}  // namespace gpubatch::gpu
