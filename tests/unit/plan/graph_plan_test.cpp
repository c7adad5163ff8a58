// The plan of a GpuCommandBatch execute (src/gpu/graph_plan.*), without a device: fusion into
// steps, which values get memory and which share it, the staging and readback layout, and the
// shape checks operations make when they are queued.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "plan/graph_plan.hpp"
#include "plan/batch_layout.hpp"
#include "plan/encoding.hpp"
#include "gpubatch/error.hpp"

using namespace gpubatch;
using namespace gpubatch::gpu::graph;

namespace {

// Queues values and nodes as GpuCommandBatch does (upload data staged back to back).
struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ImportInfo> imports;
  std::size_t staged = 0;

  std::uint32_t upload(std::uint32_t floats) {
    Value v;
    v.source = Source::upload;
    v.floats = floats;
    v.staged_offset = staged;
    staged = plan::align_up(staged + floats * sizeof(float), plan::kDataAlignment);
    values.push_back(v);
    return static_cast<std::uint32_t>(values.size() - 1);
  }
  std::uint32_t import(std::uint32_t floats, bool uploaded = false) {
    imports.push_back({floats, uploaded});
    return kImport | static_cast<std::uint32_t>(imports.size() - 1);
  }
  std::uint32_t floats(std::uint32_t ref) const {
    return ref & kImport ? imports[ref & ~kImport].floats : values[ref].floats;
  }
  std::uint32_t push(Node n, std::uint32_t out_floats) {
    Value v;
    v.floats = out_floats;
    n.out = static_cast<std::uint32_t>(values.size());
    values.push_back(v);
    nodes.push_back(std::move(n));
    return nodes.back().out;
  }
  std::uint32_t op(Op op, std::uint32_t a, std::uint32_t b = 0, float scalar = 1.0f) {
    Node n;
    n.op = op;
    n.arity = gpu::arity(op);
    n.in[0] = a;
    n.in[1] = b;
    n.scalar = scalar;
    return push(std::move(n), floats(a));
  }
  std::uint32_t dot(std::uint32_t a, std::uint32_t b) {
    Node n;
    n.op = Op::dot;
    n.arity = 2;
    n.in[0] = a, n.in[1] = b;
    return push(std::move(n), 1);
  }
  std::uint32_t matmul(std::uint32_t a, std::uint32_t b, std::uint32_t m, std::uint32_t k, std::uint32_t n) {
    Node node;
    node.op = Op::matmul;
    node.arity = 2;
    node.in[0] = a, node.in[1] = b;
    node.m = m, node.k = k, node.n = n;
    return push(std::move(node), m * n);
  }
  std::uint32_t custom(std::shared_ptr<const gpu::CustomKernel> kernel, std::uint32_t a) {
    Node n;
    n.kernel = kernel;
    n.arity = 1;
    n.in[0] = a;
    return push(std::move(n), static_cast<std::uint32_t>(kernel->output_floats(floats(a))));
  }
  void keep(std::uint32_t v) { values[v].keep = true; }

  Plan plan(bool fuse = true, bool direct = false, std::uint32_t max_fused_ops = 64,
            std::vector<std::size_t> recycled = {}) const {
    return make_plan(Input{nodes, values, imports, fuse, max_fused_ops, direct, staged, std::move(recycled)});
  }
};

std::shared_ptr<const gpu::CustomKernel> custom_kernel(KernelKind kind, std::uint32_t output_length = 0) {
  auto k = std::make_shared<gpu::CustomKernel>();
  k->name = "k";
  k->kind = kind;
  k->output_length = output_length;
  k->key = "custom/k";
  return k;
}

struct Range {
  std::size_t begin, end;
  std::string what;
};

// Every pair of ranges is disjoint, and every range lies within [0, limit).
void expect_disjoint(std::vector<Range> ranges, std::size_t limit) {
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_LT(ranges[i].begin, ranges[i].end) << ranges[i].what;
    EXPECT_LE(ranges[i].end, limit) << ranges[i].what;
    if (i > 0) EXPECT_LE(ranges[i - 1].end, ranges[i].begin) << ranges[i - 1].what << " overlaps " << ranges[i].what;
  }
}

// The steps that read value `v` from memory.
std::vector<std::size_t> readers(const Graph& g, const Plan& p, std::uint32_t v) {
  std::vector<std::size_t> out;
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    const Step& step = p.steps[s];
    std::vector<std::uint32_t> in = step.inputs;
    if (step.kind != StepKind::fused) {
      const Node& n = g.nodes[step.first_node];
      in.assign(n.in, n.in + n.arity);
    }
    if (std::find(in.begin(), in.end(), v) != in.end()) out.push_back(s);
  }
  return out;
}

// The step that writes value `v` (-1: an upload).
std::int64_t writer(const Graph& g, const Plan& p, std::uint32_t v) {
  for (std::size_t s = 0; s < p.steps.size(); ++s)
    for (std::uint32_t i = 0; i < p.steps[s].node_count; ++i)
      if (g.nodes[p.steps[s].first_node + i].out == v) return static_cast<std::int64_t>(s);
  return -1;
}

// Values placed in one buffer are never alive at once: each is written after the last read of the
// one before it (a downloaded value lives to the end).
void expect_buffers_not_shared_while_alive(const Graph& g, const Plan& p) {
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> lives(p.buffers.size());
  for (std::uint32_t v = 0; v < g.values.size(); ++v) {
    const std::size_t b = p.values[v].buffer;
    if (b == kNone) continue;
    ASSERT_LT(b, p.buffers.size());
    EXPECT_GE(p.buffers[b].bytes, g.values[v].floats * sizeof(float)) << "value " << v;
    const auto reads = readers(g, p, v);
    const std::int64_t last =
        p.values[v].downloaded ? INT64_MAX : (reads.empty() ? writer(g, p, v) : static_cast<std::int64_t>(reads.back()));
    lives[b].push_back({writer(g, p, v), last});
  }
  for (std::size_t b = 0; b < lives.size(); ++b) {
    std::sort(lives[b].begin(), lives[b].end());
    for (std::size_t i = 1; i < lives[b].size(); ++i)
      EXPECT_LT(lives[b][i - 1].second, lives[b][i].first) << "buffer " << b << " holds two live values";
  }
}

template <class F>
void expect_invalid(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(GraphPlan, ElementwiseChainIsOneFusedStepWithRegistersInside) {
  Graph g;
  const auto x = g.upload(1000), y = g.upload(1000);
  const auto r = g.op(Op::relu, x);
  const auto s = g.op(Op::scale, r, 0, 2.0f);
  const auto out = g.op(Op::add, s, y);
  const Plan p = g.plan();
  ASSERT_EQ(p.steps.size(), 1u);
  const Step& step = p.steps[0];
  EXPECT_EQ(step.kind, StepKind::fused);
  EXPECT_EQ(step.node_count, 3u);
  EXPECT_EQ(step.inputs, (std::vector<std::uint32_t>{x, y}));
  EXPECT_EQ(step.outputs, (std::vector<std::uint32_t>{out}));
  EXPECT_EQ(step.shape.steps.size(), 3u);
  EXPECT_EQ(step.shape.outputs, (std::vector<std::uint32_t>{2}));
  EXPECT_EQ(step.fused_key, gpu::fused_key(step.shape));
  EXPECT_EQ(step.blocks, plan::ceil_div(1000, plan::kWorkgroupSize));
  EXPECT_EQ(step.len, 1000u);
  // relu and scale live in registers: no memory, not downloaded.
  for (auto v : {r, s}) {
    EXPECT_FALSE(p.values[v].downloaded);
    EXPECT_EQ(p.values[v].buffer, kNone);
  }
  EXPECT_TRUE(p.values[out].downloaded);
  EXPECT_FALSE(p.values[x].downloaded) << "uploads are never downloaded";
  // Copy transfers: x, y and the result each have a device buffer.
  EXPECT_EQ(p.buffers.size(), 3u);
  EXPECT_EQ(p.readback_bytes, 4000u);
  EXPECT_EQ(p.data_up, 8000u);
  EXPECT_EQ(p.data_down, 4000u);
  ASSERT_EQ(p.downloads.size(), 1u);
  EXPECT_EQ(p.downloads[0].buffer, p.values[out].buffer);
}

TEST(GraphPlan, WithoutFusionEachOperationIsAStep) {
  Graph g;
  const auto x = g.upload(64);
  g.op(Op::add, g.op(Op::scale, g.op(Op::relu, x), 0, 2.0f), g.upload(64));
  const Plan p = g.plan(/*fuse=*/false);
  ASSERT_EQ(p.steps.size(), 3u);
  for (const Step& s : p.steps) {
    EXPECT_EQ(s.kind, StepKind::elementwise);
    EXPECT_EQ(s.node_count, 1u);
    EXPECT_TRUE(s.fused_key.empty());
  }
  expect_buffers_not_shared_while_alive(g, p);
}

TEST(GraphPlan, KeptIntermediateIsStoredAndDownloaded) {
  Graph g;
  const auto x = g.upload(256);
  const auto mid = g.op(Op::tanh, x);
  const auto out = g.op(Op::relu, g.op(Op::scale, mid, 0, 3.0f));
  g.keep(mid);
  const Plan p = g.plan();
  ASSERT_EQ(p.steps.size(), 1u) << "keep() does not split the fused group";
  EXPECT_EQ(p.steps[0].outputs, (std::vector<std::uint32_t>{mid, out}));
  EXPECT_EQ(p.steps[0].shape.outputs, (std::vector<std::uint32_t>{0, 2}));
  EXPECT_TRUE(p.values[mid].downloaded);
  EXPECT_TRUE(p.values[out].downloaded);
  EXPECT_NE(p.values[mid].buffer, kNone);
  EXPECT_NE(p.values[mid].buffer, p.values[out].buffer);
  EXPECT_NE(p.values[mid].readback_offset, p.values[out].readback_offset);
  EXPECT_EQ(p.downloads.size(), 2u);
  EXPECT_EQ(p.readback_bytes, 2 * 1024u);
}

TEST(GraphPlan, FusionStopsAtALengthChangeAReductionAndTheGroupLimit) {
  Graph g;
  const auto x = g.upload(100), z = g.upload(50);
  const auto a = g.op(Op::relu, g.op(Op::relu, g.op(Op::relu, x)));  // 3 ops, 2 per group
  g.op(Op::exp, z);                                                  // another length
  const auto d = g.dot(a, a);
  g.op(Op::relu, d);  // after a dot: a new step
  const Plan p = g.plan(true, false, /*max_fused_ops=*/2);
  ASSERT_EQ(p.steps.size(), 5u);
  EXPECT_EQ(p.steps[0].kind, StepKind::fused);
  EXPECT_EQ(p.steps[0].node_count, 2u);
  EXPECT_EQ(p.steps[1].kind, StepKind::elementwise);
  EXPECT_EQ(p.steps[2].kind, StepKind::elementwise);
  EXPECT_EQ(p.steps[2].len, 50u);
  EXPECT_EQ(p.steps[3].kind, StepKind::dot);
  EXPECT_EQ(p.steps[4].kind, StepKind::elementwise);
}

TEST(GraphPlan, DotAndMatmulSteps) {
  Graph g;
  const auto a = g.upload(5000), b = g.upload(5000), c = g.upload(100);
  const auto big = g.dot(a, b);
  const auto small = g.dot(c, c);
  const auto ma = g.upload(20 * 30), mb = g.upload(30 * 40);
  const auto mm = g.matmul(ma, mb, 20, 30, 40);
  const Plan p = g.plan();
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].kind, StepKind::dot);
  EXPECT_EQ(p.steps[0].blocks, 5u);  // 1024 elements a workgroup
  EXPECT_TRUE(p.steps[0].dot_final);
  EXPECT_EQ(p.steps[0].scratch_offset, 0u);
  EXPECT_EQ(p.steps[0].len, 5000u);
  EXPECT_EQ(p.steps[1].blocks, 1u);
  EXPECT_FALSE(p.steps[1].dot_final) << "one block sums itself";
  EXPECT_EQ(p.scratch_floats, 5u);
  EXPECT_TRUE(p.any_dot_final());
  EXPECT_EQ(p.steps[2].kind, StepKind::matmul);
  EXPECT_EQ(p.steps[2].blocks, 2u * 3u);  // 16 x 16 tiles over 20 x 40
  EXPECT_EQ(p.steps[2].len, 600u);
  EXPECT_EQ(p.max_blocks, 6u);
  for (auto v : {big, small, mm}) EXPECT_TRUE(p.values[v].downloaded);
  EXPECT_EQ(p.readback_bytes, 16u + 16u + 800u * 4u);
}

TEST(GraphPlan, LongUnfusedChainPingPongsBetweenTwoBuffers) {
  Graph g;
  auto cur = g.upload(4096);
  for (int i = 0; i < 20; ++i) cur = g.op(i % 2 ? Op::relu : Op::tanh, cur);
  const Plan p = g.plan(/*fuse=*/false);
  EXPECT_EQ(p.steps.size(), 20u);
  // The upload's buffer is free after step 0, so every later result takes one of two.
  EXPECT_EQ(p.buffers.size(), 2u);
  EXPECT_EQ(p.device_bytes(), 2u * 4096u * sizeof(float));
  expect_buffers_not_shared_while_alive(g, p);
}

TEST(GraphPlan, BuffersAreNotSharedWhileAliveAndByteRangesDoNotOverlap) {
  Graph g;
  const auto w = g.import(300);
  const auto x = g.upload(300), y = g.upload(300), unused = g.upload(77);
  const auto h = g.op(Op::mul, g.op(Op::add, x, w), y);
  const auto side = g.op(Op::sigmoid, y);
  g.keep(h);
  const auto t = g.op(Op::clamp, g.op(Op::sub, h, side), 0, -1.0f);
  const auto d = g.dot(t, x);
  const auto seg = g.custom(custom_kernel(KernelKind::per_segment, 10), t);
  const auto e = g.custom(custom_kernel(KernelKind::elementwise), seg);
  for (bool fuse : {true, false})
    for (bool direct : {false, true}) {
      SCOPED_TRACE(std::string(fuse ? "fused" : "unfused") + (direct ? ", direct" : ", copy"));
      const Plan p = g.plan(fuse, direct);
      expect_buffers_not_shared_while_alive(g, p);
      EXPECT_EQ(p.values[unused].staged_at, kNone) << "an upload nobody reads is not uploaded";
      EXPECT_EQ(p.values[unused].buffer, kNone);
      for (auto v : {h, d, e}) EXPECT_TRUE(p.values[v].downloaded);
      // Staging: upload() data, each step's tables, the block counters, the imports' data.
      std::vector<Range> staging{{0, g.staged, "upload data"}};
      for (std::size_t s = 0; s < p.steps.size(); ++s) {
        const Step& st = p.steps[s];
        staging.push_back({st.segment_offset, st.segment_offset + sizeof(plan::SegmentRecord), "segment " + std::to_string(s)});
        if (st.kind != StepKind::fused) continue;
        staging.push_back({st.io_offset, st.io_offset + 8 * (st.inputs.size() + st.outputs.size()), "io table"});
        staging.push_back({st.scalar_offset, st.scalar_offset + 4 * std::max<std::size_t>(st.shape.scalars, 1), "scalars"});
      }
      staging.push_back({p.zeros_offset, p.zeros_offset + 4 * p.max_blocks, "block counters"});
      for (const Upload& u : p.uploads)
        if (u.ref & kImport) {
          EXPECT_GE(u.staging_offset, p.table_end);
          staging.push_back({u.staging_offset, u.staging_offset + u.bytes, "import"});
        }
      expect_disjoint(staging, p.staged_bytes);
      std::vector<Range> readback;
      for (std::uint32_t v = 0; v < g.values.size(); ++v)
        if (p.values[v].downloaded)
          readback.push_back({p.values[v].readback_offset, p.values[v].readback_offset + g.values[v].floats * 4,
                              "value " + std::to_string(v)});
      EXPECT_EQ(readback.size(), 3u);  // h, d, e and nothing else (side and t are consumed)
      expect_disjoint(readback, p.readback_bytes);
    }
}

TEST(GraphPlan, DirectTransfersReadStagingAndWriteReadback) {
  Graph g;
  const auto x = g.upload(512), y = g.upload(512);
  const auto mid = g.op(Op::relu, x);
  const auto out = g.op(Op::add, g.dot(mid, y), g.dot(mid, y));  // mid is read by two steps
  const Plan p = g.plan(true, /*direct=*/true);
  EXPECT_EQ(p.values[x].buffer, kNone);
  EXPECT_EQ(p.values[x].staged_at, g.values[x].staged_offset);
  EXPECT_EQ(p.values[out].buffer, kNone) << "a downloaded result is written into readback";
  EXPECT_TRUE(p.downloads.empty());
  EXPECT_NE(p.values[mid].buffer, kNone) << "intermediates still live in device memory";
  for (const Upload& u : p.uploads) EXPECT_EQ(u.buffer, kNone);
  // Copy transfers put the same uploads and results in buffers.
  const Plan copy = g.plan(true, false);
  EXPECT_NE(copy.values[x].buffer, kNone);
  EXPECT_NE(copy.values[out].buffer, kNone);
  EXPECT_EQ(copy.downloads.size(), 1u);
  EXPECT_GT(copy.device_bytes(), p.device_bytes());
}

TEST(GraphPlan, ImportsAreStagedAfterTheTablesUntilUploaded) {
  Graph g;
  const auto fresh = g.import(100);
  const auto old = g.import(200, /*uploaded=*/true);
  g.op(Op::add, fresh, old);
  const Plan p = g.plan();
  ASSERT_EQ(p.uploads.size(), 1u);
  EXPECT_EQ(p.uploads[0].ref, fresh);
  EXPECT_EQ(p.uploads[0].bytes, 400u);
  EXPECT_EQ(p.uploads[0].staging_offset, p.table_end);
  EXPECT_EQ(p.staged_bytes, p.table_end + 400u);
  EXPECT_EQ(p.steps[0].len, 100u);
  // Nothing queued but a fresh import: still something to do.
  Graph only;
  only.import(8);
  EXPECT_FALSE(only.plan().empty());
  Graph nothing;
  nothing.upload(8);
  EXPECT_TRUE(nothing.plan().empty()) << "an upload with no operation is not uploaded";
}

TEST(GraphPlan, RecycledBuffersServeHalfTheirSizeAndUp) {
  Graph g;
  const auto x = g.upload(750);   // 3000 bytes -> 3072
  const auto y = g.upload(250);   // 1000 bytes -> 1024
  g.op(Op::relu, x);
  g.op(Op::relu, y);
  const Plan p = g.plan(false, false, 64, {4096, 8192});
  const Buffer& bx = p.buffers[p.values[x].buffer];
  const Buffer& by = p.buffers[p.values[y].buffer];
  EXPECT_TRUE(bx.recycled);
  EXPECT_EQ(bx.bytes, 4096u);
  EXPECT_FALSE(by.recycled) << "4096 bytes are more than twice what 1024 needs";
  EXPECT_EQ(by.bytes, 1024u);
  EXPECT_EQ(std::count_if(p.buffers.begin(), p.buffers.end(), [](const Buffer& b) { return b.recycled; }), 1)
      << "the 8192-byte buffer fits none of them";
}

TEST(GraphPlan, CustomKernelsFuseOnlyWhenElementwise) {
  Graph g;
  const auto x = g.upload(64);
  const auto a = g.custom(custom_kernel(KernelKind::elementwise), g.op(Op::relu, x));
  const auto seg = g.custom(custom_kernel(KernelKind::per_segment, 4), a);
  const Plan p = g.plan();
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].kind, StepKind::fused);
  EXPECT_EQ(p.steps[0].shape.scalars, 1u) << "relu has none, a custom kernel one";
  EXPECT_EQ(p.steps[1].kind, StepKind::custom_segment);
  EXPECT_EQ(p.steps[1].blocks, 1u);
  EXPECT_EQ(p.steps[1].len, 64u) << "a segment kernel's segment is its input";
  EXPECT_EQ(g.values[seg].floats, 4u);
  EXPECT_EQ(p.readback_bytes, 16u);
}

TEST(GraphShapeChecks, MismatchedShapesAreInvalidArguments) {
  EXPECT_NO_THROW(check_same_length("add", 7, 7));
  expect_invalid([] { check_same_length("add", 4, 5); }, "add: size mismatch: a has 4 floats, b has 5");
  EXPECT_NO_THROW(check_matmul_shape(6, 12, 2, 3, 4));
  expect_invalid([] { check_matmul_shape(6, 12, 2, 0, 4); }, "matmul: dimensions 2x0 * 0x4 include a zero");
  expect_invalid([] { check_matmul_shape(5, 12, 2, 3, 4); }, "A has 5 floats, M x K = 6");
  expect_invalid([] { check_matmul_shape(6, 11, 2, 3, 4); }, "B has 11 floats, K x N = 12");
  // M x K past 32 bits is not mistaken for a small product.
  expect_invalid([] { check_matmul_shape(0, 1, 65536, 65536, 1); }, "M x K = 4294967296");
}

// Data in a caller's HostBuffer takes no staging or readback room: with copy transfers the
// upload and the delivered result have device buffers and copies from and to the HostBuffer;
// with direct transfers the kernels use the HostBuffers in place.
TEST(GraphPlan, HostBufferDataTakesNoStagingOrReadbackRoom) {
  for (const bool direct : {false, true}) {
    Graph g;
    const std::uint32_t x = g.upload(1000);
    g.values[x].host = std::make_shared<detail::HostMemory>();
    g.staged = 0;  // upload(HostBuffer) stages nothing
    const std::uint32_t y = g.upload(1000);
    const std::uint32_t r = g.op(Op::add, g.op(Op::relu, x), y);
    g.values[r].host = std::make_shared<detail::HostMemory>();
    const std::uint32_t spare = g.op(Op::scale, y, 0, 2.0f);  // to readback
    g.imports.push_back({500, false, true});
    const Plan p = g.plan(true, direct);
    EXPECT_EQ(p.readback_bytes, plan::align_up(1000 * sizeof(float), plan::kDataAlignment)) << "only `spare`";
    EXPECT_TRUE(p.values[spare].downloaded);
    EXPECT_TRUE(p.values[r].downloaded);
    EXPECT_EQ(p.host_bytes, (1000 + 1000 + 500) * sizeof(float));
    EXPECT_EQ(p.staged_bytes, p.table_end) << "the host import is not staged";
    EXPECT_EQ(p.values[x].staged_at, kNone);
    EXPECT_EQ(p.values[x].host, direct);
    EXPECT_EQ(p.values[r].host, direct);
    const auto from_host = std::count_if(p.uploads.begin(), p.uploads.end(), [](const Upload& u) { return u.from_host; });
    EXPECT_EQ(from_host, 2) << "x and the import";
    const auto to_host = std::count_if(p.downloads.begin(), p.downloads.end(), [](const Download& d) { return d.to_host; });
    EXPECT_EQ(to_host, direct ? 0 : 1);
    if (!direct) EXPECT_NE(p.values[x].buffer, kNone);
  }
}
