// Every kernel against the CPU reference, on fresh random inputs, through the synchronous path.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {



Request make(Op op, std::size_t n, std::mt19937& rng) {
  switch (op) {
    case Op::matmul: {
      const auto m = static_cast<std::uint32_t>(n), k = static_cast<std::uint32_t>(n / 2 + 1), nn = static_cast<std::uint32_t>(n + 3);
      return Request::matmul(random_floats(std::size_t{m} * k, rng), random_floats(std::size_t{k} * nn, rng), m, k, nn);
    }
    case Op::gradients: return Request::gradients(random_states(n, rng));
    case Op::interpolate: return Request::interpolate(random_states(n, rng), random_states(n, rng), 0.37f, InterpolationMode::slerp);
    default: return sample_request(op, n, rng);  // element-wise ops and dot, as the table samples them
  }
}

void expect_matches_reference(Device& device, const Request& r) {
  const Result got = device.run(r);
  const auto mismatch = reference::check(r, got);
  EXPECT_FALSE(mismatch.has_value()) << *mismatch;
}

// Every element-wise op of the table, and dot.
std::vector<Op> float_ops() {
  std::vector<Op> ops = elementwise_ops();
  ops.push_back(Op::dot);
  return ops;
}

}  // namespace

class KernelLengths : public testing::TestWithParam<Op> {};

TEST_P(KernelLengths, MatchReferenceAtBoundaryLengths) {
  Device& device = test_device();
  std::mt19937 rng(1234 + static_cast<int>(GetParam()));
  for (std::size_t n : {1u, 255u, 256u, 257u, 4097u, 1000000u}) {
    SCOPED_TRACE("length " + std::to_string(n));
    expect_matches_reference(device, make(GetParam(), n, rng));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, KernelLengths, testing::ValuesIn(float_ops()),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Kernels, StateOpsMatchReferenceExactly) {
  Device& device = test_device();
  std::mt19937 rng(7);
  for (std::size_t states : {1u, 15u, 16u, 17u, 257u, 62500u}) {  // 62500 states = 1,000,000 layers
    SCOPED_TRACE("states " + std::to_string(states));
    expect_matches_reference(device, make(Op::gradients, states, rng));
    auto lerp = make(Op::interpolate, states, rng);
    lerp.mode = InterpolationMode::lerp;
    expect_matches_reference(device, lerp);
    expect_matches_reference(device, make(Op::interpolate, states, rng));
  }
}

TEST(Kernels, InterpolateEveryLayerPairAndManyT) {
  // All 65536 (a, b) byte pairs, at t values that hit rounding ties and the ends.
  Device& device = test_device();
  std::vector<std::uint8_t> a(65536), b(65536);
  for (int i = 0; i < 65536; ++i) a[i] = static_cast<std::uint8_t>(i >> 8), b[i] = static_cast<std::uint8_t>(i & 255);
  for (float t : {0.0f, 0.5f, 0.25f, 1.0f / 3.0f, 0.0625f, 0.999f, 1.0f})
    for (auto mode : {InterpolationMode::lerp, InterpolationMode::slerp}) {
      SCOPED_TRACE("t " + std::to_string(t));
      expect_matches_reference(device, Request::interpolate(a, b, t, mode));
    }
}

TEST(Kernels, MatmulShapes) {
  Device& device = test_device();
  std::mt19937 rng(99);
  for (auto [m, k, n] : {std::array<std::uint32_t, 3>{1, 1, 1}, {1, 300, 1}, {16, 16, 16},
                         {17, 33, 15}, {64, 256, 48}, {200, 3, 130}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    expect_matches_reference(device, Request::matmul(random_floats(std::size_t{m} * k, rng),
                                                     random_floats(std::size_t{k} * n, rng), m, k, n));
  }
}

TEST(Kernels, EdgeValuesPassThroughAsIeeeSays) {
  Device& device = test_device();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1e-38 is a denormal: the device may flush it to zero (Vulkan allows that), check() knows.
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, nan, 1e-38f, -1e-38f, 3.4e38f, -3.4e38f, 1.0f, -1.0f};
  auto relu = device.run(Request::relu(x)).values;
  EXPECT_EQ(relu[2], inf);
  EXPECT_EQ(relu[3], 0.0f);
  EXPECT_TRUE(std::isnan(relu[4]));
  EXPECT_TRUE(std::signbit(relu[1])) << "relu(-0) keeps its sign";
  for (Op op : {Op::relu, Op::scale, Op::add})
    expect_matches_reference(device, op == Op::add ? Request::add(x, x) : Request::unary(op, x, 2.0f));
  auto sum = device.run(Request::add(x, x)).values;
  EXPECT_EQ(sum[2], inf);
  EXPECT_TRUE(std::isnan(sum[4]));
}

TEST(Kernels, TranscendentalsStayFiniteAndAccurateForLargeInputs) {
  Device& device = test_device();
  std::vector<float> x = {-1e30f, -1000.0f, -100.0f, -88.0f, -80.0f, -20.0f, -1e-3f, -1e-7f, 0.0f,
                          1e-7f, 1e-3f, 0.0999f, 0.1f, 20.0f, 80.0f, 88.0f, 100.0f, 1000.0f, 1e30f};
  for (Op op : {Op::sigmoid, Op::tanh, Op::swish, Op::gelu}) {
    SCOPED_TRACE(std::string(to_string(op)));
    const Request r = Request::unary(op, x);
    const Result got = device.run(r);
    for (float v : got.values) EXPECT_TRUE(std::isfinite(v)) << v;
    const auto mismatch = reference::check(r, got);
    EXPECT_FALSE(mismatch.has_value()) << *mismatch;
  }
}
