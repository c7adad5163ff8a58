#pragma once
// What a ragged batch is, before any memory or Vulkan object: which kernel groups it holds (one
// dispatch each; dot two), where each request's segment, blocks and result go, and how many bytes
// the batch's tables, inputs and results take. Pure: no Vulkan, no threads. The gpu layer
// (vulkan_batch_device.cpp) builds one per batch, in two steps around its own:
//
//   plan.group(requests)      groups by kernel: built-ins by op, chains by shape key, custom
//                             requests by kernel key; first appearance orders the groups, each
//                             keeps its requests in arrival order
//   (gpu) resolve kernels     a group whose kernel cannot be built gets Group::error
//   plan.lay_out(requests)    block counts, the byte layout and each request's output slot; the
//                             failed groups take no room (their requests' slots carry the error)
//
// and then writes the tables (place_segment() gives each segment's address-free fields and its
// block table entries), copies the inputs and records one dispatch per group that has no error.
//
// The completion contract: a request's result is OutputSlot::bytes at OutputSlot::offset of the
// batch's output bytes (states for interpolate, floats otherwise), unless it was written into
// its host_result (OutputSlot::host) or its group failed (OutputSlot::error).
//
// A BatchPlan is reused batch after batch: its vectors keep their capacity.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpubatch/ops.hpp"
#include "plan/batch_layout.hpp"
#include "plan/encoding.hpp"
#include "state_math.hpp"

namespace gpubatch::plan {

// The requests of one kernel: a built-in op, one chain shape (its fused kernel), or one custom
// kernel.
struct Group {
  Op op = Op::relu;
  std::string_view key;              // chain: the shape's key; custom: the kernel's key; else empty
  std::uint32_t representative = 0;  // the group's first request (index into the batch)
  std::uint32_t first_request = 0;   // into BatchPlan::order()
  std::uint32_t request_count = 0;
  std::uint32_t first_segment = 0;   // into the segment table (segments follow order())
  std::uint32_t first_block = 0;     // into the block table
  std::uint32_t block_count = 0;     // workgroups of its (first) dispatch
  bool needs_dot_final = false;      // dot with a request of more than one block: a second pass
  bool per_segment = false;          // a per_segment custom kernel: one invocation per request
  std::uint32_t chain_inputs = 0;    // chain: external inputs (x and the extra inputs)
  std::uint32_t chain_scalars = 0;   // chain: entries of each request's scalar table
  std::exception_ptr error;          // set: no dispatch, no room; every request of it fails
};

// Where one request's result lands in the batch's output bytes.
struct OutputSlot {
  std::size_t offset = 0;
  std::size_t bytes = 0;
  bool states = false;       // interpolate: bytes of states, else floats
  std::exception_ptr error;  // its group failed: take_result throws this
  bool host = false;         // written into the request's host_result: nothing to take
};

// The batch's bytes. Upload: the segment table, the block table, then the inputs (and a chain's
// address and scalar tables), each piece aligned to kDataAlignment. Output: the results, each
// aligned likewise, in segment order.
struct ByteLayout {
  std::size_t segments_bytes = 0;
  std::size_t blocks_bytes = 0;
  std::size_t input_bytes = 0;
  std::size_t upload_bytes = 0;   // segments_bytes + blocks_bytes + input_bytes
  std::size_t output_bytes = 0;
  std::size_t block_entries = 0;  // uint32 entries of the block table
  std::size_t scratch_floats = 0; // dot partials
};

// Items the kernel walks for one request: elements, layers, or words of 4 layers.
inline std::uint32_t work_items(const Request& r) {
  switch (r.op) {
    case Op::gradients: return static_cast<std::uint32_t>(r.states_a.size());
    case Op::interpolate: return static_cast<std::uint32_t>(r.states_a.size() / 4);
    default: return static_cast<std::uint32_t>(input_a(r).size());
  }
}

// Workgroups of its own one request needs: dot and matmul; element-wise requests share blocks
// that cover their group's concatenated items (0 here).
inline std::uint32_t blocks_of(const Request& r) {
  switch (r.op) {
    case Op::dot: return dot_blocks(input_a(r).size());
    case Op::matmul: return matmul_blocks(r.m, r.n);
    default: return 0;
  }
}

// Scalars an element-wise op takes in a fused kernel's scalar table (0 for any other op), and a
// chain step's (a custom step: one).
inline std::uint32_t op_scalars(Op op) noexcept {
  return static_cast<std::size_t>(op) < kOpCount && op_info(op).kind == OpKind::ew ? op_info(op).scalars : 0;
}
inline std::uint32_t step_scalars(const ChainStep& step) noexcept {
  return step.op == Op::custom ? 1 : op_scalars(step.op);
}

class BatchPlan {
 public:
  // Says why a request with a host buffer cannot run here (null: it can); its request then gets
  // a failed group of its own. `context` is passed through.
  using HostBufferCheck = std::exception_ptr (*)(const Request& request, const void* context);

  // Step 1: the groups and order(). Resets everything of the last batch.
  void group(std::span<const Request* const> requests, HostBufferCheck check = nullptr,
             const void* context = nullptr);
  // Step 2, after the caller set Group::error on the groups it cannot run: block counts, first
  // segment/block, the byte layout and the output slots. Throws Error(request_too_large) when a
  // group has 2^32 items or 2^31 blocks or more.
  void lay_out(std::span<const Request* const> requests);

  std::span<Group> groups() noexcept { return groups_; }
  std::span<const Group> groups() const noexcept { return groups_; }
  // Request indices, group after group.
  std::span<const std::uint32_t> order() const noexcept { return order_; }
  // The batch index of the j-th request of `g`.
  std::uint32_t request_of(const Group& g, std::uint32_t j) const noexcept { return order_[g.first_request + j]; }
  // By request index (valid after lay_out()).
  const std::vector<OutputSlot>& outputs() const noexcept { return outputs_; }
  const ByteLayout& layout() const noexcept { return layout_; }
  // Whether a group that runs reads its inputs in a way the bus serves badly, so that they are
  // better copied to device memory first: matmul reads each row of A and column of B once per
  // output tile; a per-segment custom kernel reads a request's elements one after another in one
  // invocation (a round trip each across the bus). Every other kernel streams its inputs, each
  // element once and many at a time, and reads host memory across the bus as fast as a copy would.
  bool prefers_device_memory() const noexcept {
    for (const Group& g : groups_)
      if (!g.error && (g.op == Op::matmul || g.per_segment)) return true;
    return false;
  }

 private:
  std::vector<Group> groups_;
  std::vector<std::uint32_t> order_;
  std::vector<std::uint32_t> group_of_;  // by request index
  std::vector<std::uint32_t> cursor_;    // by group, while sorting
  std::unordered_map<std::string_view, std::uint32_t> keyed_;  // chain / custom key -> group
  std::vector<OutputSlot> outputs_;
  ByteLayout layout_;
};

// Where the next segment of a group starts: its first item (element-wise) or block (dot, matmul).
struct SegmentCursor {
  std::uint32_t item = 0;
  std::uint32_t block = 0;
};

// The fields of the j-th segment of `g` (request `r`) that do not depend on addresses: start,
// len, p0, u0..u2; and its entries in the group's block table (`blocks`: the table from
// g.first_block), each the segment's index j. A per-segment group has no block table.
inline void place_segment(const Group& g, const Request& r, std::uint32_t j, SegmentCursor& at, SegmentRecord& s,
                          std::uint32_t* blocks) {
  s.len = work_items(r);
  s.p0 = r.scalar;
  if (g.per_segment) {
    s.start = j;  // one invocation per request
    return;
  }
  switch (r.op) {
    case Op::dot:
    case Op::matmul: {
      const std::uint32_t nb = blocks_of(r);
      s.start = at.block;  // first block of this segment; dot's partials go to scratch[block]
      if (r.op == Op::dot) s.u0 = nb;
      else s.u0 = r.m, s.u1 = r.k, s.u2 = r.n;
      for (std::uint32_t t = 0; t < nb; ++t) blocks[at.block + t] = j;
      at.block += nb;
      break;
    }
    default: {
      s.start = at.item;
      if (r.op == Op::interpolate) {
        s.u0 = r.mode == InterpolationMode::slerp ? 1u : 0u;
        s.u1 = static_cast<std::uint32_t>(detail::t_to_fixed16(r.scalar));
      } else {
        s.u0 = std::bit_cast<std::uint32_t>(r.scalar2);  // element-wise: the second scalar
      }
      // Each block's first item lies in this segment when it starts inside [item, item+len).
      const std::uint32_t end = at.item + s.len;
      for (std::uint32_t b = ceil_div(at.item, kWorkgroupSize); b * std::uint64_t{kWorkgroupSize} < end; ++b)
        blocks[b] = j;
      at.item = end;
    }
  }
}

}  // namespace gpubatch::plan
