#include "gpubatch/reference.hpp"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpubatch/error.hpp"
#include "state_math.hpp"

namespace gpubatch::reference {
namespace {

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// gelu's exponent argument, computed in float with the kernel's own operation order: it is part
// of the kernel's definition, so the reference measures only the kernel's exp/sigmoid error.
float gelu_argument(float x) {
  volatile float x2 = x * x;  // volatile: no contraction into an FMA the kernel may not do
  volatile float inner = 1.5957692f + 0.0713548f * x2;
  return x * inner;
}

// The argument the kernel passes to exp(); Vulkan lets exp err by (3 + 2|z|) ulp, so for large
// |z| the bound grows with it (docs/KERNELS.md).
double exp_argument(Op op, float x) {
  switch (op) {
    case Op::tanh: return 2.0 * x;
    case Op::gelu: return gelu_argument(x);
    default: return x;
  }
}

// The exact (double) value of an element-wise op on one pair of inputs.
inline double exact_value(Op op, float scalar, float xf, float yf) {
  const double x = xf, y = yf;
  switch (op) {
    case Op::relu: return x < 0 ? 0.0 : x;
    case Op::scale: return x * static_cast<double>(scalar);
    case Op::add: return x + y;
    case Op::sub: return x - y;
    case Op::mul: return x * y;
    case Op::sigmoid: return sigmoid(x);
    case Op::tanh: return std::tanh(x);
    case Op::swish: return x * sigmoid(x);
    case Op::gelu: return x * sigmoid(gelu_argument(xf));
    case Op::lerp: return x + static_cast<double>(scalar) * (y - x);
    default: return 0.0;
  }
}
double exact_value(const Request& r, float xf, float yf) { return exact_value(r.op, r.scalar, xf, yf); }

double exact_element(const Request& r, std::size_t i) {
  return exact_value(r, r.a[i], i < r.b.size() ? r.b[i] : 0.0f);
}

// Vulkan lets a device flush denormal inputs and results to zero (unless DenormPreserve, which
// most drivers lack), so a result computed that way is also correct.
float flush(float v) { return std::fabs(v) < FLT_MIN ? 0.0f * v : v; }
double exact_element_flushed(const Request& r, std::size_t i) {
  const double v = exact_value(r, flush(r.a[i]), i < r.b.size() ? flush(r.b[i]) : 0.0f);
  return std::fabs(v) < FLT_MIN ? 0.0 : v;
}

struct DotValue {
  double value = 0.0;
  double magnitude = 0.0;  // sum |a_i b_i|, for the error bound
};

DotValue exact_dot(const float* a, std::size_t a_stride, const float* b, std::size_t b_stride,
                   std::size_t n) {
  DotValue d;
  for (std::size_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(a[i * a_stride]) * b[i * b_stride];
    d.value += p;
    d.magnitude += std::fabs(p);
  }
  return d;
}

std::vector<double> exact_matmul(const Request& r, std::vector<double>* magnitude) {
  std::vector<double> c(std::size_t{r.m} * r.n);
  if (magnitude) magnitude->resize(c.size());
  for (std::uint32_t i = 0; i < r.m; ++i)
    for (std::uint32_t j = 0; j < r.n; ++j) {
      const DotValue d = exact_dot(&r.a[std::size_t{i} * r.k], 1, &r.b[j], r.n, r.k);
      c[std::size_t{i} * r.n + j] = d.value;
      if (magnitude) (*magnitude)[std::size_t{i} * r.n + j] = d.magnitude;
    }
  return c;
}

std::string describe(const Request& r, std::size_t i, double got, double want, double bound) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s element %zu: got %.9g, reference %.9g (bound %.3g)",
                std::string(to_string(r.op)).c_str(), i, got, want, bound);
  return buf;
}

// NaN must meet NaN and an infinity the same infinity; otherwise |got - want| <= bound.
// A reference beyond float's range must meet the infinity float rounding gives it.
inline bool agrees(double got, double want, double bound) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  const double rounded = static_cast<float>(want);
  if (std::isinf(rounded) || std::isinf(got)) return got == rounded;
  return std::fabs(got - want) <= bound;
}

[[noreturn]] void no_reference_for_custom(const std::string& what) {
  throw Error(ErrorCode::invalid_argument,
              what + " runs user GLSL: the CPU reference cannot run or check custom kernels");
}

// A custom kernel anywhere in the request (itself, or a step of its chain), for messages.
std::optional<std::string> custom_part(const Request& r) {
  if (r.op == Op::custom) return describe_op(r);
  if (r.op == Op::chain && r.chain)
    for (const ChainStep& s : r.chain->steps())
      if (s.op == Op::custom)
        return describe_op(r) + ": its kernel '" + (s.kernel ? s.kernel->name : std::string("?")) + "'";
  return std::nullopt;
}

float chain_operand(const Request& r, const ChainStep& s, std::size_t i) {
  return s.input >= 0 ? r.inputs[static_cast<std::size_t>(s.input)][i] : 0.0f;
}

// Element i of a chain, step by step, rounded to float after each step as the GPU rounds (the
// fused kernel keeps each step's result in a `precise` float).
float chain_element(const Request& r, std::size_t i) {
  float v = r.a[i];
  for (const ChainStep& s : r.chain->steps())
    v = static_cast<float>(exact_value(s.op, s.scalar, v, chain_operand(r, s, i)));
  return v;
}

// Largest |d op / d x| (x the running value) anywhere: how much an error in the step's input can
// grow through it. sigmoid 1/4; tanh 1; swish max 1.0998; gelu (x sigmoid(1.5957692x +
// 0.0713548x^3)) max 1.1290, both rounded up; scale |s|; mul |y|; lerp |1 - t|.
double lipschitz(const ChainStep& s, double y) {
  switch (s.op) {
    case Op::sigmoid: return 0.25;
    case Op::swish: case Op::gelu: return 1.15;
    case Op::scale: return std::fabs(double(s.scalar));
    case Op::mul: return std::fabs(y);
    case Op::lerp: return std::fabs(1.0 - double(s.scalar));
    default: return 1.0;  // relu, add, sub, tanh
  }
}

// |d op / d y| for the second operand (which the CPU and GPU read alike, except that a device may
// flush it to zero when it is denormal).
double lipschitz_y(const ChainStep& s, double x) {
  switch (s.op) {
    case Op::add: case Op::sub: return 1.0;
    case Op::mul: return std::fabs(x);
    case Op::lerp: return std::fabs(double(s.scalar));
    default: return 0.0;
  }
}

// The check of element i of a chain (docs/KERNELS.md, "Chains"): follow the step-by-step
// reference v_k and a bound e_k on |gpu_k - v_k|:
//   e_k = L_k e_{k-1} + b_k + ulp(v_k)/2 + FLT_MIN (1 + Ly_k [y denormal])
// where L_k bounds |d op_k/dx| everywhere, b_k is op_k's own bound from check() evaluated at
// |op_k(v_{k-1})| + L_k e_{k-1} (the GPU's step k sees an input e_{k-1} away), the half ulp is
// the reference's own rounding, and the FLT_MIN terms admit denormal flush of the step's input,
// result and second operand.
std::optional<std::string> check_chain_element(const Request& r, std::size_t i, float got) {
  constexpr double u = 0x1p-24;
  float v = r.a[i];
  double e = std::fabs(v) < FLT_MIN ? FLT_MIN : 0.0;
  for (const ChainStep& s : r.chain->steps()) {
    const float y = chain_operand(r, s, i);
    const double exact = exact_value(s.op, s.scalar, v, y);
    const double L = lipschitz(s, y);
    const double spread = L * e;  // how far the GPU's exact step value may be from `exact`
    double bound;
    switch (s.op) {
      case Op::sigmoid: case Op::tanh: case Op::swish: case Op::gelu: {
        const double reach = std::fabs(double(v)) + e;  // |x| the GPU's step may see
        const double z = s.op == Op::tanh ? 2.0 * reach
                         : s.op == Op::gelu ? reach * (1.5957692 + 0.0713548 * reach * reach) * (1 + 1e-6)
                                            : reach;
        bound = (1e-5 + 4.0 * z * u) * (std::fabs(exact) + spread) + 1e-30;
        break;
      }
      case Op::lerp:
        bound = 1e-5 * (std::fabs(double(v)) + e + std::fabs(double(s.scalar) * (double(y) - v)) +
                        std::fabs(double(s.scalar)) * e);
        break;
      default:
        bound = 1e-5 * (std::fabs(exact) + spread);
    }
    v = static_cast<float>(exact);
    const double half_ulp = std::isfinite(v) ? std::fabs(double(v)) * u : 0.0;
    e = spread + bound + half_ulp + FLT_MIN;
    if (std::fabs(y) < FLT_MIN && y != 0.0f) e += lipschitz_y(s, v) * FLT_MIN;
    if (std::isnan(e)) e = HUGE_VAL;  // inf * 0 on the way: only NaN/inf matching remains
  }
  if (agrees(got, v, e)) return std::nullopt;
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s element %zu: got %.9g, step-by-step reference %.9g (composed bound %.3g)",
                describe_op(r).c_str(), i, double(got), double(v), e);
  return std::string(buf);
}

// Element-wise results, one op at a time so that the loop holds no per-element switch (a load
// generator checks every result it gets; this keeps the check far cheaper than the request).
// Each element must meet the exact value within its bound, or the value a device that flushes
// denormals would give (tried only for elements that miss the first).
template <Op kOp>
struct ElementBound {
  static constexpr double u = 0x1p-24;
  static constexpr bool transcendental = kOp == Op::sigmoid || kOp == Op::tanh || kOp == Op::swish || kOp == Op::gelu;
  static constexpr bool binary = kOp == Op::add || kOp == Op::sub || kOp == Op::mul || kOp == Op::lerp;
  static constexpr double floor = transcendental ? 1e-30 : FLT_MIN;

  // The exact value of element (x, y) and how far a correct device result may be from it.
  static void of(float scalar, float x, float y, double& want, double& bound) {
    want = exact_value(kOp, scalar, x, y);
    double scale = std::fabs(want);
    if constexpr (kOp == Op::lerp) scale = std::fabs(double(x)) + std::fabs(double(scalar) * (double(y) - x));
    double relative = 1e-5;
    if constexpr (transcendental) relative += 4.0 * std::fabs(exp_argument(kOp, x)) * u;
    bound = (scale == 0.0 ? 0.0 : relative * scale) + floor;
  }
};

// agrees() without branches, so that a loop over elements vectorizes.
inline bool agrees_branchless(double got, double want, double bound) {
  const bool nan_want = want != want, nan_got = got != got;
  const double rounded = static_cast<float>(want);
  const bool inf = std::fabs(rounded) == HUGE_VAL || std::fabs(got) == HUGE_VAL;
  const bool close = std::fabs(got - want) <= bound;
  return (nan_want | nan_got) ? (nan_want & nan_got) : (inf ? got == rounded : close);
}

template <Op kOp>
std::optional<std::string> check_elementwise_op(const Request& r, const float* got) {
  using B = ElementBound<kOp>;
  const float* a = r.a.data();
  const float* b = B::binary ? r.b.data() : nullptr;
  const std::size_t n = r.a.size();
  // First pass: does every element meet its exact value? (No early exit: it vectorizes.)
  bool all = true;
  for (std::size_t i = 0; i < n; ++i) {
    double want, bound;
    B::of(r.scalar, a[i], B::binary ? b[i] : 0.0f, want, bound);
    all &= agrees_branchless(got[i], want, bound);
  }
  if (all) return std::nullopt;
  // Some did not: each must then meet the value a device that flushes denormals would give.
  for (std::size_t i = 0; i < n; ++i) {
    double want, bound;
    B::of(r.scalar, a[i], B::binary ? b[i] : 0.0f, want, bound);
    if (agrees(got[i], want, bound)) continue;
    if (agrees(got[i], exact_element_flushed(r, i), bound)) continue;
    return describe(r, i, got[i], want, bound);
  }
  return std::nullopt;
}

std::optional<std::string> check_elementwise(const Request& r, const float* got) {
  switch (r.op) {
    case Op::relu: return check_elementwise_op<Op::relu>(r, got);
    case Op::scale: return check_elementwise_op<Op::scale>(r, got);
    case Op::add: return check_elementwise_op<Op::add>(r, got);
    case Op::sub: return check_elementwise_op<Op::sub>(r, got);
    case Op::mul: return check_elementwise_op<Op::mul>(r, got);
    case Op::sigmoid: return check_elementwise_op<Op::sigmoid>(r, got);
    case Op::tanh: return check_elementwise_op<Op::tanh>(r, got);
    case Op::swish: return check_elementwise_op<Op::swish>(r, got);
    case Op::gelu: return check_elementwise_op<Op::gelu>(r, got);
    case Op::lerp: return check_elementwise_op<Op::lerp>(r, got);
    default: return std::string(to_string(r.op)) + ": not an element-wise op";
  }
}

}  // namespace

std::array<float, 16> rho_gradient_table() { return detail::rho_gradient_table(); }

std::size_t dot_summation_depth(std::size_t n) {
  constexpr std::size_t kBlock = 1024, kItems = 4, kTreeLevels = 8, kGroup = 256;
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  std::size_t depth = (kItems - 1) + kTreeLevels;
  if (blocks > 1) depth += (blocks + kGroup - 1) / kGroup - 1 + kTreeLevels;
  return depth;
}

// The reference works on vectors: a request on host buffers is checked as its vector twin (a
// copy; the reference is the slow path anyway).
static Request with_vectors(const Request& r) {
  Request copy = r;
  if (r.host_a) {
    copy.a.assign(r.host_a->data, r.host_a->data + r.host_a->floats);
    copy.host_a.reset();
  }
  copy.host_result.reset();
  return copy;
}

Result run(const Request& r) {
  validate(r);
  if (r.host_a || r.host_result) return run(with_vectors(r));
  if (auto custom = custom_part(r)) no_reference_for_custom(*custom);
  Result out;
  switch (r.op) {
    case Op::chain:
      out.values.resize(r.a.size());
      for (std::size_t i = 0; i < r.a.size(); ++i) out.values[i] = chain_element(r, i);
      break;
    case Op::dot:
      out.values = {static_cast<float>(exact_dot(r.a.data(), 1, r.b.data(), 1, r.a.size()).value)};
      break;
    case Op::matmul: {
      const auto c = exact_matmul(r, nullptr);
      out.values.assign(c.begin(), c.end());
      break;
    }
    case Op::gradients: {
      const auto table = rho_gradient_table();
      out.values.resize(r.states_a.size() * 2);
      for (std::size_t i = 0; i < r.states_a.size(); ++i) {
        out.values[2 * i] = table[r.states_a[i] >> 4];
        out.values[2 * i + 1] = 0.0f;
      }
      break;
    }
    case Op::interpolate: {
      const int t16 = detail::t_to_fixed16(r.scalar);
      out.states.resize(r.states_a.size());
      for (std::size_t i = 0; i < r.states_a.size(); ++i)
        out.states[i] = detail::interpolate_layer(r.states_a[i], r.states_b[i], t16,
                                                  r.mode == InterpolationMode::slerp);
      break;
    }
    default:
      out.values.resize(r.a.size());
      for (std::size_t i = 0; i < r.a.size(); ++i)
        out.values[i] = static_cast<float>(exact_element(r, i));
  }
  return out;
}

std::optional<std::string> check(const Request& r, const Result& got) {
  try {
    validate(r);
  } catch (const Error& e) {
    return std::string("cannot check: ") + e.what();
  }
  if (r.host_a || r.host_result) {  // the result is in host_result when the request has one
    Result delivered = got;
    if (r.host_result) delivered.values.assign(r.host_result->data, r.host_result->data + r.host_result->floats);
    return check(with_vectors(r), delivered);
  }
  if (auto custom = custom_part(r))
    return *custom + " runs user GLSL: the CPU reference cannot run or check custom kernels";
  const std::size_t want_values =
      r.op == Op::interpolate ? 0 : output_bytes(r) / sizeof(float);
  const std::size_t want_states = r.op == Op::interpolate ? r.states_a.size() : 0;
  if (got.values.size() != want_values || got.states.size() != want_states)
    return std::string(to_string(r.op)) + ": result has " + std::to_string(got.values.size()) +
           " values and " + std::to_string(got.states.size()) + " state bytes, expected " +
           std::to_string(want_values) + " and " + std::to_string(want_states);
  constexpr double u = 0x1p-24;
  switch (r.op) {
    case Op::chain:
      for (std::size_t i = 0; i < r.a.size(); ++i)
        if (auto mismatch = check_chain_element(r, i, got.values[i])) return mismatch;
      return std::nullopt;
    case Op::dot: {
      const DotValue d = exact_dot(r.a.data(), 1, r.b.data(), 1, r.a.size());
      // Plus FLT_MIN for each product and partial sum a device may flush to zero when denormal
      // (fuzz/request_fuzzer.cpp found the bound refusing the reference's own rounding to 0).
      const double bound = double(dot_summation_depth(r.a.size()) + 2) * u * d.magnitude +
                           double(2 * r.a.size() + 1) * FLT_MIN;
      if (!agrees(got.values[0], d.value, bound)) return describe(r, 0, got.values[0], d.value, bound);
      return std::nullopt;
    }
    case Op::matmul: {
      std::vector<double> magnitude;
      const auto c = exact_matmul(r, &magnitude);
      for (std::size_t i = 0; i < c.size(); ++i) {
        const double bound = double(r.k + 2) * u * magnitude[i] + double(2 * r.k + 1) * FLT_MIN;
        if (!agrees(got.values[i], c[i], bound)) return describe(r, i, got.values[i], c[i], bound);
      }
      return std::nullopt;
    }
    case Op::gradients:
    case Op::interpolate: {
      const Result want = run(r);
      for (std::size_t i = 0; i < want.values.size(); ++i)
        if (std::memcmp(&want.values[i], &got.values[i], sizeof(float)) != 0)
          return describe(r, i, got.values[i], want.values[i], 0.0);
      for (std::size_t i = 0; i < want.states.size(); ++i)
        if (want.states[i] != got.states[i]) {
          const Layer w = unpack_layer(want.states[i]), g = unpack_layer(got.states[i]);
          return "interpolate layer " + std::to_string(i) + ": got (rho " + std::to_string(g.rho) +
                 ", theta " + std::to_string(g.theta) + "), reference (rho " +
                 std::to_string(w.rho) + ", theta " + std::to_string(w.theta) + ")";
        }
      return std::nullopt;
    }
    default:
      return check_elementwise(r, got.values.data());
  }
}

}  // namespace gpubatch::reference
