#include "gpu/vulkan_batch_device.hpp"

#include "log.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "gpu/custom_kernels.hpp"
#include "gpu/early_results.hpp"
#include "gpu/fault_injection.hpp"
#include "plan/fusion.hpp"
#include "gpu/glsl_compiler.hpp"
#include "gpu/host_memory.hpp"
#include "gpu/kernels.hpp"
#include "gpu/memory.hpp"
#include "gpu/parallel_copy.hpp"
#include "gpu/recorder.hpp"
#include "gpu/transfer_path.hpp"
#include "gpu/vk_check.hpp"
#include "plan/batch_plan.hpp"
#include "plan/encoding.hpp"
#include "state_math.hpp"

namespace gpubatch::gpu {

namespace {

// GPU timestamps around every batch (InFlightBatch::device_time) only when asked for
// (GPUBATCH_GPU_TIMESTAMPS=on): nothing in the library reads them, and a bottom-of-pipe timestamp
// makes the GPU wait for the batch's work before it signals the timeline, which a lone request's
// round trip pays in full.
// Read as each frame is made (a few per device).
bool gpu_timestamps_enabled() {
  const char* v = std::getenv("GPUBATCH_GPU_TIMESTAMPS");
  return v && std::string_view(v) == "on";
}

using plan::align_up;
using plan::kDataAlignment;
using plan::SegmentRecord;

// A group's kernels, resolved by the gpu layer (by plan index).
struct GroupKernels {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipeline dot_final = VK_NULL_HANDLE;  // dot only
  std::uint32_t blocks_per_workgroup = 1;  // 16: a built-in element-wise kernel's _v4 form
  // A built-in element-wise kernel's one-wide form: a lone request's input addresses and length
  // can ride in its push constants (op_kernel.glsl lone_segment; Encoder::lone_inputs).
  bool lone_addresses = false;
};

// A group of one request whose inputs the Encoder put in staging: what dispatches_of() pushes
// for op_kernel.glsl's lone_segment() (len 0: the group reads its segment table as usual).
struct LoneInputs {
  std::uint64_t a = 0, b = 0;
  std::uint32_t len = 0;
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
    const std::uint32_t n_scalars = plan::step_scalars(step);
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

// One dispatch of a recorded command buffer, as record() would record it again.
struct RecordedDispatch {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipeline dot_final = VK_NULL_HANDLE;  // recorded after a barrier when not null
  DispatchArgs args;
  bool operator==(const RecordedDispatch& o) const noexcept {
    return pipeline == o.pipeline && dot_final == o.dot_final && args == o.args;
  }
};

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
  Allocation upload_cached;           // large direct-path batches' tables and inputs (cached_upload_bytes())
  Allocation upload_near;             // small, lone and large ones', in device-local memory the host maps (upload_place)
  bool near_refused = false;          // the device's heap had no room for upload_near (reserve_near)
  TransferFrame transfer;             // the copy-engine path's staging, device memory, commands
  plan::BatchPlan plan;               // what the batch is: groups, layout, output slots
  std::vector<GroupKernels> kernels;  // by plan group
  std::vector<LoneInputs> lone;       // by plan group (Encoder::lone_inputs)
  std::vector<CopyOp> copies;         // the inputs, in staging order
  // Caller host buffers this batch reads or writes: kept alive until the batch is done and its
  // frame released (an abandoned batch's never are: the GPU may still use them), and their GPU copies.
  std::vector<std::shared_ptr<detail::HostMemory>> host_refs;
  std::vector<const VulkanHostMemory*> host_results;
  std::vector<BufferCopy> host_in, host_out;
  std::uint64_t timeline_value = 0;
  std::uint64_t upload_value = 0;  // the upload timeline value its kernels wait for (0: none)
  // What `commands` holds: its dispatches, when it can be submitted again as it is (direct path,
  // no timestamps); empty: it must be recorded. A lone caller's batch after batch of one op and
  // size records nothing (record()).
  std::vector<RecordedDispatch> recorded;
};

namespace {

class VulkanInFlight final : public detail::InFlightBatch {
 public:
  VulkanInFlight(std::shared_ptr<FrameSet> set, Frame* frame) : set_(std::move(set)), frame_(frame) {}

  ~VulkanInFlight() override {
    // Only a finished batch gives its frame back: the GPU may still be using the memory. One that
    // has not finished (abandoned by a watchdog, or its device lost) keeps its frame out of
    // circulation; the frame is destroyed with the device, after vkDeviceWaitIdle. One whose
    // results landed early settles: it goes back once the counter passes its value.
    try {
      if (done_ || set_->context->wait(frame_->timeline_value, std::chrono::nanoseconds(0)))
        set_->release(frame_);
      else if (landed_)
        set_->settle(frame_);
    } catch (const Error&) {
    }
  }

  // Before the submission: watch the lone result's words (early_results.hpp).
  void look_early(std::byte* at, std::size_t bytes) noexcept { early_.arm(at, bytes); }

  bool wait_for(std::chrono::nanoseconds timeout) override {
    if (done_ || landed_) return true;
    if (early_.armed() && early_.landed()) return land();
    if (!set_->context->wait(frame_->timeline_value, timeout)) return false;
    done_ = true;
    frame_->readback.invalidate();
    for (const VulkanHostMemory* m : frame_->host_results) m->allocation.invalidate();
    return true;
  }

  std::string pending_state() override {
    detail::GpuContext& ctx = *set_->context;
    try {
      std::string s = "timeline at " + std::to_string(ctx.completed_value()) + " of " +
                      std::to_string(frame_->timeline_value) + " (last submitted " +
                      std::to_string(ctx.last_submitted()) + ")";
      if (frame_->upload_value)
        s += ", upload timeline at " + std::to_string(ctx.upload_counter()) + " of " +
             std::to_string(frame_->upload_value) + " (last submitted " + std::to_string(ctx.last_upload_submitted()) + ")";
      return s;
    } catch (const Error& e) {
      return std::string("timeline unreadable: ") + e.what();
    }
  }

  // One vkGetSemaphoreCounterValue while the batch runs; once the counter has passed it, the
  // zero-timeout wait_for (which returns at once: the context has noted the value) finishes the
  // batch as a blocking wait would, injected faults and hidden completions included.
  bool poll() override {
    if (done_ || landed_) return true;
    if (early_.armed() && early_.landed()) return land();
    if (set_->context->completed_value() < frame_->timeline_value) return false;
    return wait_for(std::chrono::nanoseconds(0));
  }

  void take_result(std::size_t index, Result& out) override { take_result(index, out, detail::inline_runner()); }

  // A large float result that lands in a buffer of its own size (the executor hands over the
  // request's input vector: element-wise ops, chains) is copied in parts over `parallel`'s
  // threads: one thread's copy out of readback took 1.75 ms of a lone 4,194,304-float request's
  // 3.3 ms on the H100 (trace, BENCHMARKS.md third session of 2026-11-27). Anything else is
  // assigned in one pass.
  void take_result(std::size_t index, Result& out, detail::ParallelRunner& parallel) override {
    const plan::OutputSlot& slot = frame_->plan.outputs().at(index);
    if (slot.error) std::rethrow_exception(slot.error);
    if (slot.host) {  // the values are in the request's host_result already
      out.values.clear();
      return;
    }
    const std::byte* src = frame_->readback.mapped() + slot.offset;
    // assign, not resize and memcpy: one pass over fresh memory, where resize first zeroes it
    // (a second pass over every result: 4 MiB per 1,048,576-float request).
    if (slot.states) {
      const auto* from = reinterpret_cast<const std::uint8_t*>(src);
      out.states.assign(from, from + slot.bytes);
    } else {
      const auto* from = reinterpret_cast<const float*>(src);
      const std::size_t n = slot.bytes / sizeof(float);
      if (n >= kParallelCopyBytes / sizeof(float) && out.values.size() == n && parallel.width() > 1)
        split_copy(out.values.data(), from, slot.bytes, parallel);
      else
        out.values.assign(from, from + n);
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
  bool land() {
    landed_ = true;
    set_->context->counters().early_results.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  std::shared_ptr<FrameSet> set_;
  Frame* frame_;
  bool done_ = false;
  bool landed_ = false;  // every result word seen written before the counter (early_)
  EarlyLook early_;
};

// Asks for the first lines (up to 2 KiB) of an input a few copies ahead: each request's input was
// written last on its caller's core, and many small copies in a row each waited for their source
// lines one by one (the strand's memcpy was a fifth of its time in the H100's crowd of 1 KiB
// requests; BENCHMARKS.md seventh session of 2026-11-27).
inline void prefetch_source(const CopyOp& c) noexcept {
  const std::size_t lines = std::min<std::size_t>(c.bytes, 2048);
  for (std::size_t off = 0; off < lines; off += 64) __builtin_prefetch(c.src + off, 0, 3);
}

// Copies a batch's inputs into staging. One thread writing write-combined memory stays far below
// what the memory takes, so a batch with enough input bytes is cut into equal byte ranges of at
// least `part_bytes` (copy_part_bytes(); a large input split across ranges) that `parallel`'s
// threads copy at once.
void copy_inputs(const std::vector<CopyOp>& copies, std::size_t total, std::uint64_t part_bytes,
                 detail::ParallelRunner& parallel) {
  constexpr std::size_t kAhead = 2;
  const std::size_t parts = std::min<std::size_t>(parallel.width(), total / part_bytes);
  if (parts <= 1) {
    for (std::size_t i = 0; i < copies.size(); ++i) {
      if (i + kAhead < copies.size()) prefetch_source(copies[i + kAhead]);
      std::memcpy(copies[i].dst, copies[i].src, copies[i].bytes);
    }
    return;
  }
  parallel.run(parts, [&](std::size_t part) {
    const std::size_t begin = total * part / parts, end = total * (part + 1) / parts;
    // The copy holding byte `begin`: the last whose start is <= begin.
    auto it = std::upper_bound(copies.begin(), copies.end(), begin,
                               [](std::size_t at, const CopyOp& c) { return at < c.start; });
    for (--it; it != copies.end() && it->start < end; ++it) {
      if (copies.end() - it > static_cast<std::ptrdiff_t>(kAhead) && (it + kAhead)->start < end) prefetch_source(*(it + kAhead));
      const std::size_t from = std::max(begin, it->start), to = std::min(end, it->start + it->bytes);
      if (from < to) std::memcpy(it->dst + (from - it->start), it->src + (from - it->start), to - from);
    }
  });
}

// plan::BatchPlan::HostBufferCheck for a batch on `context`.
std::exception_ptr foreign_on(const Request& request, const void* context) {
  return foreign_host_buffer(request, static_cast<const detail::GpuContext*>(context));
}

// The kernel of a group whose representative is `rep`: a chain's fused kernel (compiled on a
// cache miss), a custom kernel's, or a built-in's. Throws Error when it cannot be built.
GroupKernels kernels_of(Kernels& kernels, const plan::Group& g, const Request& rep, bool ew_vector) {
  GroupKernels k;
  switch (g.op) {
    case Op::chain: {
      const FusedShape shape = fused_shape_of(*rep.chain);
      const std::string key = fused_key(shape);
      if (kernels.has(key)) {
        k.pipeline = kernels.get_or_build(key, {});
      } else {
        log::debug("gpubatch: compiling fused kernel {} for {}", key, describe_op(rep));
        k.pipeline = kernels.get_or_build(key, compile_compute_glsl(fused_source(shape), "fused-kernel"));
      }
      break;
    }
    case Op::custom: {
      auto kernel = as_custom_kernel(rep.kernel);
      if (!kernel)
        throw Error(ErrorCode::invalid_argument,
                    "kernel '" + rep.kernel->name +
                        "' was not made by register_kernel() (a hand-built CustomKernelInfo carries no code)");
      k.pipeline = kernels.get_or_build(kernel->key, kernel->spirv);
      break;
    }
    default:
      // The four-wide form takes vec4 loads where a segment's data is 16-byte aligned (it checks,
      // and goes one element at a time where not); the plan aligns every input and output so.
      static_assert(plan::kDataAlignment % 16 == 0);
      if (ew_vector && op_info(g.op).kind == OpKind::ew) {
        k.pipeline = kernels.get(std::string(plan::kernel_name(g.op)) + "_v4");
        k.blocks_per_workgroup = 16;
        break;
      }
      k.pipeline = kernels.get(plan::kernel_name(g.op));
      k.lone_addresses = op_info(g.op).kind == OpKind::ew;
      if (g.op == Op::dot) k.dot_final = kernels.get("dot_final");
  }
  return k;
}

// Each group's kernels into `out` (by group). A group whose kernel cannot be built (a chain whose
// generated kernel does not compile, a pipeline the driver refuses) gets Group::error: its own
// requests fail (take_result throws), the rest of the batch runs.
void resolve_kernels(Kernels& kernels, plan::BatchPlan& plan, std::span<const Request* const> requests,
                     bool ew_vector, std::vector<GroupKernels>& out) {
  const std::span<plan::Group> groups = plan.groups();
  out.assign(groups.size(), GroupKernels{});
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    plan::Group& g = groups[gi];
    if (g.error) continue;
    const Request& rep = *requests[g.representative];
    try {
      out[gi] = kernels_of(kernels, g, rep, ew_vector);
    } catch (const Error& e) {
      g.error = std::make_exception_ptr(Error(e.code(), describe_op(rep) + ": " + message_of(e)));
    }
  }
}

// Where one batch's tables and inputs go, and the addresses its kernels use.
struct Staging {
  std::byte* up = nullptr;        // mapped: the CPU writes tables and inputs here
  std::uint64_t up_addr = 0;      // the kernels' address of `up`
  std::uint64_t down_addr = 0;    // the kernels' address of the outputs
  bool copy_engine = false;
  bool results_by_kernel = false;  // copy engine in only: kernels write results to host memory
  const Allocation* cached = nullptr;  // direct path from host-cached memory: flush after packing
};

// The device's own heap full: a near frame that could not grow packs into system memory from
// then on, as it would on a device without such memory (one failed vkAllocateMemory of a block
// per frame, not one per batch).
bool reserve_near(Frame& frame, MemoryPool& pool, std::size_t bytes) {
  if (frame.near_refused) return false;
  try {
    ensure(frame.upload_near, pool, MemoryKind::upload_near, bytes);
    return true;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    frame.near_refused = true;
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      log::warn("gpubatch: no room in device memory for a batch's inputs ({}); this frame packs into system "
                   "memory from now on",
                   e.what());
    return false;
  }
}

// The direct path's upload memory for the planned batch (upload_place; see reserve_memory).
void reserve_direct(Frame& frame, MemoryPool& pool, const PathRules& rules, Staging& st) {
  const plan::ByteLayout& l = frame.plan.layout();
  UploadPlace place = upload_place(l.upload_bytes, frame.plan.outputs().size(), rules, pool.has_near_upload());
  if (place == UploadPlace::near && !reserve_near(frame, pool, l.upload_bytes))
    place = l.upload_bytes >= rules.cached_upload_bytes ? UploadPlace::cached : UploadPlace::write_combined;
  Allocation& up = place == UploadPlace::cached ? frame.upload_cached
                   : place == UploadPlace::near ? frame.upload_near
                                                : frame.upload;
  if (place != UploadPlace::near)
    ensure(up, pool, place == UploadPlace::cached ? MemoryKind::staging : MemoryKind::upload, l.upload_bytes);
  st.up = up.mapped();
  st.up_addr = up.address();
  if (place == UploadPlace::cached) st.cached = &up;
}

// The frame's memory for the planned batch (DESIGN.md "Large requests"). Through the copy engine
// (large batches whose kernels prefer device memory, by default): the CPU packs host-cached
// staging, the GPU copies it to device memory, kernels work there (the tables' addresses are
// device addresses) and the results are copied back into readback. Direct (the rest): kernels
// read what the CPU packed where it lies: device-local memory the host maps up to
// rules.near_upload_bytes (a lone batch's up to near_lone_bytes; where the device has such
// memory), write-combined memory above, from rules.cached_upload_bytes device-local memory the
// host maps again (rules.near_big) or host-cached memory; they write results into readback.
Staging reserve_memory(detail::GpuContext& ctx, Frame& frame, const PathRules& rules) {
  const plan::ByteLayout& l = frame.plan.layout();
  if (l.upload_bytes > ctx.max_allocation_bytes() || l.output_bytes > ctx.max_allocation_bytes())
    throw Error(ErrorCode::out_of_memory, "a batch of " + std::to_string(l.upload_bytes) +
                                              " bytes exceeds the device's largest allocation");
  if (FaultInjector::fire(Fault::host_out_of_memory))
    throw Error(ErrorCode::out_of_memory, "staging memory for a batch of " + std::to_string(l.upload_bytes) +
                                              " bytes (injected host out of memory)");
  auto& pool = ctx.memory();
  Staging st;
  st.copy_engine = rules.copy_engine.takes(l.upload_bytes, frame.plan.prefers_device_memory());
  st.results_by_kernel = st.copy_engine && rules.results_by_kernel;
  if (st.copy_engine) {
    frame.transfer.prepare(ctx, l.upload_bytes, st.results_by_kernel ? 0 : l.output_bytes);
    st.up = frame.transfer.host();
    st.up_addr = frame.transfer.input_address();
  } else {
    reserve_direct(frame, pool, rules, st);
  }
  ensure(frame.readback, pool, MemoryKind::readback, l.output_bytes);
  if (l.scratch_floats > 0) ensure(frame.scratch, pool, MemoryKind::device_local, l.scratch_floats * 4);
  st.down_addr = st.copy_engine && !st.results_by_kernel ? frame.transfer.output_address() : frame.readback.address();
  return st;
}

// Writes a planned batch into staging: the segment and block tables, each chain's address and
// scalar tables, and the list of input copies (Frame::copies, made by copy_inputs()) and of host
// buffers read in place or through the copy engine.
class Encoder {
 public:
  Encoder(Frame& frame, const Staging& staging, const detail::GpuContext* ctx)
      : f_(frame), st_(staging), ctx_(ctx), in_off_(frame.plan.layout().segments_bytes + frame.plan.layout().blocks_bytes) {}

  void run(std::span<const Request* const> requests) {
    f_.copies.clear();
    f_.host_refs.clear();
    f_.host_results.clear();
    f_.host_in.clear();
    f_.host_out.clear();
    f_.lone.assign(f_.plan.groups().size(), LoneInputs{});
    const plan::BatchPlan& p = f_.plan;
    auto* segments = reinterpret_cast<SegmentRecord*>(st_.up);
    auto* block_table = reinterpret_cast<std::uint32_t*>(st_.up + p.layout().segments_bytes);
    const auto groups = p.groups();
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const plan::Group& g = groups[gi];
      if (g.error) continue;
      plan::SegmentCursor at;
      for (std::uint32_t j = 0; j < g.request_count; ++j) {
        const std::uint32_t index = p.request_of(g, j);
        const Request& r = *requests[index];
        SegmentRecord s;
        addresses(g, r, p.outputs()[index], s);
        plan::place_segment(g, r, j, at, s, block_table + g.first_block);
        segments[g.first_segment + j] = s;
        if (g.request_count == 1) lone_inputs(gi, r, s);
      }
    }
  }

  std::size_t end() const { return in_off_; }             // upload bytes written
  std::size_t copy_bytes() const { return copy_bytes_; }  // of them, input bytes copy_inputs() copies

 private:
  // An input copied into staging; its address.
  std::uint64_t put(const void* data, std::size_t bytes) {
    if (bytes == 0) return 0;
    f_.copies.push_back({st_.up + in_off_, static_cast<const std::byte*>(data), bytes, copy_bytes_});
    copy_bytes_ += bytes;
    const std::uint64_t addr = st_.up_addr + in_off_;
    in_off_ += align_up(bytes, kDataAlignment);
    return addr;
  }

  // Input a; from a host buffer: read in place by the kernel, or copied by the copy engine.
  std::uint64_t put_a(const Request& r) { return r.host_a ? put_host(r.host_a) : put(r.a.data(), r.a.size() * 4); }
  std::uint64_t put_b(const Request& r) { return r.host_b ? put_host(r.host_b) : put(r.b.data(), r.b.size() * 4); }

  std::uint64_t put_host(const std::shared_ptr<detail::HostMemory>& host) {
    const auto& m = host_memory_of(host, ctx_);  // on this context: checked when grouped
    const std::size_t at = host_byte_offset(*host);  // a view's place in the memory it views
    f_.host_refs.push_back(host);
    if (!st_.copy_engine) return m.allocation.address() + at;
    const std::size_t bytes = host->floats * sizeof(float);
    f_.host_in.push_back({m.allocation.buffer(), m.allocation.offset() + at, in_off_, bytes});
    const std::uint64_t addr = st_.up_addr + in_off_;
    in_off_ += align_up(bytes, kDataAlignment);
    return addr;
  }

  // The segment's addresses: its inputs (or a chain's tables) and its result.
  void addresses(const plan::Group& g, const Request& r, const plan::OutputSlot& slot, SegmentRecord& s) {
    std::uint64_t dst = st_.down_addr + slot.offset;
    if (r.host_result) {  // straight into the caller's buffer, or copied there from device memory
      const auto& m = host_memory_of(r.host_result, ctx_);
      const std::size_t at = host_byte_offset(*r.host_result);
      f_.host_refs.push_back(r.host_result);
      f_.host_results.push_back(&m);
      if (st_.copy_engine && !st_.results_by_kernel)
        f_.host_out.push_back({m.allocation.buffer(), m.allocation.offset() + at, slot.offset, slot.bytes});
      else dst = m.allocation.address() + at;
    }
    if (r.op == Op::chain) {
      chain_tables(g, r, dst, s);
    } else {
      s.a = r.op == Op::gradients || r.op == Op::interpolate ? put(r.states_a.data(), r.states_a.size()) : put_a(r);
      s.b = r.op == Op::interpolate ? put(r.states_b.data(), r.states_b.size()) : put_b(r);
    }
    s.dst = dst;
  }

  // A chain's a: the address table (x, the extra inputs, the result); b: the scalar table.
  void chain_tables(const plan::Group& g, const Request& r, std::uint64_t dst, SegmentRecord& s) {
    const std::size_t io_bytes = (g.chain_inputs + 1) * sizeof(std::uint64_t);
    const std::size_t scalar_bytes = std::max<std::size_t>(g.chain_scalars, 1) * sizeof(float);
    const std::size_t io_off = in_off_, scalar_off = io_off + align_up(io_bytes, kDataAlignment);
    in_off_ = scalar_off + align_up(scalar_bytes, kDataAlignment);
    auto* io = reinterpret_cast<std::uint64_t*>(st_.up + io_off);
    std::size_t k = 0;
    io[k++] = put_a(r);
    for (const auto& in : r.inputs) io[k++] = put(in.data(), in.size() * 4);
    io[k] = dst;
    auto* scalars = reinterpret_cast<float*>(st_.up + scalar_off);
    scalars[0] = 0.0f;
    std::size_t m = 0;
    for (const ChainStep& step : r.chain->steps()) {
      const std::uint32_t n_scalars = plan::step_scalars(step);
      if (n_scalars > 0) scalars[m++] = step.scalar;
      if (n_scalars > 1) scalars[m++] = step.scalar2;
    }
    s.a = st_.up_addr + io_off;
    s.b = st_.up_addr + scalar_off;
  }

  // A lone request of a one-wide element-wise kernel whose inputs lie in the frame's staging: their
  // addresses are the frame's own from batch to batch, so pushing them keeps a lone caller's
  // command buffer reusable (a caller's host buffer, a new address each time, would not).
  void lone_inputs(std::size_t gi, const Request& r, const SegmentRecord& s) {
    if (!f_.kernels[gi].lone_addresses || r.host_a || r.host_b) return;
    f_.lone[gi] = LoneInputs{s.a, s.b, s.len};
  }

  Frame& f_;
  const Staging& st_;
  const detail::GpuContext* ctx_;  // the batch's: where its host buffers are looked up
  std::size_t in_off_;
  std::size_t copy_bytes_ = 0;
};

// The dispatches record() makes for the planned batch, in order.
void dispatches_of(const Frame& f, const Staging& st, std::vector<RecordedDispatch>& out) {
  out.clear();
  const plan::ByteLayout& l = f.plan.layout();
  const std::uint64_t scratch = f.scratch ? f.scratch.address() : 0;
  const auto groups = f.plan.groups();
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const plan::Group& g = groups[gi];
    if (g.error) continue;
    out.push_back({f.kernels[gi].pipeline,
                   g.op == Op::dot && g.needs_dot_final ? f.kernels[gi].dot_final : VK_NULL_HANDLE,
                   DispatchArgs{st.up_addr + g.first_segment * sizeof(SegmentRecord),
                                st.up_addr + l.segments_bytes + g.first_block * 4, scratch, g.block_count,
                                g.request_count, f.kernels[gi].blocks_per_workgroup}});
    const LoneInputs& lone = f.lone[gi];
    if (lone.len == 0) continue;
    DispatchArgs& args = out.back().args;  // op_kernel.glsl lone_segment(): blocks = a, scratch = b
    args.blocks = lone.a;
    args.scratch = lone.b;
    args.scratch_count = lone.len;
  }
}

// One command buffer for the planned batch: one dispatch per group that runs (dot: a second one
// after a barrier when a request has several blocks), the results made visible to the host (and
// copied back on the copy-engine path), timestamps around it all. Returns the dispatches. On the
// direct path without timestamps, a frame whose command buffer already holds these dispatches
// submits it again unrecorded: the tables and data it points at are rewritten in place, and the
// addresses in its push constants are the frame's own memory (a lone caller's batch after batch).
std::uint64_t record(detail::GpuContext& ctx, Frame& f, const Staging& st) {
  thread_local std::vector<RecordedDispatch> wanted;
  dispatches_of(f, st, wanted);
  std::uint64_t count = 0;
  for (const RecordedDispatch& d : wanted) count += d.dot_final ? 2 : 1;
  const bool reusable = !st.copy_engine && !f.timestamps;
  if (reusable && !f.recorded.empty() && f.recorded == wanted) return count;
  f.recorded.clear();  // from here the command buffer is being rewritten
  ctx.counters().batch_recordings.fetch_add(1, std::memory_order_relaxed);
  CommandRecorder rec(ctx, f.pool, f.commands);
  rec.set_table(detail::rho_gradient_table());
  rec.begin(!reusable);
  if (f.timestamps) rec.start_timestamps(f.timestamps, 2);
  for (const RecordedDispatch& d : wanted) {
    rec.dispatch(d.pipeline, d.args);
    if (!d.dot_final) continue;
    rec.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_SHADER_READ_BIT);
    DispatchArgs args = d.args;
    args.scratch_count = args.block_count;  // the first pass wrote one partial per block
    args.block_count = args.segment_count;
    rec.dispatch(d.dot_final, args);
  }
  rec.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
              VK_ACCESS_HOST_READ_BIT);
  if (st.copy_engine && !st.results_by_kernel)
    f.transfer.record_download(rec.commands(), f.readback, f.plan.layout().output_bytes, f.host_out);
  if (f.timestamps) rec.timestamp(f.timestamps, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 1);
  rec.end();
  if (reusable && !wanted.empty()) f.recorded = wanted;
  return rec.dispatches();
}

// Whether a batch's result is watched as it lands (early_results.hpp): one built-in element-wise
// request of at most kEarlyResultBytes, written by its kernel into host-coherent readback, and
// nothing that would step around the early look: no caller host buffers (their lifetime ends
// with the frame's), no timestamps (read once finished), no armed fault (an injected hang or
// lost wait must be seen as the counter would show it).
bool looks_early(const Frame& f, const Staging& st) {
  const auto groups = f.plan.groups();
  if (groups.size() != 1 || groups[0].request_count != 1 || groups[0].error) return false;
  if (op_info(groups[0].op).kind != OpKind::ew || f.plan.outputs().size() != 1) return false;
  const plan::OutputSlot& slot = f.plan.outputs()[0];
  if (slot.error || slot.host || slot.states || slot.bytes == 0 || slot.bytes > kEarlyResultBytes) return false;
  if (st.copy_engine && !st.results_by_kernel) return false;
  return f.host_refs.empty() && !f.timestamps && f.readback.coherent() && !FaultInjector::any_armed();
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
  if (settling_count.load(std::memory_order_relaxed) != 0) take_settled();
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
    if (context->timestamps_supported() && gpu_timestamps_enabled()) {
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

void FrameSet::settle(Frame* frame) {
  std::lock_guard lock(mutex);
  settling.push_back(frame);
  settling_count.store(settling.size(), std::memory_order_relaxed);
}

// The settling frames whose values the counter has passed go back to `free`. The counter is read
// outside the lock; a lost device's read throws, and its frames stay out (as an abandoned one's).
void FrameSet::take_settled() {
  const std::uint64_t done = context->completed_value();
  std::lock_guard lock(mutex);
  std::erase_if(settling, [&](Frame* f) {
    if (f->timeline_value > done) return false;
    free.push_back(f);
    return true;
  });
  settling_count.store(settling.size(), std::memory_order_relaxed);
}

void FrameSet::release(Frame* frame) {
  // The batch is done with the callers' host buffers: let them go now, not when the frame is next
  // used (maybe never). An imported one is the caller's memory, which the caller may free once no
  // HostBuffer, request or batch holds it.
  frame->host_refs.clear();
  frame->host_results.clear();
  std::lock_guard lock(mutex);
  free.push_back(frame);
}

VulkanBatchDevice::VulkanBatchDevice(std::shared_ptr<detail::DeviceIdentity> identity,
                                     std::uint64_t max_request_bytes)
    : identity_(std::move(identity)) {
  auto context = identity_->context();
  rules_ = {copy_engine_rule(*context, identity_->options()),
            copy_results_by_kernel(),
            cached_upload_bytes(),
            near_upload_bytes(),
            near_lone_bytes(),
            near_big(),
            ew_vector_kernels(context->info().type == "cpu"),
            upload_wait_on_host(),
            early_results(),
            split_rule(*context, identity_->options()),
            copy_part_bytes()};
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
  if (!uses_host_buffers(request)) return true;
  const auto context = identity_->context();
  return !foreign_host_buffer(request, context.get());
}

void VulkanBatchDevice::recover() { identity_->recover(current()->context); }

std::size_t VulkanBatchDevice::split_bytes() const {
  if (rules_.split.bytes == std::numeric_limits<std::uint64_t>::max()) return 0;
  return static_cast<std::size_t>(std::max<std::uint64_t>(rules_.split.bytes, 1));
}

std::unique_ptr<detail::InFlightBatch> VulkanBatchDevice::submit_split(Request& request,
                                                                       detail::ParallelRunner& parallel) {
  if (split_bytes() == 0 || !splittable(request) || input_bytes(request) + output_bytes(request) < split_bytes())
    return nullptr;
  return submit_chunked(shared_from_this(), chunk_pool_, request, rules_.split.chunk_floats, parallel);
}

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

  // 1. Plan: the groups, each group's kernel (one that cannot be built fails its own requests
  //    only), then the block counts, byte layout and output slots of the groups that run.
  plan::BatchPlan& plan = frame->plan;
  plan.group(requests, &foreign_on, ctx);
  resolve_kernels(ctx->kernels(), plan, requests, rules_.ew_vector, frame->kernels);
  plan.lay_out(requests);
  const Staging staging = reserve_memory(*ctx, *frame, rules_);

  // 2. Encode: tables into staging, the inputs copied once (on `parallel`'s threads when large).
  Encoder encoder(*frame, staging, ctx);
  encoder.run(requests);
  copy_inputs(frame->copies, encoder.copy_bytes(), rules_.copy_part_bytes, parallel);
  if (staging.cached) staging.cached->flush();
  std::uint64_t upload_value =
      staging.copy_engine ? frame->transfer.upload(*ctx, encoder.end(), frame->host_in) : 0;
  if (upload_value && rules_.upload_wait_on_host) {
    // GPUBATCH_UPLOAD_WAIT=host (a diagnostic, RELIABILITY.md "A copy-engine batch that never
    // completes"): the host waits for the upload and the compute submission waits for nothing.
    ctx->wait_upload(upload_value, std::chrono::seconds(60));
    upload_value = 0;
  }
  frame->upload_value = upload_value;

  // 3. Record one command buffer and submit it.
  const std::uint64_t dispatches = record(*ctx, *frame, staging);
  if (rules_.early_results && looks_early(*frame, staging)) {
    const plan::OutputSlot& slot = plan.outputs()[0];
    in_flight->look_early(frame->readback.mapped() + slot.offset, slot.bytes);
  }
  try {
    frame->timeline_value = ctx->submit(frame->commands, upload_value);
  } catch (...) {
    // The upload may still read staging: let it end before the frame goes back to the pool.
    if (upload_value) ctx->wait_upload(upload_value, std::chrono::seconds(10));
    throw;
  }
  auto& counters = ctx->counters();
  counters.dispatches.fetch_add(dispatches, std::memory_order_relaxed);
  counters.uploads.fetch_add(1, std::memory_order_relaxed);
  counters.downloads.fetch_add(1, std::memory_order_relaxed);
  counters.bytes_up.fetch_add(plan.layout().upload_bytes, std::memory_order_relaxed);
  counters.bytes_down.fetch_add(plan.layout().output_bytes, std::memory_order_relaxed);
  return in_flight;
}

}  // namespace gpubatch::gpu
