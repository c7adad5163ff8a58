// The CPU reference itself: known values, the state rules, and that check() rejects wrong results.
#include <gtest/gtest.h>

#include <cmath>

#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"

using namespace gpubatch;

TEST(Reference, KnownValues) {
  EXPECT_EQ(reference::run(Request::relu({-1, 0, 2})).values, (std::vector<float>{0, 0, 2}));
  EXPECT_EQ(reference::run(Request::dot({1, 2, 3}, {4, 5, 6})).values, (std::vector<float>{32}));
  EXPECT_EQ(reference::run(Request::matmul({1, 2, 3, 4}, {5, 6, 7, 8}, 2, 2, 2)).values,
            (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(reference::run(Request::lerp({0, 10}, {10, 20}, 0.25f)).values, (std::vector<float>{2.5f, 12.5f}));
  EXPECT_NEAR(reference::run(Request::gelu({1.0f})).values[0], 0.8411920f, 1e-6);
  EXPECT_NEAR(reference::run(Request::sigmoid({-100.0f})).values[0], 3.7200760e-44f, 1e-45);
  EXPECT_EQ(reference::run(Request::sigmoid({1000.0f})).values[0], 1.0f);
}

// A matmul large enough for the reference to spread its rows over threads (2^24 multiply-adds and
// up), with ragged row shares (M = 257), against a plain double loop over the same products.
TEST(Reference, ALargeMatmulOverThreadsMatchesAPlainLoop) {
  const std::uint32_t m = 257, k = 256, n = 260;
  std::vector<float> a(std::size_t{m} * k), b(std::size_t{k} * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i * 7 % 17) - 8) / 4.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 5 % 13) - 6) / 8.0f;
  const auto got = reference::run(Request::matmul(a, b, m, k, n)).values;
  ASSERT_EQ(got.size(), std::size_t{m} * n);
  for (std::uint32_t i = 0; i < m; ++i)
    for (std::uint32_t j = 0; j < n; ++j) {
      double want = 0;  // small multiples of 1/32: exact in double, in any order
      for (std::uint32_t kk = 0; kk < k; ++kk) want += double(a[std::size_t{i} * k + kk]) * b[std::size_t{kk} * n + j];
      ASSERT_EQ(got[std::size_t{i} * n + j], static_cast<float>(want)) << i << "," << j;
    }
}

TEST(Reference, GradientTable) {
  const auto t = reference::rho_gradient_table();
  // rho = -8: f jumps from 0 to 2^(-2): (2^((-8+eps)/4) - 0) / (2 eps).
  EXPECT_NEAR(t[0], std::exp2((-8 + 0.001) / 4) / 0.002, 1e-3);
  // Elsewhere ~ ln2/4 * 2^(rho/4).
  for (int nibble = 1; nibble < 16; ++nibble)
    EXPECT_NEAR(t[nibble], std::log(2.0) / 4 * std::exp2((nibble - 8) / 4.0), 1e-6) << nibble;
  auto g = reference::run(Request::gradients(std::vector<std::uint8_t>(16, 0x8F))).values;
  ASSERT_EQ(g.size(), 32u);
  EXPECT_EQ(g[0], t[8]);
  EXPECT_EQ(g[1], 0.0f) << "magnitude does not depend on theta";
}

TEST(Reference, InterpolateRules) {
  auto one = [](Layer a, Layer b, float t, InterpolationMode mode) {
    std::vector<std::uint8_t> sa(16, pack_layer(a)), sb(16, pack_layer(b));
    return unpack_layer(reference::run(Request::interpolate(sa, sb, t, mode)).states[0]);
  };
  EXPECT_EQ(one({-8, 0}, {7, 10}, 0.0f, InterpolationMode::lerp), (Layer{-8, 0}));
  EXPECT_EQ(one({-8, 0}, {7, 10}, 1.0f, InterpolationMode::lerp), (Layer{7, 10}));
  EXPECT_EQ(one({0, 0}, {3, 4}, 0.5f, InterpolationMode::lerp), (Layer{2, 2})) << "1.5 rounds half up to 2";
  EXPECT_EQ(one({0, 0}, {-3, 0}, 0.5f, InterpolationMode::lerp), (Layer{-1, 0})) << "-1.5 rounds half up to -1";
  // SLERP: 1 -> 15 is 2 steps backwards through 0, not 14 forwards.
  EXPECT_EQ(one({0, 1}, {0, 15}, 0.5f, InterpolationMode::slerp), (Layer{0, 0}));
  EXPECT_EQ(one({0, 1}, {0, 15}, 0.5f, InterpolationMode::lerp), (Layer{0, 8}));
  // 15 -> 1 goes forwards through 0: 15 + 0.75 * 2 = 16.5, half up to 17, wrapped to 1.
  EXPECT_EQ(one({0, 15}, {0, 1}, 0.75f, InterpolationMode::slerp), (Layer{0, 1}));
  // A difference of exactly 8 is not "more than 8": it goes the plain way.
  EXPECT_EQ(one({0, 0}, {0, 8}, 0.25f, InterpolationMode::slerp), (Layer{0, 2}));
}

TEST(Reference, CheckRejectsWrongResults) {
  const Request r = Request::relu({1, -2, 3});
  Result good = reference::run(r);
  EXPECT_FALSE(reference::check(r, good));
  Result bad = good;
  bad.values[2] = 3.001f;
  ASSERT_TRUE(reference::check(r, bad));
  EXPECT_NE(reference::check(r, bad)->find("element 2"), std::string::npos);
  Result short_result = good;
  short_result.values.pop_back();
  EXPECT_TRUE(reference::check(r, short_result));
  Result nan_result = good;
  nan_result.values[0] = std::nanf("");
  EXPECT_TRUE(reference::check(r, nan_result));
  const Request s = Request::interpolate(std::vector<std::uint8_t>(16, 0x00), std::vector<std::uint8_t>(16, 0xFF), 0.5f,
                                         InterpolationMode::lerp);
  Result st = reference::run(s);
  st.states[5] ^= 1;
  EXPECT_TRUE(reference::check(s, st)) << "state ops must match exactly";
}

TEST(Reference, ValidatesFirst) {
  EXPECT_THROW(reference::run(Request::add({1}, {1, 2})), Error);
}

TEST(Reference, ChainsRunStepByStepInFloat) {
  const Request r = chain({-1.0f, 0.5f, 3.0f}).relu().scale(2.0f).add({10.0f, 20.0f, 30.0f});
  EXPECT_EQ(r.op, Op::chain);
  EXPECT_EQ(r.chain->describe(), "relu -> scale -> add(in0)");
  EXPECT_EQ(reference::run(r).values, (std::vector<float>{10.0f, 21.0f, 36.0f}));
  // Rounded to float between steps: 1 + 2^-30 is 1 in float, so (x + 2^-30) - 1 is 0, not 2^-30.
  const Request rounding = chain({1.0f}).add({0x1p-30f}).sub({1.0f});
  EXPECT_EQ(reference::run(rounding).values, (std::vector<float>{0.0f}));
  // Equal shapes, different scalars: one key; other wiring: another.
  const Request a = chain({1.0f}).scale(2.0f).add({1.0f}), b = chain({1.0f}).scale(3.0f).add({1.0f});
  const Request c = chain({1.0f}).add({1.0f}).scale(3.0f);
  EXPECT_EQ(a.chain->key(), b.chain->key());
  EXPECT_NE(a.chain->key(), c.chain->key());
  EXPECT_EQ(input_bytes(a), 2 * sizeof(float));
  EXPECT_EQ(output_bytes(a), sizeof(float));
  EXPECT_TRUE(is_elementwise(Op::chain));
  EXPECT_EQ(to_string(Op::chain), "chain");
  EXPECT_EQ(op_from_string("custom"), Op::custom);
}

TEST(Reference, ChainCheckComposesTheStepBounds) {
  std::vector<float> x(1000), y(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 4.0f, y[i] = std::cos(float(i) * 0.7f);
  const Request r = chain(x).sigmoid().mul(y).gelu().tanh().lerp(y, 0.25f).swish().scale(3.0f).sub(y);
  Result want = reference::run(r);
  EXPECT_FALSE(reference::check(r, want));
  // One float ulp off everywhere is within the bound; 1e-3 relative is not.
  Result ulp = want, far = want;
  for (auto& v : ulp.values) v = std::nextafter(v, INFINITY);
  for (auto& v : far.values) v = v * 1.001f + 1e-3f;
  EXPECT_FALSE(reference::check(r, ulp));
  const auto mismatch = reference::check(r, far);
  ASSERT_TRUE(mismatch);
  EXPECT_NE(mismatch->find("chain request"), std::string::npos) << *mismatch;
  // Cancellation: sub(y) of x close to y: the bound is absolute, from the earlier steps (scale's
  // 1e-5 |x| carries over), not relative to the tiny result.
  const Request cancel = chain({1.0f + 0x1p-20f}).scale(1.0f).sub({1.0f});
  EXPECT_FALSE(reference::check(cancel, {{0x1p-20f}}));
  EXPECT_FALSE(reference::check(cancel, {{0x1p-19f}}));
  EXPECT_TRUE(reference::check(cancel, {{0x1p-20f + 1e-4f}}));
}

TEST(Reference, ChainAndCustomValidation) {
  auto code = [](const Request& r) {
    try {
      validate(r);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::internal;
  };
  EXPECT_EQ(code(chain({1.0f})), ErrorCode::invalid_argument);
  EXPECT_EQ(code(chain({1.0f}).add({1.0f, 2.0f})), ErrorCode::invalid_argument);
  EXPECT_EQ(code(chain({}).relu()), ErrorCode::invalid_argument);
  EXPECT_EQ(code(chain({1.0f}).apply(Op::matmul)), ErrorCode::invalid_argument);
  EXPECT_EQ(code(chain({1.0f}).apply(Op::sub)), ErrorCode::invalid_argument);
  Request no_shape;
  no_shape.op = Op::chain;
  no_shape.a = {1.0f};
  EXPECT_EQ(code(no_shape), ErrorCode::invalid_argument);
  ChainBuilder long_chain({1.0f});
  for (std::size_t i = 0; i <= kMaxChainSteps; ++i) long_chain.relu();
  EXPECT_EQ(code(std::move(long_chain).build()), ErrorCode::invalid_argument);

  auto kernel = std::make_shared<CustomKernelInfo>();
  kernel->name = "k";
  kernel->inputs = 2;
  EXPECT_EQ(code(Request::custom(nullptr, {1.0f})), ErrorCode::invalid_argument);
  EXPECT_EQ(code(Request::custom(kernel, {1.0f})), ErrorCode::invalid_argument);  // needs b
  EXPECT_EQ(code(Request::custom(kernel, {1.0f}, {1.0f})), ErrorCode::internal);   // valid
  auto segment = std::make_shared<CustomKernelInfo>();
  segment->name = "s";
  segment->kind = KernelKind::per_segment;
  segment->output_length = 3;
  EXPECT_EQ(output_bytes(Request::custom(segment, {1.0f})), 3 * sizeof(float));
  // Nothing user-written has a CPU reference.
  try {
    reference::run(Request::custom(segment, {1.0f}));
    ADD_FAILURE() << "ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run or check custom kernels"), std::string::npos) << e.what();
  }
  const auto message = reference::check(Request::custom(segment, {1.0f}), {{1, 2, 3}});
  ASSERT_TRUE(message);
  EXPECT_NE(message->find("custom request (kernel 's')"), std::string::npos) << *message;
}
