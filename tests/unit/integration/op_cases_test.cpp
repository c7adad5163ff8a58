// Per-op cases, in the style of ncnn's testutil: a list of inputs for each operation of the table,
// each run through the synchronous path, the graph (GpuCommandBatch) and the executor's handle
// and checked against the CPU reference (and against exact values where a case gives them); every
// element-wise op of the table on IEEE edge values; and the bad scalars each op's rule refuses.
// Adding an operation adds its cases here (and its named methods' test at the end).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/reference.hpp"

using namespace gpubatch;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Device& device() {
  static Device d;
  return d;
}

struct OpCase {
  Op op;
  std::vector<float> a;
  std::vector<float> b = {};  // two-input ops
  float s0 = 0.0f, s1 = 0.0f;  // the op's scalars
  std::vector<float> want = {};  // when given: the exact result (sign of zero and NaN included)
};

// The cases, op by op.
std::vector<OpCase> cases() {
  return {
      {Op::relu, {-2.0f, -0.0f, 0.0f, 3.0f, kNaN, -kInf, kInf}, {}, 0, 0, {0.0f, -0.0f, 0.0f, 3.0f, kNaN, 0.0f, kInf}},
      {Op::scale, {1.0f, -2.0f, kInf}, {}, -0.5f, 0, {-0.5f, 1.0f, -kInf}},
      {Op::lerp, {0.0f, 10.0f, -4.0f}, {1.0f, 20.0f, 4.0f}, 0.25f, 0, {0.25f, 12.5f, -2.0f}},
      {Op::abs, {-2.5f, -0.0f, 0.0f, 3.0f, kNaN, -kInf, 1e-30f, -3.4e38f}, {}, 0, 0,
       {2.5f, 0.0f, 0.0f, 3.0f, kNaN, kInf, 1e-30f, 3.4e38f}},  // abs(-0) is +0
      {Op::exp, {0.0f, -0.0f, 1.0f, -1.0f, 10.0f, -10.0f, 80.0f, -80.0f, 88.7f, 89.0f, -104.0f, kInf, -kInf, kNaN}},
      {Op::clamp, {-5.0f, -1.0f, 0.5f, 2.0f, 7.0f, kNaN, -kInf, kInf, -0.0f}, {}, -1.0f, 2.0f,
       {-1.0f, -1.0f, 0.5f, 2.0f, 2.0f, kNaN, -1.0f, 2.0f, -0.0f}},  // NaN and -0 pass through
      {Op::clamp, {-3.0f, 3.0f, 1.5f}, {}, 1.5f, 1.5f, {1.5f, 1.5f, 1.5f}},  // lo == hi
      {Op::clamp, {-3.0f, 3.0f}, {}, -kInf, kInf, {-3.0f, 3.0f}},
      {Op::exp, {-0.0f, 0.0f, 89.0f, 1000.0f, -kInf, -1000.0f, kNaN}, {}, 0, 0, {1.0f, 1.0f, kInf, kInf, 0.0f, 0.0f, kNaN}},
  };
}

Request request_of(const OpCase& c) {
  Request r = Request::unary(c.op, c.a, c.s0, c.s1);
  if (op_info(c.op).arity == 2) r.b = c.b;
  return r;
}

// Equal bit for bit, except that any NaN equals any NaN.
bool same(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::memcmp(&x, &y, sizeof x) == 0;
}

void expect_result(const OpCase& c, const Request& r, const std::vector<float>& got, const char* path) {
  SCOPED_TRACE(std::string(path) + ": " + describe_op(r));
  Result res;
  res.values = got;
  const auto mismatch = reference::check(r, res);
  EXPECT_FALSE(mismatch.has_value()) << *mismatch;
  if (c.want.empty()) return;
  ASSERT_EQ(got.size(), c.want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same(got[i], c.want[i])) << "element " << i << ": got " << got[i] << ", want " << c.want[i];
}

BatchConfig small_batches() {
  BatchConfig c = BatchConfig::latency();
  c.max_wait = std::chrono::milliseconds(1);
  return c;
}

}  // namespace

TEST(OpCases, EveryCaseThroughTheSyncPathTheGraphAndTheHandle) {
  BatchExecutor executor(device(), small_batches());
  auto gpu = executor.handle();
  for (const OpCase& c : cases()) {
    const Request r = request_of(c);
    expect_result(c, r, device().run(r).values, "device.run");
    expect_result(c, r, reference::run(r).values, "reference::run");
    expect_result(c, r, gpu.submit(r).get().values, "handle");
    GpuCommandBatch g(device());
    const BufferId b = op_info(c.op).arity == 2 ? g.upload(c.b) : BufferId{};
    const BufferId out = g.apply(c.op, g.upload(c.a), b, c.s0, c.s1);
    g.execute();
    expect_result(c, r, g.read(out), "graph");
  }
}

// Every element-wise op of the table, as one request and as a chain step, on the values IEEE
// arithmetic treats specially, around exp's overflow and underflow, and denormals (which a device
// may flush: the reference's check allows that).
TEST(OpCases, EveryElementwiseOpOnEdgeValues) {
  const std::vector<float> x = {0.0f, -0.0f, kInf, -kInf, kNaN, 1e-38f, -1e-38f, 3.4e38f, -3.4e38f, 1.0f,
                                -1.0f, 0.5f, 88.7f, 89.0f, -87.0f, -104.0f, -1e-7f, 20.0f};
  const std::vector<float> y(x.rbegin(), x.rend());
  for (std::size_t i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const OpInfo& info = op_info(op);
    if (info.kind != OpKind::ew) continue;
    OpCase c{op, x, info.arity == 2 ? y : std::vector<float>{}, info.sample_scalar[0], info.sample_scalar[1]};
    const Request r = request_of(c);
    expect_result(c, r, device().run(r).values, "device.run");
    const Request step = chain(x).apply(op, c.b, c.s0, c.s1);
    Result res = device().run(step);
    const auto mismatch = reference::check(step, res);
    EXPECT_FALSE(mismatch.has_value()) << *mismatch;
  }
}

// Scalars an op's rule refuses: invalid_argument from validate(), the synchronous path, the
// handle's future, the graph and a chain step; a good request beside it is unharmed.
struct BadScalars {
  Op op;
  float s0, s1;
};

TEST(OpCases, ScalarsAgainstTheRuleAreRefusedEverywhere) {
  const std::vector<BadScalars> bad = {
      {Op::clamp, 2.0f, 1.0f}, {Op::clamp, kNaN, 1.0f}, {Op::clamp, 0.0f, kNaN}, {Op::clamp, kNaN, kNaN}};
  BatchExecutor executor(device(), small_batches());
  auto gpu = executor.handle();
  const std::vector<float> x = {1.0f, 2.0f};
  auto code_of = [](auto&& f) -> std::optional<ErrorCode> {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return std::nullopt;
  };
  for (const BadScalars& b : bad) {
    SCOPED_TRACE(std::string(to_string(b.op)) + "(" + std::to_string(b.s0) + ", " + std::to_string(b.s1) + ")");
    const Request r = Request::unary(b.op, x, b.s0, b.s1);
    EXPECT_EQ(code_of([&] { validate(r); }), ErrorCode::invalid_argument);
    EXPECT_EQ(code_of([&] { device().run(r); }), ErrorCode::invalid_argument);
    auto failed = gpu.submit(r);
    auto good = gpu.relu(x);
    EXPECT_EQ(code_of([&] { failed.get(); }), ErrorCode::invalid_argument);
    EXPECT_EQ(good.get(), x);
    GpuCommandBatch g(device());
    EXPECT_EQ(code_of([&] { g.apply(b.op, g.upload(x), {}, b.s0, b.s1); }), ErrorCode::invalid_argument);
    EXPECT_EQ(code_of([&] { validate(chain(x).relu().apply(b.op, {}, b.s0, b.s1)); }), ErrorCode::invalid_argument);
  }
}

// ---- each op's named methods: Request::op, handle.op, graph.op, chain(x).op ------------------

TEST(OpSurfaces, Abs) {
  BatchExecutor executor(device(), small_batches());
  const std::vector<float> x = {-1.5f, 2.0f, -0.0f};
  const std::vector<float> want = {1.5f, 2.0f, 0.0f};
  EXPECT_EQ(Request::abs(x).op, Op::abs);
  EXPECT_EQ(executor.handle().abs(x).get(), want);
  GpuCommandBatch g(device());
  const BufferId out = g.abs(g.upload(x));
  g.execute();
  EXPECT_EQ(g.read(out), want);
  EXPECT_EQ(device().run(chain(x).scale(-1.0f).abs()).values, want);
  EXPECT_EQ(op_from_string("abs"), Op::abs);
}

TEST(OpSurfaces, Exp) {
  BatchExecutor executor(device(), small_batches());
  const std::vector<float> x = {0.0f, 1.0f, -2.0f, 10.0f};
  const Request r = Request::exp(x);
  EXPECT_EQ(r.op, Op::exp);
  auto expect_ok = [&](const std::vector<float>& got) {
    Result res;
    res.values = got;
    const auto mismatch = reference::check(r, res);
    EXPECT_FALSE(mismatch.has_value()) << *mismatch;
    EXPECT_EQ(got[0], 1.0f);  // exp(0) is exact
  };
  expect_ok(executor.handle().exp(x).get());
  GpuCommandBatch g(device());
  const BufferId out = g.exp(g.upload(x));
  g.execute();
  expect_ok(g.read(out));
  const Request c = chain(x).abs().exp();
  const auto mismatch = reference::check(c, device().run(c));
  EXPECT_FALSE(mismatch.has_value()) << *mismatch;
}

// exp's bound is Vulkan's: (3 + 2|x|) ulp, checked as (1e-5 + 4|x| 2^-24) |e^x|, so at x = 50
// (e^50 = 5.18e21) a result 2e-5 away (relative) passes and one 4e-5 away does not.
TEST(OpSurfaces, ExpBoundGrowsWithTheArgument) {
  const Request r = Request::exp({50.0f, 1.0f});
  const double e50 = std::exp(50.0), e1 = std::exp(1.0);
  auto check = [&](double rel50, double rel1) {
    Result res;
    res.values = {static_cast<float>(e50 * (1 + rel50)), static_cast<float>(e1 * (1 + rel1))};
    return reference::check(r, res);
  };
  EXPECT_FALSE(check(2e-5, 0.0).has_value());
  EXPECT_TRUE(check(4e-5, 0.0).has_value());
  EXPECT_FALSE(check(0.0, 1e-5).has_value());
  EXPECT_TRUE(check(0.0, 2e-5).has_value()) << "at x = 1 the bound is about 1e-5";
}

TEST(OpSurfaces, Clamp) {
  BatchExecutor executor(device(), small_batches());
  const std::vector<float> x = {-3.0f, 0.25f, 9.0f};
  const std::vector<float> want = {-1.0f, 0.25f, 2.0f};
  const Request r = Request::clamp(x, -1.0f, 2.0f);
  EXPECT_EQ(r.op, Op::clamp);
  EXPECT_EQ(r.scalar, -1.0f);
  EXPECT_EQ(r.scalar2, 2.0f);
  EXPECT_EQ(executor.handle().clamp(x, -1.0f, 2.0f).get(), want);
  GpuCommandBatch g(device());
  const BufferId out = g.clamp(g.upload(x), -1.0f, 2.0f);
  g.execute();
  EXPECT_EQ(g.read(out), want);
  // The chain: abs, exp and clamp fused into one kernel, scalars per request.
  const Request c1 = chain(x).abs().exp().clamp(1.5f, 4.0f), c2 = chain(x).abs().exp().clamp(0.0f, 100.0f);
  EXPECT_EQ(c1.chain->key(), c2.chain->key()) << "scalars are not part of the shape";
  EXPECT_EQ(device().run(c1).values, (std::vector<float>{4.0f, 1.5f, 4.0f}));
  const auto got2 = executor.handle().submit(c2).get();
  const auto mismatch = reference::check(c2, got2);
  EXPECT_FALSE(mismatch.has_value()) << *mismatch;
  EXPECT_EQ(got2.values[2], 100.0f);
}
