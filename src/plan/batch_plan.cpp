#include "plan/batch_plan.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::plan {
namespace {

// The bytes one request's inputs take in the upload area (a chain's tables included).
std::size_t input_bytes_of(const Group& g, const Request& r) {
  std::size_t bytes = align_up(input_a(r).size() * 4, kDataAlignment) + align_up(input_b(r).size() * 4, kDataAlignment) +
                      align_up(r.states_a.size(), kDataAlignment) + align_up(r.states_b.size(), kDataAlignment);
  if (g.op == Op::chain) {
    for (const auto& in : r.inputs) bytes += align_up(in.size() * 4, kDataAlignment);
    bytes += align_up((g.chain_inputs + 1) * sizeof(std::uint64_t), kDataAlignment) +
             align_up(std::max<std::size_t>(g.chain_scalars, 1) * sizeof(float), kDataAlignment);
  }
  return bytes;
}

// A new group for `r` (request `index`): what its kernel's identity says about its layout.
Group new_group(const Request& r, std::uint32_t index, std::string_view key, std::exception_ptr error) {
  Group g;
  g.op = r.op;
  g.representative = index;
  g.error = std::move(error);
  if (g.error) return g;  // a group of its own that never runs
  g.key = key;
  if (r.op == Op::custom) g.per_segment = r.kernel->kind == KernelKind::per_segment;
  if (r.op == Op::chain) {
    // The fused kernel's external inputs: x, then the extra inputs; each step's scalars in turn.
    g.chain_inputs = 1 + r.chain->inputs();
    for (const ChainStep& step : r.chain->steps()) g.chain_scalars += step_scalars(step);
  }
  return g;
}

}  // namespace

void BatchPlan::group(std::span<const Request* const> requests, HostBufferCheck check, const void* context) {
  const auto n = static_cast<std::uint32_t>(requests.size());
  groups_.clear();
  keyed_.clear();
  group_of_.resize(n);
  outputs_.clear();
  layout_ = {};
  std::array<std::uint32_t, kOpCount> builtin_group;
  builtin_group.fill(UINT32_MAX);
  for (std::uint32_t i = 0; i < n; ++i) {
    const Request& r = *requests[i];
    std::uint32_t* slot;
    std::uint32_t foreign = UINT32_MAX;  // a group of its own, failed
    std::string_view key;
    const std::exception_ptr misuse = check && uses_host_buffers(r) ? check(r, context) : nullptr;
    if (misuse) {
      slot = &foreign;
    } else if (r.op == Op::chain || r.op == Op::custom) {
      key = r.op == Op::chain ? std::string_view(r.chain->key()) : std::string_view(r.kernel->key);
      slot = &keyed_.try_emplace(key, UINT32_MAX).first->second;
    } else {
      slot = &builtin_group[static_cast<std::size_t>(r.op)];
    }
    if (*slot == UINT32_MAX) {
      *slot = static_cast<std::uint32_t>(groups_.size());
      groups_.push_back(new_group(r, i, key, misuse));
    }
    group_of_[i] = *slot;
    ++groups_[*slot].request_count;
  }
  // A stable counting sort: each group's requests in arrival order, groups one after another.
  std::uint32_t first = 0;
  for (Group& g : groups_) {
    g.first_request = g.first_segment = first;
    first += g.request_count;
  }
  order_.resize(n);
  cursor_.resize(groups_.size());  // each group's next place in order_
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) cursor_[gi] = groups_[gi].first_request;
  for (std::uint32_t i = 0; i < n; ++i) order_[cursor_[group_of_[i]]++] = i;
}

void BatchPlan::lay_out(std::span<const Request* const> requests) {
  ByteLayout& l = layout_;
  l = {};
  outputs_.assign(requests.size(), OutputSlot{});
  for (Group& g : groups_) {
    if (g.error) {
      for (std::uint32_t j = 0; j < g.request_count; ++j) outputs_[request_of(g, j)].error = g.error;
      continue;
    }
    g.first_block = static_cast<std::uint32_t>(l.block_entries);
    g.needs_dot_final = false;
    std::uint64_t blocks = 0, items = 0;
    for (std::uint32_t j = 0; j < g.request_count; ++j) {
      const std::uint32_t index = request_of(g, j);
      const Request& r = *requests[index];
      const std::uint32_t own_blocks = blocks_of(r);
      blocks += own_blocks;
      items += work_items(r);
      l.input_bytes += input_bytes_of(g, r);
      const std::size_t out_bytes = output_bytes(r);
      outputs_[index] = {l.output_bytes, out_bytes, r.op == Op::interpolate, nullptr, r.host_result != nullptr};
      l.output_bytes += align_up(out_bytes, kDataAlignment);
      if (g.op == Op::dot && own_blocks > 1) g.needs_dot_final = true;
    }
    if (g.per_segment) blocks = ceil_div(g.request_count, kWorkgroupSize);
    else if (g.op != Op::dot && g.op != Op::matmul) blocks = ceil_div(items, kWorkgroupSize);
    if (items >= (std::uint64_t{1} << 32) || blocks >= (std::uint64_t{1} << 31))
      throw Error(ErrorCode::request_too_large, "a batch's " + describe_op(*requests[g.representative]) +
                                                    " group exceeds 2^32 elements");
    g.block_count = static_cast<std::uint32_t>(blocks);
    if (g.op == Op::dot) l.scratch_floats += blocks;
    if (!g.per_segment) l.block_entries += blocks;  // one-invocation-per-request kernels use none
  }
  l.segments_bytes = align_up(requests.size() * sizeof(SegmentRecord), kDataAlignment);
  l.blocks_bytes = align_up(l.block_entries * 4, kDataAlignment);
  l.upload_bytes = l.segments_bytes + l.blocks_bytes + l.input_bytes;
}

}  // namespace gpubatch::plan
