// The plan of a ragged batch (src/plan/batch_plan.*), without a device: grouping, block counts,
// byte layout, output slots, the address-free segment fields and the 2^32 refusal.
#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/host_buffer.hpp"
#include "plan/batch_plan.hpp"

using namespace gpubatch;
using plan::BatchPlan;

namespace {

std::vector<float> floats(std::size_t n) { return std::vector<float>(n, 1.0f); }

// Plans `requests` (no failed group).
struct Planned {
  std::vector<Request> requests;
  std::vector<const Request*> pointers;
  BatchPlan plan;

  explicit Planned(std::vector<Request> rs) : requests(std::move(rs)) {
    for (const Request& r : requests) pointers.push_back(&r);
    plan.group(pointers);
    plan.lay_out(pointers);
  }
  std::vector<std::uint32_t> order() const { return {plan.order().begin(), plan.order().end()}; }
};

KernelHandle kernel(std::string key, KernelKind kind) {
  auto k = std::make_shared<CustomKernelInfo>();
  k->name = "k_" + key;
  k->key = std::move(key);
  k->kind = kind;
  return k;
}

// Host memory that claims `n` floats and owns none: the plan only counts them.
std::shared_ptr<detail::HostMemory> pretend_host_floats(std::size_t n) {
  auto m = std::make_shared<detail::HostMemory>();
  m->floats = n;
  return m;
}

TEST(BatchPlan, GroupsInOrderOfFirstAppearanceWithRequestsInArrivalOrder) {
  Planned p({Request::relu(floats(4)), Request::scale(floats(4), 2.0f), Request::relu(floats(4)),
             Request::add(floats(4), floats(4)), Request::scale(floats(4), 3.0f), Request::relu(floats(4))});
  const auto groups = p.plan.groups();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].op, Op::relu);
  EXPECT_EQ(groups[1].op, Op::scale);
  EXPECT_EQ(groups[2].op, Op::add);
  EXPECT_EQ(p.order(), (std::vector<std::uint32_t>{0, 2, 5, 1, 4, 3}));
  EXPECT_EQ(groups[0].request_count, 3u);
  EXPECT_EQ(groups[1].request_count, 2u);
  EXPECT_EQ(groups[2].request_count, 1u);
  EXPECT_EQ(groups[1].first_request, 3u);
  EXPECT_EQ(groups[1].first_segment, 3u);
  EXPECT_EQ(groups[2].first_segment, 5u);
  EXPECT_EQ(groups[1].representative, 1u);
  EXPECT_EQ(groups[2].representative, 3u);
  EXPECT_EQ(p.plan.request_of(groups[1], 1), 4u);
}

TEST(BatchPlan, APlanReusedForAnotherBatchForgetsTheLastOne) {
  Planned p({Request::relu(floats(4)), Request::scale(floats(4), 2.0f), Request::dot(floats(4), floats(4))});
  std::vector<Request> next{Request::add(floats(8), floats(8)), Request::add(floats(8), floats(8))};
  std::vector<const Request*> ptrs{&next[0], &next[1]};
  p.plan.group(ptrs);
  p.plan.lay_out(ptrs);
  ASSERT_EQ(p.plan.groups().size(), 1u);
  EXPECT_EQ(p.plan.groups()[0].op, Op::add);
  EXPECT_EQ(p.plan.groups()[0].request_count, 2u);
  EXPECT_EQ(p.plan.order().size(), 2u);
  EXPECT_EQ(p.plan.outputs().size(), 2u);
  EXPECT_EQ(p.plan.layout().scratch_floats, 0u);  // the dot of the last batch is gone
  EXPECT_EQ(p.plan.layout().output_bytes, 2u * 32u);
}

TEST(BatchPlan, ElementwiseGroupsShareBlocksOverTheirConcatenatedItems) {
  // relu: 300 + 10 items -> 2 blocks; add: 600 items -> 3 blocks, after relu's.
  Planned p({Request::relu(floats(300)), Request::add(floats(600), floats(600)), Request::relu(floats(10))});
  const auto groups = p.plan.groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].block_count, 2u);
  EXPECT_EQ(groups[0].first_block, 0u);
  EXPECT_EQ(groups[1].block_count, 3u);
  EXPECT_EQ(groups[1].first_block, 2u);
  EXPECT_EQ(p.plan.layout().block_entries, 5u);
  EXPECT_EQ(p.plan.layout().scratch_floats, 0u);
  EXPECT_FALSE(groups[0].needs_dot_final);

  // Segment fields and block table: each block belongs to the segment its first item lies in.
  std::vector<std::uint32_t> blocks(2, 99);
  plan::SegmentCursor at;
  plan::SegmentRecord s0, s1;
  plan::place_segment(groups[0], p.requests[0], 0, at, s0, blocks.data());
  plan::place_segment(groups[0], p.requests[2], 1, at, s1, blocks.data());
  EXPECT_EQ(s0.start, 0u);
  EXPECT_EQ(s0.len, 300u);
  EXPECT_EQ(s1.start, 300u);
  EXPECT_EQ(s1.len, 10u);
  EXPECT_EQ(blocks, (std::vector<std::uint32_t>{0, 0}));  // block 1 starts at item 256 < 300
  EXPECT_EQ(at.item, 310u);
}

TEST(BatchPlan, SecondScalarGoesToU0) {
  Planned p({Request::clamp(floats(4), -1.0f, 2.5f)});
  std::uint32_t blocks[1] = {99};
  plan::SegmentCursor at;
  plan::SegmentRecord s;
  plan::place_segment(p.plan.groups()[0], p.requests[0], 0, at, s, blocks);
  EXPECT_EQ(s.p0, -1.0f);
  EXPECT_EQ(s.u0, std::bit_cast<std::uint32_t>(2.5f));
  EXPECT_EQ(blocks[0], 0u);
}

TEST(BatchPlan, DotBlocksScratchAndTheFinalPass) {
  // 1000 elements: 1 block of 1024; 1025: 2 blocks -> the partials need dot_final.
  Planned p({Request::dot(floats(1000), floats(1000)), Request::dot(floats(1025), floats(1025))});
  const plan::Group& g = p.plan.groups()[0];
  EXPECT_EQ(g.block_count, 3u);
  EXPECT_TRUE(g.needs_dot_final);
  EXPECT_EQ(p.plan.layout().scratch_floats, 3u);
  EXPECT_EQ(p.plan.layout().block_entries, 3u);

  std::vector<std::uint32_t> blocks(3, 99);
  plan::SegmentCursor at;
  plan::SegmentRecord s0, s1;
  plan::place_segment(g, p.requests[0], 0, at, s0, blocks.data());
  plan::place_segment(g, p.requests[1], 1, at, s1, blocks.data());
  EXPECT_EQ(s0.start, 0u);
  EXPECT_EQ(s0.u0, 1u);
  EXPECT_EQ(s1.start, 1u);
  EXPECT_EQ(s1.u0, 2u);
  EXPECT_EQ(blocks, (std::vector<std::uint32_t>{0, 1, 1}));

  Planned single({Request::dot(floats(1024), floats(1024)), Request::dot(floats(3), floats(3))});
  EXPECT_FALSE(single.plan.groups()[0].needs_dot_final);  // every request fits one block
  EXPECT_EQ(single.plan.groups()[0].block_count, 2u);
}

TEST(BatchPlan, MatmulTilesAndDimensions) {
  // 20 x 3 times 3 x 33: 2 x 3 tiles of 16 x 16.
  Planned p({Request::matmul(floats(60), floats(99), 20, 3, 33), Request::relu(floats(5))});
  const plan::Group& g = p.plan.groups()[0];
  EXPECT_EQ(g.block_count, 6u);
  EXPECT_EQ(p.plan.groups()[1].first_block, 6u);
  EXPECT_EQ(p.plan.layout().scratch_floats, 0u);
  EXPECT_EQ(p.plan.outputs()[0].bytes, 20u * 33u * 4u);

  std::vector<std::uint32_t> blocks(6, 99);
  plan::SegmentCursor at;
  plan::SegmentRecord s;
  plan::place_segment(g, p.requests[0], 0, at, s, blocks.data());
  EXPECT_EQ(s.u0, 20u);
  EXPECT_EQ(s.u1, 3u);
  EXPECT_EQ(s.u2, 33u);
  EXPECT_EQ(blocks, std::vector<std::uint32_t>(6, 0));
}

TEST(BatchPlan, CustomKernelsGroupByKeyAndPerSegmentOnesUseNoBlockTable) {
  const KernelHandle per_segment = kernel("sum", KernelKind::per_segment);
  const KernelHandle same_key = kernel("sum", KernelKind::per_segment);  // another handle, one kernel
  const KernelHandle elementwise = kernel("cube", KernelKind::elementwise);
  std::vector<Request> rs;
  for (int i = 0; i < 300; ++i) rs.push_back(Request::custom(i % 2 ? same_key : per_segment, floats(4)));
  rs.push_back(Request::custom(elementwise, floats(600)));
  rs.push_back(Request::relu(floats(4)));
  Planned p(std::move(rs));
  const auto groups = p.plan.groups();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].key, "sum");
  EXPECT_TRUE(groups[0].per_segment);
  EXPECT_EQ(groups[0].request_count, 300u);
  EXPECT_EQ(groups[0].block_count, 2u);  // one invocation per request: ceil(300 / 256)
  EXPECT_EQ(groups[1].key, "cube");
  EXPECT_FALSE(groups[1].per_segment);
  EXPECT_EQ(groups[1].first_block, 0u);  // the per-segment group took no entries
  EXPECT_EQ(groups[1].block_count, 3u);
  EXPECT_EQ(groups[2].first_block, 3u);
  EXPECT_EQ(p.plan.layout().block_entries, 4u);

  plan::SegmentCursor at;
  plan::SegmentRecord s;
  plan::place_segment(groups[0], p.requests[p.plan.request_of(groups[0], 7)], 7, at, s, nullptr);
  EXPECT_EQ(s.start, 7u);
  EXPECT_EQ(s.len, 4u);
}

TEST(BatchPlan, ChainsGroupByShapeNotByScalars) {
  Planned p({chain(floats(8)).relu().scale(2.0f).add(floats(8)), chain(floats(8)).scale(3.0f).relu(),
             chain(floats(16)).relu().scale(5.0f).add(floats(16)), Request::relu(floats(8))});
  const auto groups = p.plan.groups();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].op, Op::chain);
  EXPECT_EQ(groups[0].request_count, 2u);
  EXPECT_EQ(p.order()[1], 2u);
  EXPECT_EQ(groups[0].key, p.requests[0].chain->key());
  EXPECT_NE(groups[0].key, groups[1].key);
  EXPECT_EQ(groups[0].chain_inputs, 2u);   // x and add's y
  EXPECT_EQ(groups[0].chain_scalars, 1u);  // scale's factor
  EXPECT_EQ(groups[1].chain_inputs, 1u);
  EXPECT_EQ(groups[0].block_count, 1u);    // 24 items

  // Request 0: x 32 + y 32 + address table (3 x 8 -> 32) + scalar table (16) = 112 bytes;
  // request 2: 64 + 64 + 32 + 16 = 176; request 1: 32 + 16 (two addresses) + 16 (one scalar,
  // for none) = 64; relu: 32.
  EXPECT_EQ(p.plan.layout().input_bytes, 112u + 176u + 64u + 32u);
}

TEST(BatchPlan, ByteLayoutIsAlignedAndOutputsFollowTheSegments) {
  Planned p({Request::relu(floats(5)), Request::add(floats(3), floats(3)), Request::relu(floats(1)),
             Request::dot(floats(7), floats(7))});
  const plan::ByteLayout& l = p.plan.layout();
  EXPECT_EQ(l.segments_bytes, 4u * sizeof(plan::SegmentRecord));  // 192, a multiple of 16
  EXPECT_EQ(l.block_entries, 3u);                                 // relu 1, add 1, dot 1
  EXPECT_EQ(l.blocks_bytes, 16u);                                 // 12 rounded up
  EXPECT_EQ(l.input_bytes, 32u + 16u + 16u + 16u + 32u + 32u);    // 5, 1 | 3, 3 | 7, 7 floats
  EXPECT_EQ(l.upload_bytes, l.segments_bytes + l.blocks_bytes + l.input_bytes);
  EXPECT_EQ(l.scratch_floats, 1u);
  // Segment order: relu(5), relu(1), add, dot.
  const auto& out = p.plan.outputs();
  EXPECT_EQ(out[0].offset, 0u);
  EXPECT_EQ(out[0].bytes, 20u);
  EXPECT_EQ(out[2].offset, 32u);
  EXPECT_EQ(out[2].bytes, 4u);
  EXPECT_EQ(out[1].offset, 48u);
  EXPECT_EQ(out[1].bytes, 12u);
  EXPECT_EQ(out[3].offset, 64u);
  EXPECT_EQ(out[3].bytes, 4u);
  EXPECT_EQ(l.output_bytes, 80u);
  for (const plan::OutputSlot& o : out) {
    EXPECT_EQ(o.offset % plan::kDataAlignment, 0u);
    EXPECT_FALSE(o.states);
    EXPECT_FALSE(o.host);
    EXPECT_FALSE(o.error);
  }

  Planned odd({Request::relu(floats(1))});  // one 48-byte segment rounds up to 48 (a multiple of 16)
  EXPECT_EQ(odd.plan.layout().segments_bytes, 48u);
  EXPECT_EQ(odd.plan.layout().blocks_bytes, 16u);
}

TEST(BatchPlan, InterpolateOutputsStatesAndEncodesModeAndT) {
  const std::vector<std::uint8_t> states(32, 0);  // 2 states of 16 layers: 8 words of 4 layers
  Planned p({Request::interpolate(states, states, 0.25f, InterpolationMode::slerp)});
  const plan::OutputSlot& o = p.plan.outputs()[0];
  EXPECT_TRUE(o.states);
  EXPECT_EQ(o.bytes, 32u);
  std::uint32_t blocks[1] = {99};
  plan::SegmentCursor at;
  plan::SegmentRecord s;
  plan::place_segment(p.plan.groups()[0], p.requests[0], 0, at, s, blocks);
  EXPECT_EQ(s.len, 8u);
  EXPECT_EQ(s.u0, 1u);
  EXPECT_EQ(s.u1, 16384u);  // 0.25 in 16.16 fixed point
}

TEST(BatchPlan, AGroupMarkedFailedTakesNoRoomAndItsRequestsCarryTheError) {
  std::vector<Request> rs{Request::relu(floats(300)), Request::dot(floats(2000), floats(2000)),
                          Request::relu(floats(4)), Request::add(floats(4), floats(4))};
  std::vector<const Request*> ptrs;
  for (const Request& r : rs) ptrs.push_back(&r);
  BatchPlan plan;
  plan.group(ptrs);
  const auto error = std::make_exception_ptr(Error(ErrorCode::compile_failed, "no kernel"));
  plan.groups()[1].error = error;  // the dot group, as the gpu layer marks one it cannot build
  plan.lay_out(ptrs);
  EXPECT_EQ(plan.outputs()[1].error, error);
  EXPECT_FALSE(plan.outputs()[0].error);
  EXPECT_EQ(plan.groups()[2].first_block, 2u);  // after relu's 2 blocks; none for the dot
  EXPECT_EQ(plan.layout().scratch_floats, 0u);
  EXPECT_EQ(plan.layout().input_bytes, 1200u + 16u + 16u + 16u);
  EXPECT_EQ(plan.outputs()[3].offset, 1200u + 16u);
  EXPECT_EQ(plan.layout().output_bytes, 1200u + 16u + 16u);
  EXPECT_EQ(plan.layout().segments_bytes, 4u * 48u);  // every request keeps its segment
}

TEST(BatchPlan, HostBufferCheckPutsARefusedRequestInAFailedGroupOfItsOwn) {
  std::vector<Request> rs{Request::relu(floats(4)), Request::relu(floats(0)), Request::relu(floats(4))};
  rs[1].host_a = pretend_host_floats(4);
  std::vector<const Request*> ptrs;
  for (const Request& r : rs) ptrs.push_back(&r);
  BatchPlan plan;
  int checked = 0;
  plan.group(
      ptrs,
      [](const Request&, const void* context) -> std::exception_ptr {
        ++*static_cast<int*>(const_cast<void*>(context));
        return std::make_exception_ptr(Error(ErrorCode::invalid_argument, "another device's buffer"));
      },
      &checked);
  plan.lay_out(ptrs);
  EXPECT_EQ(checked, 1);  // only requests with a host buffer are checked
  ASSERT_EQ(plan.groups().size(), 2u);
  EXPECT_EQ(plan.groups()[0].request_count, 2u);
  EXPECT_TRUE(plan.groups()[1].error);
  EXPECT_EQ(plan.groups()[1].representative, 1u);
  EXPECT_TRUE(plan.outputs()[1].error);
  EXPECT_EQ(plan.outputs()[2].offset, 16u);
}

TEST(BatchPlan, HostResultIsMarked) {
  std::vector<Request> rs{Request::relu(floats(4)), Request::relu(floats(4))};
  rs[0].host_result = pretend_host_floats(4);
  Planned p(std::move(rs));
  EXPECT_TRUE(p.plan.outputs()[0].host);
  EXPECT_FALSE(p.plan.outputs()[1].host);
  EXPECT_EQ(p.plan.outputs()[1].offset, 16u);  // it still has its slot in the output bytes
}

// lay_out() refuses the batch with request_too_large and exactly this message.
void expect_too_large(BatchPlan& plan, const std::vector<const Request*>& ptrs, const std::string& message) {
  try {
    plan.lay_out(ptrs);
    ADD_FAILURE() << "expected request_too_large";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::request_too_large);
    EXPECT_EQ(std::string(e.message()), message);
  }
}

TEST(BatchPlan, AGroupOf2To32ElementsIsRefused) {
  // Two requests of 2^31 floats each (counted, never touched).
  std::vector<Request> rs(2);
  for (Request& r : rs) {
    r.op = Op::relu;
    r.host_a = pretend_host_floats(std::size_t{1} << 31);
  }
  std::vector<const Request*> ptrs{&rs[0], &rs[1]};
  BatchPlan plan;
  plan.group(ptrs);
  expect_too_large(plan, ptrs, "a batch's relu request group exceeds 2^32 elements");

  // One fewer element fits.
  rs[1].host_a = pretend_host_floats((std::size_t{1} << 31) - 1);
  plan.group(ptrs);
  EXPECT_NO_THROW(plan.lay_out(ptrs));
  EXPECT_EQ(plan.groups()[0].block_count, (std::uint64_t{1} << 32) / 256);

  // A failed group is not counted.
  rs[1].host_a = pretend_host_floats(std::size_t{1} << 31);
  plan.group(ptrs);
  plan.groups()[0].error = std::make_exception_ptr(Error(ErrorCode::compile_failed, "x"));
  EXPECT_NO_THROW(plan.lay_out(ptrs));
}

TEST(BatchPlan, MatmulOf2To31BlocksIsRefused) {
  Request r;
  r.op = Op::matmul;
  r.m = 1u << 20;
  r.k = 1;
  r.n = 1u << 19;  // 65536 x 32768 tiles = 2^31 blocks
  std::vector<const Request*> ptrs{&r};
  BatchPlan plan;
  plan.group(ptrs);
  expect_too_large(plan, ptrs, "a batch's matmul request group exceeds 2^32 elements");
}

}  // namespace

// Which batches prefer device memory (and so take the copy engine by default on a discrete GPU):
// those with a matmul or a per-segment custom kernel; element-wise ops (custom ones too), chains,
// dot and states stream their inputs.
TEST(BatchPlan, MatmulAndPerSegmentKernelsPreferDeviceMemory) {
  Planned streaming({Request::relu(floats(100)), Request::dot(floats(50), floats(50)),
                     chain(floats(10)).relu().scale(2.0f).build(), Request::add(floats(8), floats(8))});
  EXPECT_FALSE(streaming.plan.prefers_device_memory());
  Planned with_matmul({Request::relu(floats(100)), Request::matmul(floats(6), floats(6), 2, 3, 2)});
  EXPECT_TRUE(with_matmul.plan.prefers_device_memory());
  Planned elementwise_custom({Request::custom(kernel("ew", KernelKind::elementwise), floats(64))});
  EXPECT_FALSE(elementwise_custom.plan.prefers_device_memory());
  Planned per_segment({Request::relu(floats(8)), Request::custom(kernel("seg", KernelKind::per_segment), floats(64))});
  EXPECT_TRUE(per_segment.plan.prefers_device_memory());
}
