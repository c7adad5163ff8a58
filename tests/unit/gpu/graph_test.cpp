// GpuCommandBatch: chains of operations with one upload pass, one submission, one download pass;
// fusion of element-wise runs; recycled intermediates; imported buffers; custom kernels; errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "gpu/context.hpp"
#include "gpu/memory.hpp"
#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {


// Distance in units in the last place (0 for equal values, NaN == NaN).
std::uint32_t ulps(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (a == b) return 0;
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = std::numeric_limits<std::int32_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<std::int32_t>::min() - ib;
  const std::int64_t d = std::int64_t{ia} - ib;
  return static_cast<std::uint32_t>(std::min<std::int64_t>(d < 0 ? -d : d, UINT32_MAX));
}

template <class F>
void expect_error(ErrorCode code, F&& f, const std::string& fragment = "") {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    if (!fragment.empty()) EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

bool binary(Op op) { return op_info(op).arity == 2; }
float scalar_of(Op op) { return op_info(op).sample_scalar[0]; }
float scalar2_of(Op op) { return op_info(op).sample_scalar[1]; }

// op on a (and b) with the table's sample scalars.
Request request_for(Op op, std::vector<float> a, std::vector<float> b) {
  Request r = Request::unary(op, std::move(a), scalar_of(op), scalar2_of(op));
  if (binary(op)) r.b = std::move(b);
  return r;
}

void expect_reference(const Request& r, const std::vector<float>& got) {
  Result res;
  res.values = got;
  const auto mismatch = reference::check(r, res);
  EXPECT_FALSE(mismatch.has_value()) << to_string(r.op) << ": " << *mismatch;
}

}  // namespace

TEST(Graph, ChainOfThreeIsOneUploadOneKernelOneDownload) {
  Device& device = test_device();
  GpuCommandBatch g(device);
  const auto before = device.counters();
  auto x = g.upload({1.0f, 2.0f, -3.0f, 4.0f});
  auto half = g.upload({0.5f, 0.5f, 0.5f, 0.5f});
  auto y = g.add(g.scale(g.relu(x), 2.0f), half);
  g.execute();
  EXPECT_EQ(g.read(y), (std::vector<float>{2.5f, 4.5f, 0.5f, 8.5f}));
  const auto after = device.counters();
  EXPECT_EQ(after.uploads - before.uploads, 1u);
  EXPECT_EQ(after.downloads - before.downloads, 1u);
  EXPECT_EQ(after.submissions - before.submissions, 1u);
  EXPECT_EQ(after.dispatches - before.dispatches, 1u);
  const ExecuteStats& s = g.last_execute();
  EXPECT_EQ(s.uploads, 1u);
  EXPECT_EQ(s.downloads, 1u);
  EXPECT_EQ(s.submissions, 1u);
  EXPECT_EQ(s.dispatches, 1u);
  EXPECT_EQ(s.fused_dispatches, 1u);
  EXPECT_EQ(s.operations, 3u);
  EXPECT_EQ(s.bytes_down, 16u);

  // The same chain through the synchronous path: 3 uploads and 3 downloads.
  const auto sync_before = device.counters();
  Result r1 = device.run(Request::relu({1.0f, 2.0f, -3.0f, 4.0f}));
  Result r2 = device.run(Request::scale(r1.values, 2.0f));
  Result r3 = device.run(Request::add(r2.values, {0.5f, 0.5f, 0.5f, 0.5f}));
  const auto sync_after = device.counters();
  EXPECT_EQ(r3.values, g.read(y));
  EXPECT_EQ(sync_after.uploads - sync_before.uploads, 3u);
  EXPECT_EQ(sync_after.downloads - sync_before.downloads, 3u);
}

TEST(Graph, UnfusedChainDispatchesEachOperation) {
  GpuCommandBatch g(test_device(), GraphOptions{.fuse = false});
  auto x = g.upload({1.0f, 2.0f, -3.0f, 4.0f});
  auto y = g.add(g.scale(g.relu(x), 2.0f), g.upload({0.5f, 0.5f, 0.5f, 0.5f}));
  g.execute();
  EXPECT_EQ(g.read(y), (std::vector<float>{2.5f, 4.5f, 0.5f, 8.5f}));
  EXPECT_EQ(g.last_execute().dispatches, 3u);
  EXPECT_EQ(g.last_execute().fused_dispatches, 0u);
  EXPECT_EQ(g.last_execute().uploads, 1u);
  EXPECT_EQ(g.last_execute().downloads, 1u);
}

// Both transfer modes run on every device (automatic picks one of them).
class GraphOps : public testing::TestWithParam<std::tuple<bool, Transfers>> {};  // fusion, transfers

TEST_P(GraphOps, EveryOperationAgreesWithTheReference) {
  GpuCommandBatch g(test_device(), GraphOptions{.fuse = std::get<0>(GetParam()), .transfers = std::get<1>(GetParam())});
  std::mt19937 rng(99);
  for (std::size_t n : {1u, 255u, 257u, 4097u, 100000u}) {
    SCOPED_TRACE("length " + std::to_string(n));
    struct Case { Request r; BufferId id; };
    std::vector<Case> cases;
    for (Op op : elementwise_ops()) {  // every element-wise op of the table
      Request r = sample_request(op, n, rng);
      const BufferId ia = g.upload(r.a), ib = binary(op) ? g.upload(r.b) : BufferId{};
      const BufferId out = g.apply(op, ia, ib, r.scalar, r.scalar2);
      cases.push_back({std::move(r), out});
    }
    {
      auto a = random_floats(n, rng), b = random_floats(n, rng);
      cases.push_back({Request::dot(a, b), g.dot(g.upload(a), g.upload(b))});
    }
    {
      const auto m = static_cast<std::uint32_t>(std::min<std::size_t>(n, 70)), k = m / 2 + 1, nn = m + 3;
      auto a = random_floats(std::size_t{m} * k, rng), b = random_floats(std::size_t{k} * nn, rng);
      cases.push_back({Request::matmul(a, b, m, k, nn), g.matmul(g.upload(a), g.upload(b), m, k, nn)});
    }
    g.execute();
    // Independent operations: one upload pass, one download pass, one submission.
    EXPECT_EQ(g.last_execute().uploads, 1u);
    EXPECT_EQ(g.last_execute().downloads, 1u);
    for (const Case& c : cases) expect_reference(c.r, g.read(c.id));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GraphOps, testing::Combine(testing::Bool(), testing::Values(Transfers::copy, Transfers::direct)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "fused" : "unfused") +
                                  (std::get<1>(info.param) == Transfers::copy ? "_copy" : "_direct");
                         });

TEST(Graph, FusedChainAgreesWithTheReferenceOpByOp) {
  // Every intermediate kept: the fused kernel stores each, and each is checked against the CPU
  // reference applied to the GPU's own input for that step.
  GpuCommandBatch g(test_device());
  std::mt19937 rng(5);
  const std::size_t n = 10007;
  auto x = random_floats(n, rng, -3.0f, 3.0f);
  auto y = random_floats(n, rng, -3.0f, 3.0f);
  auto ix = g.upload(x), iy = g.upload(y);
  // Every element-wise op of the table, twice.
  std::vector<Op> chain = elementwise_ops();
  chain.insert(chain.end(), chain.begin(), chain.end());
  std::vector<BufferId> ids;
  BufferId cur = ix;
  for (Op op : chain) {
    cur = g.apply(op, cur, binary(op) ? iy : BufferId{}, scalar_of(op), scalar2_of(op));
    ids.push_back(cur);
  }
  for (auto id : ids) g.keep(id);
  g.execute();
  EXPECT_EQ(g.last_execute().dispatches, 1u);
  EXPECT_EQ(g.last_execute().downloads, 1u);
  std::vector<float> in = x;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const auto out = g.read(ids[i]);
    expect_reference(request_for(chain[i], in, y), out);
    in = out;
  }
}

// Fused and unfused kernels are compiled separately, and a GPU compiler may contract or reorder
// them differently (the H200's does): after 30 steps with subtractions that cancel, they can
// differ by many ulps near zero. What must hold is closeness on the data's own scale; each step's
// agreement with the reference is FusedChainAgreesWithTheReferenceOpByOp's job.
TEST(Graph, FusedAndUnfusedChainsAgreeOnTheDataScale) {
  std::mt19937 rng(17);
  const std::size_t n = 50000;
  auto x = random_floats(n, rng, -6.0f, 6.0f), y = random_floats(n, rng, -2.0f, 2.0f);
  auto run = [&](bool fuse) {
    GpuCommandBatch g(test_device(), GraphOptions{.fuse = fuse});
    auto iy = g.upload(y);
    BufferId cur = g.upload(x);
    for (int rep = 0; rep < 3; ++rep)
      for (Op op : elementwise_ops()) cur = g.apply(op, cur, binary(op) ? iy : BufferId{}, scalar_of(op), scalar2_of(op));
    g.execute();
    EXPECT_EQ(g.last_execute().dispatches, fuse ? 1u : 3 * elementwise_ops().size());
    return g.read(cur);
  };
  const auto fused = run(true), unfused = run(false);
  ASSERT_EQ(fused.size(), unfused.size());
  std::size_t within_two_ulps = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_LE(std::fabs(fused[i] - unfused[i]), 1e-4f * std::max(1.0f, std::fabs(unfused[i])))
        << "element " << i << ": fused " << fused[i] << ", unfused " << unfused[i];
    within_two_ulps += ulps(fused[i], unfused[i]) <= 2;
  }
  EXPECT_GE(within_two_ulps, n * 9 / 10) << "most elements agree to the last bits";
}

TEST(Graph, ChainMatchesComposedReference) {
  // relu -> scale -> add composed on the CPU: correctly rounded ops, so the bound composes.
  GpuCommandBatch g(test_device());
  std::mt19937 rng(3);
  const std::size_t n = 1 << 16;
  auto x = random_floats(n, rng), y = random_floats(n, rng);
  auto out = g.add(g.scale(g.relu(g.upload(x)), 2.5f), g.upload(y));
  g.execute();
  const auto got = g.read(out);
  for (std::size_t i = 0; i < n; ++i) {
    const float r = x[i] < 0 ? 0.0f : x[i];
    const float s = static_cast<float>(static_cast<double>(r) * 2.5);
    const double expected = static_cast<double>(s) + y[i];
    ASSERT_LE(std::fabs(got[i] - expected), 1e-5 * std::fabs(expected) + 1e-6 * std::fabs(s) + 1e-30) << i;
  }
}

class GraphTransfers : public testing::TestWithParam<Transfers> {};

TEST_P(GraphTransfers, MixedGraphWithReductions) {
  GpuCommandBatch g(test_device(), GraphOptions{.transfers = GetParam()});
  std::mt19937 rng(11);
  const std::uint32_t m = 40, k = 33, nn = 50;
  auto a = random_floats(m * k, rng), b = random_floats(k * nn, rng), w = random_floats(m * nn, rng);
  auto c = g.matmul(g.upload(a), g.upload(b), m, k, nn);
  auto act = g.relu(c);
  auto d = g.dot(act, g.upload(w));  // 2000 elements: two dot blocks and the final pass
  g.keep(c);
  g.keep(act);
  g.execute();
  EXPECT_EQ(g.last_execute().downloads, 1u);
  EXPECT_EQ(g.last_execute().dispatches, 4u);  // matmul, relu, dot_partial, dot_final
  const auto gc = g.read(c), gact = g.read(act), gd = g.read(d);
  expect_reference(Request::matmul(a, b, m, k, nn), gc);
  expect_reference(Request::relu(gc), gact);
  expect_reference(Request::dot(gact, w), gd);
}

TEST_P(GraphTransfers, LongChainStaysWithinThreeIntermediates) {
  Device& device = test_device();
  auto& memory = device.context()->memory();
  const std::size_t n = 1 << 16, bytes = n * sizeof(float);
  std::mt19937 rng(21);
  auto x = random_floats(n, rng, -1.0f, 1.0f), y = random_floats(n, rng, -1.0f, 1.0f);
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    const auto base = memory.stats(gpu::MemoryKind::device_local).used_bytes;
    std::uint64_t peak = 0;
    std::vector<float> result;
    {
      GpuCommandBatch g(device, GraphOptions{.fuse = fuse, .transfers = GetParam()});
      auto iy = g.upload(y);
      BufferId cur = g.upload(x);
      for (int i = 0; i < 100; ++i) {
        switch (i % 4) {
          case 0: cur = g.tanh(cur); break;
          case 1: cur = g.scale(cur, 1.5f); break;
          case 2: cur = g.add(cur, iy); break;
          default: cur = g.mul(cur, g.sigmoid(iy)); break;  // a side branch joins the chain
        }
      }
      g.execute();
      result = g.read(cur);
      peak = memory.stats(gpu::MemoryKind::device_local).used_bytes - base;
      // inputs x, y + result + at most 3 intermediates
      EXPECT_LE(g.last_execute().device_bytes, (2 + 1 + 3) * bytes);
      EXPECT_LE(peak, (2 + 1 + 3) * bytes);
      if (fuse) EXPECT_EQ(g.last_execute().dispatches, 2u);  // 125 operations, 64 per kernel
      // A second, smaller execute reuses those buffers and keeps only what it needed.
      iy = g.upload(y);
      cur = g.tanh(g.add(g.upload(x), iy));
      g.execute();
      EXPECT_LE(memory.stats(gpu::MemoryKind::device_local).used_bytes - base, peak);
    }
    EXPECT_EQ(memory.stats(gpu::MemoryKind::device_local).used_bytes, base);  // all returned
    for (float v : result) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST_P(GraphTransfers, ImportedBuffersAreUploadedOnce) {
  GpuCommandBatch g(test_device(), GraphOptions{.transfers = GetParam()});
  const std::size_t n = 1 << 15;
  std::mt19937 rng(8);
  auto w = random_floats(n, rng);
  auto iw = g.import_buffer(w);
  std::uint64_t first_up = 0;
  for (int round = 0; round < 3; ++round) {
    auto x = random_floats(n, rng);
    auto out = g.mul(g.upload(x), iw);
    g.execute();
    const auto got = g.read(out);
    expect_reference(Request::mul(x, w), got);
    if (round == 0) first_up = g.last_execute().bytes_up;
    else EXPECT_EQ(g.last_execute().bytes_up, first_up - n * sizeof(float));
  }
  EXPECT_EQ(g.size(iw), n);
}

INSTANTIATE_TEST_SUITE_P(Modes, GraphTransfers, testing::Values(Transfers::copy, Transfers::direct),
                         [](const auto& info) { return info.param == Transfers::copy ? "copy" : "direct"; });

TEST(Graph, SeveralResultsOneDownload) {
  GpuCommandBatch g(test_device());
  auto x = g.upload({-1.0f, 2.0f});
  auto a = g.relu(x);
  auto b = g.scale(x, 3.0f);
  auto c = g.dot(x, x);
  g.execute();
  EXPECT_EQ(g.last_execute().downloads, 1u);
  EXPECT_EQ(g.read(a), (std::vector<float>{0.0f, 2.0f}));
  EXPECT_EQ(g.read(b), (std::vector<float>{-3.0f, 6.0f}));
  EXPECT_EQ(g.read(c), (std::vector<float>{5.0f}));
  std::vector<float> into(2);
  g.read_into(b, into);
  EXPECT_EQ(into, (std::vector<float>{-3.0f, 6.0f}));
}

TEST(Graph, FusedKernelsAreCachedByShape) {
  GpuCommandBatch g(test_device());
  auto chain = [&](float s) {
    auto x = g.upload({1.0f, -2.0f, 3.0f});
    auto y = g.upload({1.0f, 1.0f, 1.0f});
    auto out = g.sub(g.scale(g.swish(x), s), y);
    g.execute();
    return g.read(out);
  };
  chain(2.0f);
  const auto r = chain(4.0f);  // same shape, other scalar: no compile
  EXPECT_EQ(g.last_execute().kernels_compiled, 0u);
  EXPECT_EQ(g.last_execute().fused_dispatches, 1u);
  GpuCommandBatch other(test_device());  // another batch on the device shares the cache
  auto x = other.upload({1.0f, -2.0f, 3.0f});
  auto out = other.sub(other.scale(other.swish(x), 4.0f), other.upload({1.0f, 1.0f, 1.0f}));
  other.execute();
  EXPECT_EQ(other.last_execute().kernels_compiled, 0u);
  EXPECT_EQ(other.read(out), r);
}

TEST(Graph, FusedKernelsGoThroughThePipelineCacheAcrossRuns) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpubatch-test-graph-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  DeviceOptions options;
  options.pipeline_cache_dir = dir.string();
  auto run = [&](Device& device) {
    GpuCommandBatch g(device);
    auto out = g.gelu(g.mul(g.tanh(g.upload({0.5f, -1.0f})), g.upload({2.0f, 3.0f})));
    g.execute();
    EXPECT_EQ(g.last_execute().kernels_compiled, 1u);
    EXPECT_EQ(device.counters().pipelines_created, 1u);
    return g.read(out);
  };
  Device first(options);
  const auto r1 = run(first);
  std::uintmax_t cache_bytes = 0;
  for (auto& e : fs::directory_iterator(dir)) cache_bytes += e.file_size();
  Device second(options);  // a second run of the program
  EXPECT_EQ(run(second), r1);
  if (cache_bytes > 32)  // drivers that store pipelines (Mesa 22 lavapipe keeps only the header)
    EXPECT_EQ(second.counters().pipeline_cache_hits, 1u);
  fs::remove_all(dir);
}

TEST(Graph, BatchesOnSeveralThreadsShareTheDevice) {
  Device& device = test_device();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const std::string name = "thread_kernel_" + std::to_string(t % 2);  // two threads race per name
      register_kernel(device, name, KernelKind::elementwise, "return x * p;");
      GpuCommandBatch g(device);
      for (int i = 0; i < 20; ++i) {
        const float v = static_cast<float>(t * 100 + i);
        auto out = g.custom(name, g.add(g.relu(g.upload({v, -v})), g.upload({1.0f, 1.0f})), 2.0f);
        g.execute();
        if (g.read(out) != std::vector<float>{(v + 1.0f) * 2.0f, 2.0f}) ++failures[t];
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

TEST(Graph, EmptyExecuteDoesNothing) {
  GpuCommandBatch g(test_device());
  const auto before = test_device().counters();
  g.execute();
  EXPECT_EQ(test_device().counters().submissions, before.submissions);
  EXPECT_EQ(g.last_execute().submissions, 0u);
}

// ---- custom kernels -------------------------------------------------------------------------

TEST(CustomKernels, ElementwiseAndPerSegmentKernelsRunAndFuse) {
  Device& device = test_device();
  register_kernel(device, "cube", KernelKind::elementwise, "return x * x * x + p;");
  register_kernel(device, "cube", KernelKind::elementwise, "return x * x * x + p;");  // same again: fine
  register_kernel(device, "hyp", KernelKind::elementwise, "return sqrt(a * a + b * b) * stable_sigmoid(p);",
                  {.inputs = 2});
  register_kernel(device, "segment_sum", KernelKind::per_segment,
                  "float s = 0.0;\nfor (uint i = 0; i < n; ++i) s += a.v[i] * b.v[i];\ndst.v[0] = s;",
                  {.inputs = 2, .output_length = 1});
  EXPECT_TRUE(has_kernel(device, "cube"));
  EXPECT_FALSE(has_kernel(device, "nope"));

  GpuCommandBatch g(device);
  auto x = g.upload({1.0f, -2.0f, 3.0f});
  auto y = g.upload({4.0f, 0.0f, -4.0f});
  auto cubed = g.custom("cube", g.relu(x), 1.0f);   // relu -> cube -> hyp fuse into one kernel
  auto h = g.custom("hyp", cubed, y, 100.0f);
  auto s = g.custom("segment_sum", x, y);
  g.keep(cubed);
  g.execute();
  EXPECT_EQ(g.read(cubed), (std::vector<float>{2.0f, 1.0f, 28.0f}));
  const auto gh = g.read(h);
  ASSERT_EQ(gh.size(), 3u);
  EXPECT_NEAR(gh[0], std::sqrt(4.0f + 16.0f), 1e-5f);
  EXPECT_NEAR(gh[1], 1.0f, 1e-6f);
  EXPECT_NEAR(gh[2], std::sqrt(28.0f * 28.0f + 16.0f), 1e-4f);
  EXPECT_EQ(g.read(s), (std::vector<float>{4.0f - 12.0f}));
  EXPECT_EQ(g.last_execute().dispatches, 2u);  // fused (relu, cube, hyp) + segment_sum
  EXPECT_EQ(g.last_execute().fused_dispatches, 1u);

  GpuCommandBatch unfused(device, GraphOptions{.fuse = false});
  auto c2 = unfused.custom("cube", unfused.upload({2.0f}), 0.5f);
  unfused.execute();
  EXPECT_EQ(unfused.read(c2), (std::vector<float>{8.5f}));
}

TEST(CustomKernels, CompileErrorsNameTheLine) {
  Device& device = test_device();
  try {
    register_kernel(device, "broken", KernelKind::elementwise, "float y = x * 2.0;\nreturn y + undefined_thing;");
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::compile_failed);
    const std::string what = e.what();
    EXPECT_NE(what.find("line 2"), std::string::npos) << what;
    EXPECT_NE(what.find("undefined_thing"), std::string::npos) << what;
  }
  EXPECT_FALSE(has_kernel(device, "broken"));
}

TEST(CustomKernels, BadRegistrationsAreRefused) {
  Device& device = test_device();
  expect_error(ErrorCode::invalid_argument, [&] { register_kernel(device, "", KernelKind::elementwise, "return x;"); });
  expect_error(ErrorCode::invalid_argument, [&] { register_kernel(device, "1abc", KernelKind::elementwise, "return x;"); });
  expect_error(ErrorCode::invalid_argument, [&] { register_kernel(device, "a-b", KernelKind::elementwise, "return x;"); });
  expect_error(ErrorCode::invalid_argument, [&] { register_kernel(device, "relu", KernelKind::elementwise, "return x;"); });
  expect_error(ErrorCode::invalid_argument, [&] { register_kernel(device, "k3", KernelKind::elementwise, "return x;", {.inputs = 3}); });
  expect_error(ErrorCode::invalid_argument, [&] { register_kernel(device, "k4", KernelKind::elementwise, "  \n"); });
  expect_error(ErrorCode::invalid_argument,
               [&] { register_kernel(device, "k5", KernelKind::elementwise, "return x;", {.inputs = 1, .output_length = 4}); });
  register_kernel(device, "twice", KernelKind::elementwise, "return 2.0 * x;");
  expect_error(ErrorCode::invalid_argument, [&] { register_kernel(device, "twice", KernelKind::elementwise, "return 3.0 * x;"); },
               "already registered");
  GpuCommandBatch g(device);
  auto x = g.upload({1.0f});
  expect_error(ErrorCode::invalid_argument, [&] { g.custom("not_registered", x); }, "not_registered");
  expect_error(ErrorCode::invalid_argument, [&] { g.custom("twice", x, x); }, "one input");
}

// ---- misuse ---------------------------------------------------------------------------------

TEST(GraphErrors, BadIdsAndSizesAreTypedErrors) {
  GpuCommandBatch g(test_device()), other(test_device());
  auto x = g.upload({1.0f, 2.0f});
  auto x3 = g.upload({1.0f, 2.0f, 3.0f});
  auto foreign = other.upload({1.0f, 2.0f});
  const auto ia = ErrorCode::invalid_argument;
  expect_error(ia, [&] { g.relu(BufferId{}); }, "default-constructed");
  expect_error(ia, [&] { g.relu(foreign); }, "another GpuCommandBatch");
  expect_error(ia, [&] { g.add(x, x3); }, "size mismatch");
  expect_error(ia, [&] { g.lerp(x3, x, 0.5f); }, "size mismatch");
  expect_error(ia, [&] { g.dot(x, x3); }, "size mismatch");
  expect_error(ia, [&] { g.matmul(x, x3, 1, 2, 2); }, "size mismatch");
  expect_error(ia, [&] { g.matmul(x, x, 0, 2, 1); }, "zero");
  expect_error(ia, [&] { g.upload(std::span<const float>()); }, "empty");
  expect_error(ia, [&] { g.import_buffer(std::span<const float>()); }, "empty");
  expect_error(ia, [&] { g.apply(Op::dot, x, x); });
  expect_error(ia, [&] { g.apply(Op::relu, x, x); }, "one input");
  auto y = g.relu(x);
  auto z = g.scale(y, 2.0f);
  expect_error(ia, [&] { g.read(z); }, "execute() first");
  expect_error(ia, [&] { g.keep(x); }, "upload");
  g.execute();
  expect_error(ia, [&] { g.read(y); }, "keep()");   // consumed intermediate, not downloaded
  expect_error(ia, [&] { g.read(x); }, "upload");
  expect_error(ia, [&] { g.read(foreign); }, "another GpuCommandBatch");
  std::vector<float> small(1);
  expect_error(ia, [&] { g.read_into(z, small); }, "size mismatch");
  EXPECT_EQ(g.read(z), (std::vector<float>{2.0f, 4.0f}));
  expect_error(ia, [&] { g.relu(z); }, "has run");  // results of an earlier execute are not inputs
  auto w = g.import_buffer({1.0f, 2.0f});
  expect_error(ia, [&] { g.read(w); }, "input");
  expect_error(ia, [&] { g.keep(w); }, "input");
  g.execute();
  expect_error(ia, [&] { g.read(z); }, "last execute");  // stale
  GpuCommandBatch moved = std::move(g);
  expect_error(ia, [&] { g.execute(); }, "moved-from");  // NOLINT(bugprone-use-after-move)
  auto v = moved.relu(w);
  moved.execute();
  EXPECT_EQ(moved.read(v), (std::vector<float>{1.0f, 2.0f}));
}

TEST(GraphErrors, MisuseLeavesTheBatchUsable) {
  GpuCommandBatch g(test_device());
  auto x = g.upload({1.0f});
  auto y = g.scale(x, 3.0f);
  EXPECT_THROW(g.add(g.upload({1.0f}), g.upload({1.0f, 2.0f})), Error);  // queues nothing
  g.execute();
  EXPECT_EQ(g.read(y), (std::vector<float>{3.0f}));
}

TEST(GraphErrors, FailedExecuteLeavesNothingReadable) {
  Device& device = test_device();
  // Compiles alone, but its #define breaks the fused kernel generated around it.
  register_kernel(device, "leaky_define", KernelKind::elementwise, "return x + 1.0;\n#define k 0u oops");
  GpuCommandBatch g(device);
  auto y = g.custom("leaky_define", g.relu(g.upload({1.0f, -1.0f})));
  try {
    g.execute();
    ADD_FAILURE() << "executed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::compile_failed) << e.what();
    EXPECT_NE(std::string(e.what()).find("fused-kernel"), std::string::npos) << e.what();
  }
  expect_error(ErrorCode::invalid_argument, [&] { g.read(y); }, "failed");
  // The batch goes on working.
  auto z = g.scale(g.upload({3.0f, 4.0f}), 2.0f);
  auto w = g.custom("leaky_define", g.upload({1.0f}));  // alone (other length): its own kernel
  g.execute();
  EXPECT_EQ(g.read(z), (std::vector<float>{6.0f, 8.0f}));
  EXPECT_EQ(g.read(w), (std::vector<float>{2.0f}));
}
