// The device side of GpuCommandBatch::execute(): takes the buffers a plan (graph_plan.hpp) asks
// for, writes its tables into staging and records one command buffer:
//   upload pass    upload() wrote the data into staging memory already, or it is in the caller's
//                  HostBuffer; with Transfers::copy it is copied (vkCmdCopyBuffer) into
//                  device-local buffers, with Transfers::direct the kernels read it where it is.
//                  Imports are copied into their own buffers once (from staging or a HostBuffer).
//   dispatches     in queue order; barriers only between dependent dispatches (read after write,
//                  write after read or write, tracked per buffer).
//   download pass  results copied from device-local buffers into readback memory or the
//                  HostBuffer they are delivered to (copy), or written there by their kernels
//                  (direct).
// It is submitted once on the context's timeline and waited for under the watchdog. The device
// buffers are kept for the next execute, which frees those it does not need.
#include "log.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "gpu/context.hpp"
#include "gpu/glsl_compiler.hpp"
#include "gpu/graph_impl.hpp"
#include "gpu/host_memory.hpp"
#include "gpu/kernels.hpp"
#include "gpu/recorder.hpp"
#include "gpubatch/error.hpp"
#include "plan/batch_layout.hpp"
#include "plan/encoding.hpp"

namespace gpubatch {
namespace {

using plan::align_up;
using gpu::graph::kImport;
using gpu::graph::kNone;
using gpu::graph::Node;
using gpu::graph::Plan;
using gpu::graph::Step;
using gpu::graph::StepKind;
static_assert(gpu::graph::kBufferAlignment == gpu::MemoryPool::kAlignment,
              "the plan sizes buffers as the memory pool does");

// Copies: source buffer, destination buffer, region.
struct Region {
  VkBuffer src = VK_NULL_HANDLE, dst = VK_NULL_HANDLE;
  VkBufferCopy copy{};
};
using Regions = std::vector<Region>;

// The memory behind a caller's HostBuffer (checked to be this context's when the execute began).
const gpu::Allocation& host_allocation(const std::shared_ptr<detail::HostMemory>& memory,
                                       const detail::GpuContext* ctx) {
  return gpu::host_memory_of(memory, ctx).allocation;
}

// Makes `a` hold at least `bytes` of `kind` (with room to grow), dropping its contents.
void ensure(gpu::MemoryPool& memory, gpu::Allocation& a, gpu::MemoryKind kind, std::size_t bytes) {
  if (bytes == 0 || (a && a.size() >= bytes)) return;
  a.reset();
  a = memory.allocate(kind, std::max<std::size_t>(align_up(bytes + bytes / 4, 4096), 64 * 1024));
}

// One execute on the device: the plan's buffers and pipelines, and the command buffer it records.
class Recorder {
 public:
  Recorder(GpuCommandBatch::Impl& g, const Plan& plan, std::span<const Node> ops,
           std::span<const gpu::graph::Value> values)
      : g_(g),
        plan_(plan),
        ops_(ops),
        values_(values),
        kernels_(g.ctx->kernels()),
        memory_(g.ctx->memory()),
        rec_(*g.ctx, g.pool, g.commands),
        cmd_(g.commands) {}

  void run() {
    acquire_buffers();
    build_pipelines();
    allocate_imports();
    if (plan_.empty()) return;  // nothing to do
    reserve_host_memory();
    fill_staging();
    record();
    submit_and_wait();
    finish();
  }

 private:
  // The plan's buffers, in its order: the last execute's where it chose one, else new ones.
  void acquire_buffers() {
    for (const gpu::graph::Buffer& b : plan_.buffers) {
      // The plan chose this exact size from the same sizes (Input::recycled); buffers of one size
      // are interchangeable.
      if (auto it = g_.recycled.lower_bound(b.bytes); b.recycled && it != g_.recycled.end() && it->first == b.bytes) {
        held_.push_back(std::move(it->second));
        g_.recycled.erase(it);
      } else {
        held_.push_back(memory_.allocate(gpu::MemoryKind::device_local, b.bytes));
      }
    }
    g_.stats.device_bytes = plan_.device_bytes();
    g_.stats.direct = g_.direct;
  }

  // Kernels first (a fused group's is generated and compiled on a cache miss): a compile error
  // fails the execute before staging or readback memory grows.
  void build_pipelines() {
    for (const Step& s : plan_.steps) {
      const Node& n = ops_[s.first_node];
      switch (s.kind) {
        case StepKind::elementwise: pipelines_.push_back(kernels_.get(plan::kernel_name(n.op))); break;
        case StepKind::custom_elementwise:
        case StepKind::custom_segment: pipelines_.push_back(kernels_.get_or_build(n.kernel->key, n.kernel->spirv)); break;
        case StepKind::dot: pipelines_.push_back(kernels_.get(plan::kernel_name(Op::dot))); break;
        case StepKind::matmul: pipelines_.push_back(kernels_.get(plan::kernel_name(Op::matmul))); break;
        case StepKind::fused: pipelines_.push_back(fused_pipeline(s)); break;
      }
    }
  }

  VkPipeline fused_pipeline(const Step& s) {
    if (kernels_.has(s.fused_key)) return kernels_.get_or_build(s.fused_key, {});
    const std::string source = gpu::fused_source(s.shape);
    log::debug("gpubatch: compiling fused kernel {}", s.fused_key);
    const auto spirv = gpu::compile_compute_glsl(source, "fused-kernel");
    const VkPipeline pipeline = kernels_.get_or_build(s.fused_key, spirv);
    ++g_.stats.kernels_compiled;
    return pipeline;
  }

  // Imports get their device buffer once; they keep it across executes.
  void allocate_imports() {
    for (const auto& u : plan_.uploads)
      if (u.ref & kImport) {
        GpuCommandBatch::Impl::Imported& im = g_.imports[u.ref & ~kImport];
        if (!im.device) im.device = memory_.allocate(gpu::MemoryKind::device_local, im.floats * sizeof(float));
      }
  }

  void reserve_host_memory() {
    const std::size_t largest = g_.ctx->max_allocation_bytes();
    if (plan_.staged_bytes > largest || plan_.readback_bytes > largest)
      throw Error(ErrorCode::out_of_memory, "an execute of " + std::to_string(plan_.staged_bytes) + " bytes up and " +
                                                std::to_string(plan_.readback_bytes) +
                                                " down exceeds the device's largest allocation");
    g_.grow_staging(plan_.staged_bytes, plan_.staged_data);
    ensure(memory_, g_.readback, gpu::MemoryKind::readback, plan_.readback_bytes);
    ensure(memory_, g_.scratch, gpu::MemoryKind::device_local, plan_.scratch_floats * sizeof(float));
  }

  // The device address the kernels use for a value reference.
  std::uint64_t address(std::uint32_t ref) const {
    if (ref & kImport) return g_.imports[ref & ~kImport].device.address();
    const gpu::graph::Placement& p = plan_.values[ref];
    if (p.buffer != kNone) return held_[p.buffer].address();
    if (p.host) return host_allocation(values_[ref].host, g_.ctx.get()).address();  // read or written in place
    if (p.staged_at != kNone) return g_.staging.address() + p.staged_at;
    return g_.readback.address() + p.readback_offset;  // direct download
  }

  // Staging: the zeroed block counters, the imports' data (the uploads' is there already), and
  // each step's tables.
  void fill_staging() {
    std::byte* up = g_.staging.mapped();
    std::memset(up + plan_.zeros_offset, 0, plan_.max_blocks * sizeof(std::uint32_t));
    for (const auto& u : plan_.uploads)
      if ((u.ref & kImport) && !u.from_host)
        std::memcpy(up + u.staging_offset, g_.imports[u.ref & ~kImport].host.data(), u.bytes);
    for (const Step& s : plan_.steps) {
      const plan::SegmentRecord rec = s.kind == StepKind::fused ? fused_tables(s, up) : segment(s);
      std::memcpy(up + s.segment_offset, &rec, sizeof(rec));
    }
  }

  // A fused group's address table (inputs, then outputs) and scalar table; its segment points at
  // them.
  plan::SegmentRecord fused_tables(const Step& s, std::byte* up) const {
    auto* io = reinterpret_cast<std::uint64_t*>(up + s.io_offset);
    for (std::size_t i = 0; i < s.inputs.size(); ++i) io[i] = address(s.inputs[i]);
    for (std::size_t o = 0; o < s.outputs.size(); ++o) io[s.inputs.size() + o] = address(s.outputs[o]);
    auto* scalars = reinterpret_cast<float*>(up + s.scalar_offset);
    scalars[0] = 0.0f;
    for (std::uint32_t i = 0; i < s.node_count; ++i)
      if (const std::int32_t j = s.shape.steps[i].scalar; j >= 0) {
        const Node& n = ops_[s.first_node + i];
        scalars[j] = n.scalar;
        if (!n.kernel && gpu::scalars(n.op) == 2) scalars[j + 1] = n.scalar2;
      }
    plan::SegmentRecord rec;
    rec.a = g_.staging.address() + s.io_offset;
    rec.b = g_.staging.address() + s.scalar_offset;
    rec.len = s.len;
    return rec;
  }

  // Any other step's one segment: its operands, result and parameters.
  plan::SegmentRecord segment(const Step& s) const {
    const Node& n = ops_[s.first_node];
    plan::SegmentRecord rec;
    rec.a = address(n.in[0]);
    rec.b = address(n.in[n.arity == 2 ? 1 : 0]);
    rec.dst = address(n.out);
    rec.p0 = n.scalar;
    rec.u0 = std::bit_cast<std::uint32_t>(n.scalar2);  // element-wise: the second scalar
    rec.len = s.len;
    if (s.kind == StepKind::dot) rec.u0 = s.blocks;
    if (s.kind == StepKind::matmul) rec.u0 = n.m, rec.u1 = n.k, rec.u2 = n.n;
    return rec;
  }

  void record() {
    rec_.begin();
    record_uploads();
    record_steps();
    record_downloads();
    rec_.end();
    g_.stats.dispatches += rec_.dispatches();
  }

  void barrier(VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
    rec_.barrier(src_stage, src, dst_stage, dst);
  }

  // Copies grouped by their pair of buffers: one vkCmdCopyBuffer per pair of memory blocks.
  void copy_grouped(Regions& regions) {
    std::stable_sort(regions.begin(), regions.end(),
                     [](const Region& x, const Region& y) { return std::tie(x.src, x.dst) < std::tie(y.src, y.dst); });
    std::vector<VkBufferCopy> batch;
    for (std::size_t i = 0; i < regions.size();) {
      const VkBuffer src = regions[i].src, dst = regions[i].dst;
      batch.clear();
      for (; i < regions.size() && regions[i].src == src && regions[i].dst == dst; ++i) batch.push_back(regions[i].copy);
      vkCmdCopyBuffer(cmd_, src, dst, static_cast<std::uint32_t>(batch.size()), batch.data());
    }
  }

  // Where an upload's data is: staging, or the caller's HostBuffer (an upload or an import).
  std::pair<VkBuffer, VkDeviceSize> upload_source(const gpu::graph::Upload& u) const {
    if (!u.from_host) return {g_.staging.buffer(), g_.staging.offset() + u.staging_offset};
    const auto& memory = u.ref & kImport ? g_.imports[u.ref & ~kImport].host_memory : values_[u.ref].host;
    return {host_allocation(memory, g_.ctx.get()).buffer(), host_allocation(memory, g_.ctx.get()).offset()};
  }

  // Uploads into device buffers (none with direct transfers but imports), then one barrier.
  void record_uploads() {
    Regions regions;
    for (const auto& u : plan_.uploads) {
      const gpu::Allocation* dst = nullptr;
      if (u.ref & kImport) dst = &g_.imports[u.ref & ~kImport].device;
      else if (u.buffer != kNone) dst = &held_[u.buffer];
      if (!dst) continue;
      const auto [src, offset] = upload_source(u);
      regions.push_back({src, dst->buffer(), VkBufferCopy{offset, dst->offset(), u.bytes}});
    }
    if (regions.empty()) return;
    copy_grouped(regions);
    barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT);
  }

  // One step's segment; its blocks count up from the zeroed counters.
  void dispatch(VkPipeline pipeline, const Step& s, std::uint32_t block_count, std::uint32_t scratch_count = 0) {
    const std::uint64_t up = g_.staging.address();
    rec_.dispatch(pipeline, {up + s.segment_offset, up + plan_.zeros_offset,
                             g_.scratch ? g_.scratch.address() + s.scratch_offset * sizeof(float) : 0, block_count, 1,
                             1, scratch_count});
  }

  // The dispatches in order, with a barrier only before one that reads what an earlier one wrote,
  // or writes what an earlier one read or wrote, since the last barrier (by start address).
  void record_steps() {
    const VkPipeline dot_final = plan_.any_dot_final() ? kernels_.get("dot_final") : VK_NULL_HANDLE;
    std::unordered_set<std::uint64_t> written, read;  // since the last barrier
    std::vector<std::uint64_t> reads, writes;
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      const Step& s = plan_.steps[i];
      accesses(s, reads, writes);
      bool hazard = false;
      for (auto a : reads) hazard |= written.count(a) != 0;
      for (auto a : writes) hazard |= written.count(a) != 0 || read.count(a) != 0;
      if (hazard) {
        barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        written.clear();
        read.clear();
      }
      read.insert(reads.begin(), reads.end());
      written.insert(writes.begin(), writes.end());
      dispatch(pipelines_[i], s, s.blocks);
      if (s.kind == StepKind::fused) ++g_.stats.fused_dispatches;
      if (s.dot_final) {  // the partials' sum, in a second dispatch after them
        barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_SHADER_READ_BIT);
        dispatch(dot_final, s, 1, s.blocks);
      }
    }
  }

  // The device ranges a step reads and writes.
  void accesses(const Step& s, std::vector<std::uint64_t>& reads, std::vector<std::uint64_t>& writes) const {
    reads.clear();
    writes.clear();
    if (s.kind == StepKind::fused) {
      for (std::uint32_t r : s.inputs) reads.push_back(address(r));
      for (std::uint32_t v : s.outputs) writes.push_back(address(v));
      return;
    }
    const Node& n = ops_[s.first_node];
    for (std::uint32_t j = 0; j < n.arity; ++j) reads.push_back(address(n.in[j]));
    writes.push_back(address(n.out));
  }

  // Results in device buffers are copied into readback or their HostBuffers; then everything
  // written there is made visible to the host.
  void record_downloads() {
    if (!plan_.downloads_any()) return;
    Regions regions;
    for (const gpu::graph::Download& d : plan_.downloads) {
      const gpu::Allocation& a = held_[d.buffer];
      const gpu::Allocation& to = d.to_host ? host_allocation(values_[d.value].host, g_.ctx.get()) : g_.readback;
      regions.push_back({a.buffer(), to.buffer(), VkBufferCopy{a.offset(), to.offset() + d.readback_offset, d.bytes}});
    }
    if (!regions.empty()) {
      barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
      copy_grouped(regions);
    }
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
  }

  // The callers' HostBuffers: what the host wrote made visible to the device before the
  // submission, what the device wrote made visible to the host after it (no-ops where coherent).
  void flush_host_inputs() const {
    for (const auto& u : plan_.uploads)
      if (u.from_host) host_allocation(u.ref & kImport ? g_.imports[u.ref & ~kImport].host_memory : values_[u.ref].host, g_.ctx.get()).flush();
  }
  void invalidate_host_results() const {
    for (const auto& v : values_)
      if (v.host && v.source == gpu::graph::Source::op) host_allocation(v.host, g_.ctx.get()).invalidate();
  }

  // Submit once and wait on the timeline, for at most DeviceOptions::batch_timeout (the watchdog:
  // a hung GPU must not hang the caller). Past it, in_flight stays set and the next execute, or
  // the destructor, waits for it before the memory is reused.
  void submit_and_wait() {
    flush_host_inputs();
    g_.in_flight = g_.ctx->submit(cmd_);
    ExecuteStats& stats = g_.stats;
    stats.operations = ops_.size();
    stats.submissions = 1;
    stats.uploads = 1;
    stats.downloads = plan_.downloads_any() ? 1 : 0;
    stats.bytes_up = (plan_.table_end - plan_.staged_data) + plan_.data_up;
    stats.bytes_down = plan_.data_down;
    stats.host_bytes = plan_.host_bytes;
    auto& counters = g_.ctx->counters();
    counters.dispatches.fetch_add(stats.dispatches, std::memory_order_relaxed);
    counters.uploads.fetch_add(stats.uploads, std::memory_order_relaxed);
    counters.downloads.fetch_add(stats.downloads, std::memory_order_relaxed);
    counters.bytes_up.fetch_add(stats.bytes_up, std::memory_order_relaxed);
    counters.bytes_down.fetch_add(stats.bytes_down, std::memory_order_relaxed);
    if (!g_.ctx->wait(g_.in_flight, g_.watchdog())) {
      keep_buffers();  // the GPU may still use them: they go back to the pool only after it
      throw Error(ErrorCode::device_lost, "graph execute: the device did not complete it within " +
                                              std::to_string(g_.watchdog().count()) +
                                              " ms (watchdog: DeviceOptions::batch_timeout)");
    }
    g_.in_flight = 0;
    if (plan_.readback_bytes > 0) g_.readback.invalidate();
    invalidate_host_results();
  }

  // Imports are on the device now (their host copy is dropped); this execute's buffers are the
  // next one's to reuse, and the buffers it did not need are freed.
  void finish() {
    for (const auto& u : plan_.uploads)
      if (u.ref & kImport) {
        GpuCommandBatch::Impl::Imported& im = g_.imports[u.ref & ~kImport];
        im.uploaded = true;
        im.host = {};
        im.host_memory.reset();  // on the device now
      }
    g_.recycled.clear();
    keep_buffers();
  }

  // This execute's buffers become the graph's to reuse; settle() waits for in_flight first.
  void keep_buffers() {
    for (auto& a : held_)
      if (a) {
        const VkDeviceSize size = a.size();
        g_.recycled.emplace(size, std::move(a));
      }
  }

  GpuCommandBatch::Impl& g_;
  const Plan& plan_;
  std::span<const Node> ops_;
  std::span<const gpu::graph::Value> values_;  // the execute's values (HostBuffers of uploads and results)
  gpu::Kernels& kernels_;
  gpu::MemoryPool& memory_;
  std::vector<gpu::Allocation> held_;   // per Plan::buffers
  std::vector<VkPipeline> pipelines_;   // per Plan::steps
  gpu::CommandRecorder rec_;            // counts the dispatches (ExecuteStats::dispatches)
  VkCommandBuffer cmd_;                 // rec_'s, for the copies
};

}  // namespace

void GpuCommandBatch::Impl::run(const gpu::graph::Plan& plan, std::span<const Node> ops,
                                std::span<const gpu::graph::Value> values) {
  Recorder(*this, plan, ops, values).run();
}

}  // namespace gpubatch
