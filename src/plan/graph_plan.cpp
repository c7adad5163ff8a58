#include "plan/graph_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "plan/batch_layout.hpp"
#include "plan/encoding.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::gpu::graph {
namespace {

using plan::align_up;
using plan::ceil_div;
using plan::dot_blocks;
using plan::kDataAlignment;
using plan::kWorkgroupSize;
using plan::matmul_blocks;
using plan::SegmentRecord;

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// Size classes for recycling: a buffer serves requests from half its size up to its size.
bool fits(std::size_t have, std::size_t want) { return have >= want && have / 2 <= want; }

// The planner's working state; each stage below fills part of `plan`, in this order.
class Planner {
 public:
  explicit Planner(const Input& in) : in_(in), recycled_(in.recycled.begin(), in.recycled.end()) {
    plan_.values.resize(in.values.size());
  }

  Plan run() {
    mark_downloads();
    form_steps();
    find_lifetimes();
    place_in_buffers();
    lay_out_tables();
    lay_out_transfers();
    return std::move(plan_);
  }

 private:
  static constexpr std::int64_t kNever = -2;

  // 1. A result is downloaded when nothing consumes it, or when keep() asked for it.
  void mark_downloads() {
    std::vector<std::uint32_t> uses(in_.values.size(), 0);
    for (const Node& n : in_.nodes)
      for (std::uint32_t i = 0; i < n.arity; ++i)
        if (!(n.in[i] & kImport)) ++uses[n.in[i]];
    for (std::size_t v = 0; v < in_.values.size(); ++v)
      plan_.values[v].downloaded =
          in_.values[v].source == Source::op && (in_.values[v].keep || in_.values[v].host || uses[v] == 0);
  }

  // 2. Steps: runs of fusable operations of one length become one fused dispatch.
  void form_steps() {
    auto& steps = plan_.steps;
    step_of_.resize(in_.nodes.size());
    for (std::uint32_t i = 0; i < in_.nodes.size(); ++i) {
      const Node& n = in_.nodes[i];
      if (in_.fuse && n.fusable() && !steps.empty() && joins(steps.back(), n)) {
        steps.back().kind = StepKind::fused;
        ++steps.back().node_count;
        step_of_[i] = static_cast<std::uint32_t>(steps.size() - 1);
        continue;
      }
      Step s;
      s.first_node = i;
      if (n.kernel) s.kind = n.kernel->kind == KernelKind::elementwise ? StepKind::custom_elementwise : StepKind::custom_segment;
      else if (n.op == Op::dot) s.kind = StepKind::dot;
      else if (n.op == Op::matmul) s.kind = StepKind::matmul;
      else s.kind = StepKind::elementwise;
      step_of_[i] = static_cast<std::uint32_t>(steps.size());
      steps.push_back(std::move(s));
    }
  }

  // Whether the fusable node `n` can join the step before it: an element-wise step (or group) of
  // the same length with room left.
  bool joins(const Step& last, const Node& n) const {
    const Node& first = in_.nodes[last.first_node];
    return (last.kind == StepKind::fused || last.kind == StepKind::elementwise ||
            last.kind == StepKind::custom_elementwise) &&
           first.fusable() && in_.values[first.out].floats == in_.values[n.out].floats &&
           last.node_count < in_.max_fused_ops;
  }

  // 3. Which values need memory, and until which step. A value consumed only inside its own fused
  //    group lives in registers; uploads nobody consumes are not uploaded.
  void find_lifetimes() {
    std::vector<std::int64_t> def_step(in_.values.size(), -1);
    last_use_.assign(in_.values.size(), kNever);
    materialized_.assign(in_.values.size(), false);
    for (std::uint32_t i = 0; i < in_.nodes.size(); ++i) def_step[in_.nodes[i].out] = step_of_[i];
    for (std::uint32_t i = 0; i < in_.nodes.size(); ++i)
      for (std::uint32_t j = 0; j < in_.nodes[i].arity; ++j) {
        const std::uint32_t r = in_.nodes[i].in[j];
        if (r & kImport) continue;
        if (def_step[r] != step_of_[i]) {
          materialized_[r] = true;
          last_use_[r] = std::max<std::int64_t>(last_use_[r], step_of_[i]);
        }
      }
    for (std::size_t v = 0; v < in_.values.size(); ++v)
      if (plan_.values[v].downloaded) materialized_[v] = true;
  }

  // A buffer for value `v`: one given back earlier in this execute, else one of the last
  // execute's, else a new one (the same choices, in the same order, as MemoryPool sizes).
  void assign(std::size_t v) {
    const std::size_t bytes = align_up(std::size_t{in_.values[v].floats} * sizeof(float), kBufferAlignment);
    if (auto it = free_now_.lower_bound(bytes); it != free_now_.end() && fits(it->first, bytes)) {
      plan_.values[v].buffer = it->second;
      free_now_.erase(it);
      return;
    }
    Buffer b{bytes, false};
    if (auto it = recycled_.lower_bound(bytes); it != recycled_.end() && fits(*it, bytes)) {
      b = {*it, true};
      recycled_.erase(it);
    }
    plan_.values[v].buffer = plan_.buffers.size();
    plan_.buffers.push_back(b);
  }

  // Device buffers: taken in step order, given back after their last reader, so a chain's
  // intermediates ping-pong between a few buffers. A step's outputs never share a buffer with its
  // inputs (they are given back only after it). With direct transfers, uploads stay in staging
  // memory and downloaded results go straight to readback.
  void place_in_buffers() {
    const auto& values = in_.values;
    for (std::size_t v = 0; v < values.size(); ++v)
      if (values[v].source == Source::upload && materialized_[v] && !in_.direct) assign(v);
    std::vector<std::vector<std::uint32_t>> release_after(plan_.steps.size());
    for (std::size_t v = 0; v < values.size(); ++v)
      if (materialized_[v] && !plan_.values[v].downloaded && last_use_[v] >= 0)
        release_after[static_cast<std::size_t>(last_use_[v])].push_back(static_cast<std::uint32_t>(v));
    std::size_t i = 0;
    for (std::size_t s = 0; s < plan_.steps.size(); ++s) {
      for (; i < in_.nodes.size() && step_of_[i] == s; ++i) {
        const std::uint32_t out = in_.nodes[i].out;
        if (materialized_[out] && !(in_.direct && plan_.values[out].downloaded)) assign(out);
      }
      for (std::uint32_t v : release_after[s])
        if (const std::size_t b = plan_.values[v].buffer; b != kNone)  // else: staged
          free_now_.emplace(plan_.buffers[b].bytes, b);
    }
  }

  std::size_t reserve(std::size_t bytes) {
    const std::size_t at = plan_.table_end;
    plan_.table_end += align_up(bytes, kDataAlignment);
    return at;
  }

  // 4. Each step's workgroups and tables in staging, after the upload() data.
  void lay_out_tables() {
    plan_.staged_data = in_.staged_data;
    plan_.table_end = in_.staged_data;
    for (Step& s : plan_.steps) {
      const Node& n = in_.nodes[s.first_node];
      const std::uint32_t len =
          s.kind == StepKind::matmul || s.kind == StepKind::dot ? floats_of(in_, n.in[0]) : in_.values[n.out].floats;
      s.len = s.kind == StepKind::fused ? in_.values[n.out].floats : floats_of(in_, n.in[0]);
      s.segment_offset = reserve(sizeof(SegmentRecord));
      switch (s.kind) {
        case StepKind::elementwise:
        case StepKind::custom_elementwise:
          s.blocks = ceil_div(len, kWorkgroupSize);
          break;
        case StepKind::custom_segment:
          s.blocks = 1;
          break;
        case StepKind::dot:
          s.blocks = dot_blocks(len);
          s.dot_final = s.blocks > 1;
          s.scratch_offset = plan_.scratch_floats;
          if (s.dot_final) plan_.scratch_floats += s.blocks;
          break;
        case StepKind::matmul:
          s.blocks = matmul_blocks(n.m, n.n);
          break;
        case StepKind::fused:
          shape_fused(s);
          s.blocks = ceil_div(len, kWorkgroupSize);
          s.io_offset = reserve((s.inputs.size() + s.outputs.size()) * sizeof(std::uint64_t));
          s.scalar_offset = reserve(std::max<std::size_t>(s.shape.scalars, 1) * sizeof(float));
          break;
      }
      plan_.max_blocks = std::max<std::size_t>(plan_.max_blocks, s.blocks);
    }
    plan_.zeros_offset = reserve(plan_.max_blocks * sizeof(std::uint32_t));
  }

  // A fused group's kernel shape: values computed inside the group are registers; the rest are
  // external inputs, each loaded once. Values needed outside the group are stored.
  void shape_fused(Step& s) const {
    std::map<std::uint32_t, std::int32_t> local, external;
    FusedShape& shape = s.shape;
    for (std::uint32_t i = s.first_node; i < s.first_node + s.node_count; ++i) {
      const Node& node = in_.nodes[i];
      FusedStep fs;
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
      const std::uint32_t n_scalars = node.kernel ? 1 : scalars(node.op);
      if (n_scalars > 0) fs.scalar = static_cast<std::int32_t>(shape.scalars);
      shape.scalars += n_scalars;
      const auto index = static_cast<std::int32_t>(shape.steps.size());
      local[node.out] = index;
      shape.steps.push_back(std::move(fs));
      if (materialized_[node.out]) {
        shape.outputs.push_back(static_cast<std::uint32_t>(index));
        s.outputs.push_back(node.out);
      }
    }
    shape.inputs = static_cast<std::uint32_t>(s.inputs.size());
    s.fused_key = fused_key(shape);
  }

  // 5. Uploads (their data is staged already, or in a HostBuffer), then imports not yet on the
  //    device (their data is staged after the tables, or in a HostBuffer), then the readback
  //    layout (results delivered into HostBuffers take none).
  void lay_out_transfers() {
    plan_.staged_bytes = plan_.table_end;
    for (std::size_t v = 0; v < in_.values.size(); ++v) {
      const Value& value = in_.values[v];
      if (value.source != Source::upload || !materialized_[v]) continue;
      Placement& p = plan_.values[v];
      const std::size_t bytes = value.floats * sizeof(float);
      if (value.host) {
        p.host = p.buffer == kNone;
        plan_.uploads.push_back({static_cast<std::uint32_t>(v), bytes, 0, p.buffer, true});
        plan_.host_bytes += bytes;
        continue;
      }
      p.staged_at = value.staged_offset;
      plan_.uploads.push_back({static_cast<std::uint32_t>(v), bytes, value.staged_offset, p.buffer, false});
    }
    for (std::size_t i = 0; i < in_.imports.size(); ++i)
      if (!in_.imports[i].uploaded) {
        const std::size_t bytes = in_.imports[i].floats * sizeof(float);
        const bool host = in_.imports[i].host;
        plan_.uploads.push_back({kImport | static_cast<std::uint32_t>(i), bytes, host ? 0 : plan_.staged_bytes, kNone, host});
        if (host) plan_.host_bytes += bytes;
        else plan_.staged_bytes += align_up(bytes, kDataAlignment);
      }
    for (const Upload& u : plan_.uploads) plan_.data_up += u.bytes;
    for (std::size_t v = 0; v < in_.values.size(); ++v) lay_out_download(static_cast<std::uint32_t>(v));
  }

  void lay_out_download(std::uint32_t v) {
    Placement& p = plan_.values[v];
    if (!p.downloaded) return;
    const std::size_t bytes = in_.values[v].floats * sizeof(float);
    plan_.data_down += bytes;
    const bool host = in_.values[v].host != nullptr;
    if (host) {
      plan_.host_bytes += bytes;
      p.host = p.buffer == kNone;
    } else {
      p.readback_offset = plan_.readback_bytes;
      plan_.readback_bytes += align_up(bytes, kDataAlignment);
    }
    if (p.buffer != kNone) plan_.downloads.push_back({p.buffer, host ? 0 : p.readback_offset, bytes, v, host});
  }

  const Input& in_;
  Plan plan_;
  std::vector<std::uint32_t> step_of_;  // per node
  std::vector<std::int64_t> last_use_;  // per value: the last step that reads it from memory
  std::vector<bool> materialized_;      // per value: needs memory (not only registers)
  std::multimap<std::size_t, std::size_t> free_now_;  // bytes -> buffer given back in this execute
  std::multiset<std::size_t> recycled_;
};

}  // namespace

std::size_t Plan::device_bytes() const {
  std::size_t total = 0;
  for (const Buffer& b : buffers) total += b.bytes;
  return total;
}

bool Plan::any_dot_final() const {
  return std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.dot_final; });
}

std::uint32_t floats_of(const Input& in, std::uint32_t ref) {
  return ref & kImport ? in.imports[ref & ~kImport].floats : in.values[ref].floats;
}

Plan make_plan(const Input& in) { return Planner(in).run(); }

void check_same_length(std::string_view what, std::uint32_t a, std::uint32_t b) {
  if (a != b)
    invalid(std::string(what) + ": size mismatch: a has " + std::to_string(a) + " floats, b has " + std::to_string(b));
}

void check_matmul_shape(std::uint32_t a_floats, std::uint32_t b_floats, std::uint32_t m, std::uint32_t k,
                        std::uint32_t n) {
  const std::string dims = std::to_string(m) + "x" + std::to_string(k) + " * " + std::to_string(k) + "x" + std::to_string(n);
  if (m == 0 || k == 0 || n == 0) invalid("matmul: dimensions " + dims + " include a zero");
  if (a_floats != std::uint64_t{m} * k)
    invalid("matmul: size mismatch: A has " + std::to_string(a_floats) + " floats, M x K = " +
            std::to_string(std::uint64_t{m} * k));
  if (b_floats != std::uint64_t{k} * n)
    invalid("matmul: size mismatch: B has " + std::to_string(b_floats) + " floats, K x N = " +
            std::to_string(std::uint64_t{k} * n));
}

}  // namespace gpubatch::gpu::graph
