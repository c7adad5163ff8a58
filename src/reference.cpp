#include "gpubatch/reference.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpubatch/error.hpp"
#include "state_math.hpp"

namespace gpubatch::reference {
namespace {

// gelu's exponent argument, computed in float with the kernel's own operation order: it is part
// of the kernel's definition, so the reference measures only the kernel's exp/sigmoid error.
float gelu_argument_float(float x) {
  volatile float x2 = x * x;  // volatile: no contraction into an FMA the kernel may not do
  volatile float inner = 1.5957692f + 0.0713548f * x2;
  return x * inner;
}

// The table's element-wise entries in C++: each body and error expression of op_table.hpp,
// evaluated in double with exact versions of the GLSL helpers it calls (math.glsl).
namespace table {
[[maybe_unused]] double abs(double x) { return std::fabs(x); }
[[maybe_unused]] double exp(double x) { return std::exp(x); }
[[maybe_unused]] double stable_sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}
[[maybe_unused]] double stable_tanh(double x) { return std::tanh(x); }
[[maybe_unused]] double gelu_argument(double x) { return gelu_argument_float(static_cast<float>(x)); }

// What the error column gives, at one point (see op_table.hpp).
struct ErrorTerms {
  double floor = 0, magnitude = 0, z = 0, L = 0, Ly = 0;
};
#define GPUBATCH_ERROR_TERMS(f, m, zz, l, ly) return ErrorTerms{f, m, zz, l, ly};
#define GPUBATCH_REFERENCE_OP(name, kind, arity, scalars, params, rule, sample, body, error)      \
  struct name##_op {                                                                            \
    static constexpr bool binary = arity == 2;                                                  \
    static double value([[maybe_unused]] double a, [[maybe_unused]] double b,                  \
                        [[maybe_unused]] double p, [[maybe_unused]] double q) { return body; } \
    static ErrorTerms terms([[maybe_unused]] double a, [[maybe_unused]] double b,              \
                            [[maybe_unused]] double p, [[maybe_unused]] double q,              \
                            [[maybe_unused]] double r) { GPUBATCH_ERROR_TERMS error }          \
  };
GPUBATCH_OPS(GPUBATCH_REFERENCE_OP)
#undef GPUBATCH_REFERENCE_OP
#undef GPUBATCH_ERROR_TERMS
}  // namespace table

// The exact (double) value of an element-wise op on one pair of inputs.
double exact_value(Op op, float p, float q, float xf, float yf) {
  switch (op) {
#define GPUBATCH_EXACT_CASE(name, ...) case Op::name: return table::name##_op::value(xf, yf, p, q);
    GPUBATCH_OPS(GPUBATCH_EXACT_CASE)
#undef GPUBATCH_EXACT_CASE
  }
  return 0.0;
}

table::ErrorTerms error_terms(Op op, float p, float q, double a, double b, double r) {
  switch (op) {
#define GPUBATCH_ERROR_CASE(name, ...) case Op::name: return table::name##_op::terms(a, b, p, q, r);
    GPUBATCH_OPS(GPUBATCH_ERROR_CASE)
#undef GPUBATCH_ERROR_CASE
  }
  return {};
}

double exact_value(const Request& r, float xf, float yf) { return exact_value(r.op, r.scalar, r.scalar2, xf, yf); }

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

// B's columns are read contiguously from a transposed copy (a column read with stride N misses
// the cache at every element), and rows of C are spread over the host's cores from 2^24
// multiply-adds: gpubatch-load checks every matmul result that is not bit-identical to one that
// passed, and a 1024 x 1024 x 1024 check took seconds on one core with strided reads (H100 host,
// second session of 2026-11-27: 100 such requests took 80 s a run). Same sums, same order.
std::vector<double> exact_matmul(const Request& r, std::vector<double>* magnitude) {
  std::vector<double> c(std::size_t{r.m} * r.n);
  if (magnitude) magnitude->resize(c.size());
  std::vector<float> bt(std::size_t{r.k} * r.n);
  for (std::size_t kk = 0; kk < r.k; ++kk)
    for (std::size_t j = 0; j < r.n; ++j) bt[j * r.k + kk] = r.b[kk * r.n + j];
  const auto rows = [&](std::uint32_t first, std::uint32_t last) {
    for (std::uint32_t i = first; i < last; ++i)
      for (std::uint32_t j = 0; j < r.n; ++j) {
        const DotValue d = exact_dot(&r.a[std::size_t{i} * r.k], 1, &bt[std::size_t{j} * r.k], 1, r.k);
        c[std::size_t{i} * r.n + j] = d.value;
        if (magnitude) (*magnitude)[std::size_t{i} * r.n + j] = d.magnitude;
      }
  };
  const std::uint64_t work = std::uint64_t{r.m} * r.n * r.k;
  const std::uint32_t parts =
      work < (std::uint64_t{1} << 24) ? 1 : std::clamp<std::uint32_t>(std::thread::hardware_concurrency(), 1, r.m);
  std::vector<std::thread> threads;
  std::uint32_t done = 0;  // rows handed out
  try {
    for (std::uint32_t p = 1; p < parts; ++p) {
      const std::uint32_t first = static_cast<std::uint32_t>(std::uint64_t{r.m} * p / parts);
      const std::uint32_t last = static_cast<std::uint32_t>(std::uint64_t{r.m} * (p + 1) / parts);
      threads.emplace_back(rows, first, last);
      done = last;
    }
  } catch (...) {  // no thread to be had: this one computes what is left
  }
  rows(0, static_cast<std::uint32_t>(std::uint64_t{r.m} / parts));
  if (threads.size() + 1 < parts) rows(done == 0 ? static_cast<std::uint32_t>(std::uint64_t{r.m} / parts) : done, r.m);
  for (auto& t : threads) t.join();
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
// Near the top of float's range the bound decides: a result within it of a reference that rounds
// to infinity may be finite, and one whose reference is finite may overflow when the bound
// reaches the overflow threshold (FLT_MAX + half an ulp); exp(88.7) is either, within its bound.
inline bool agrees(double got, double want, double bound) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want)) return got == want;
  constexpr double kOverflow = 0x1.ffffffp127;
  const double rounded = static_cast<float>(want);
  if (std::isinf(got))
    return std::signbit(got) == std::signbit(want) && (std::isinf(rounded) || std::fabs(want) + bound >= kOverflow);
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
    v = static_cast<float>(exact_value(s.op, s.scalar, s.scalar2, v, chain_operand(r, s, i)));
  return v;
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
    const double exact = exact_value(s.op, s.scalar, s.scalar2, v, y);
    // The table's error terms: magnitude at v; L, the larger of its values at v -+ e (exp's
    // derivative grows with x); z at |v| + e, the largest |x| the GPU's step may see (the
    // 1 + 1e-6 covers the float rounding of gelu's argument).
    const table::ErrorTerms at = error_terms(s.op, s.scalar, s.scalar2, v, y, exact);
    const double L = std::max(error_terms(s.op, s.scalar, s.scalar2, v - e, y, exact).L,
                              error_terms(s.op, s.scalar, s.scalar2, v + e, y, exact).L);
    const double reach = std::fabs(double(v)) + e;
    const double z = error_terms(s.op, s.scalar, s.scalar2, reach, y, exact).z * (1 + 1e-6);
    const double spread = L * e;  // how far the GPU's exact step value may be from `exact`
    const double bound = (1e-5 + 4.0 * z * u) * (at.magnitude + (1.0 + L + at.Ly) * e) + at.floor;
    v = static_cast<float>(exact);
    const double half_ulp = std::isfinite(v) ? std::fabs(double(v)) * u : 0.0;
    e = spread + bound + half_ulp + FLT_MIN;
    if (std::fabs(y) < FLT_MIN && y != 0.0f) e += at.Ly * FLT_MIN;
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
template <class T>
struct ElementBound {
  static constexpr double u = 0x1p-24;
  static constexpr bool binary = T::binary;

  // The exact value of element (x, y) and how far a correct device result may be from it.
  static void of(float p, float q, float x, float y, double& want, double& bound) {
    want = T::value(x, y, p, q);
    const table::ErrorTerms t = T::terms(x, y, p, q, want);
    bound = (t.magnitude == 0.0 ? 0.0 : (1e-5 + 4.0 * t.z * u) * t.magnitude) + t.floor;
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

template <class T>
std::optional<std::string> check_elementwise_op(const Request& r, const float* got) {
  using B = ElementBound<T>;
  const float* a = r.a.data();
  const float* b = B::binary ? r.b.data() : nullptr;
  const std::size_t n = r.a.size();
  // First pass: does every element meet its exact value? (No early exit: it vectorizes.)
  bool all = true;
  for (std::size_t i = 0; i < n; ++i) {
    double want, bound;
    B::of(r.scalar, r.scalar2, a[i], B::binary ? b[i] : 0.0f, want, bound);
    all &= agrees_branchless(got[i], want, bound);
  }
  if (all) return std::nullopt;
  // Some did not: each must then meet the value a device that flushes denormals would give.
  for (std::size_t i = 0; i < n; ++i) {
    double want, bound;
    B::of(r.scalar, r.scalar2, a[i], B::binary ? b[i] : 0.0f, want, bound);
    if (agrees(got[i], want, bound)) continue;
    if (agrees(got[i], exact_element_flushed(r, i), bound)) continue;
    return describe(r, i, got[i], want, bound);
  }
  return std::nullopt;
}

std::optional<std::string> check_elementwise(const Request& r, const float* got) {
  switch (r.op) {
#define GPUBATCH_CHECK_CASE(name, kind, ...) \
  GPUBATCH_IF_EW_##kind(case Op::name: return check_elementwise_op<table::name##_op>(r, got);)
    GPUBATCH_OPS(GPUBATCH_CHECK_CASE)
#undef GPUBATCH_CHECK_CASE
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
  if (r.host_b) {
    copy.b.assign(r.host_b->data, r.host_b->data + r.host_b->floats);
    copy.host_b.reset();
  }
  copy.host_result.reset();
  return copy;
}

Result run(const Request& r) {
  validate(r);
  if (uses_host_buffers(r)) return run(with_vectors(r));
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

namespace {

constexpr double kUnitRoundoff = 0x1p-24;

std::optional<std::string> check_dot(const Request& r, const Result& got) {
  const DotValue d = exact_dot(r.a.data(), 1, r.b.data(), 1, r.a.size());
  // Plus FLT_MIN for each product and partial sum a device may flush to zero when denormal
  // (fuzz/request_fuzzer.cpp found the bound refusing the reference's own rounding to 0).
  const double bound = double(dot_summation_depth(r.a.size()) + 2) * kUnitRoundoff * d.magnitude +
                       double(2 * r.a.size() + 1) * FLT_MIN;
  if (!agrees(got.values[0], d.value, bound)) return describe(r, 0, got.values[0], d.value, bound);
  return std::nullopt;
}

std::optional<std::string> check_matmul(const Request& r, const Result& got) {
  std::vector<double> magnitude;
  const auto c = exact_matmul(r, &magnitude);
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double bound = double(r.k + 2) * kUnitRoundoff * magnitude[i] + double(2 * r.k + 1) * FLT_MIN;
    if (!agrees(got.values[i], c[i], bound)) return describe(r, i, got.values[i], c[i], bound);
  }
  return std::nullopt;
}

// gradients and interpolate: integer work, so bit for bit.
std::optional<std::string> check_states(const Request& r, const Result& got) {
  const Result want = run(r);
  for (std::size_t i = 0; i < want.values.size(); ++i)
    if (std::memcmp(&want.values[i], &got.values[i], sizeof(float)) != 0)
      return describe(r, i, got.values[i], want.values[i], 0.0);
  for (std::size_t i = 0; i < want.states.size(); ++i)
    if (want.states[i] != got.states[i]) {
      const Layer w = unpack_layer(want.states[i]), g = unpack_layer(got.states[i]);
      return "interpolate layer " + std::to_string(i) + ": got (rho " + std::to_string(g.rho) + ", theta " +
             std::to_string(g.theta) + "), reference (rho " + std::to_string(w.rho) + ", theta " +
             std::to_string(w.theta) + ")";
    }
  return std::nullopt;
}

// The result's shape: as many values and state bytes as the request asks for.
std::optional<std::string> check_shape(const Request& r, const Result& got) {
  const std::size_t want_values = r.op == Op::interpolate ? 0 : output_bytes(r) / sizeof(float);
  const std::size_t want_states = r.op == Op::interpolate ? r.states_a.size() : 0;
  if (got.values.size() == want_values && got.states.size() == want_states) return std::nullopt;
  return std::string(to_string(r.op)) + ": result has " + std::to_string(got.values.size()) + " values and " +
         std::to_string(got.states.size()) + " state bytes, expected " + std::to_string(want_values) + " and " +
         std::to_string(want_states);
}

}  // namespace

std::optional<std::string> check(const Request& r, const Result& got) {
  try {
    validate(r);
  } catch (const Error& e) {
    return std::string("cannot check: ") + e.what();
  }
  if (uses_host_buffers(r)) {  // the result is in host_result when the request has one
    Result delivered = got;
    if (r.host_result) delivered.values.assign(r.host_result->data, r.host_result->data + r.host_result->floats);
    return check(with_vectors(r), delivered);
  }
  if (auto custom = custom_part(r))
    return *custom + " runs user GLSL: the CPU reference cannot run or check custom kernels";
  if (auto wrong = check_shape(r, got)) return wrong;
  switch (r.op) {
    case Op::chain:
      for (std::size_t i = 0; i < r.a.size(); ++i)
        if (auto mismatch = check_chain_element(r, i, got.values[i])) return mismatch;
      return std::nullopt;
    case Op::dot:
      return check_dot(r, got);
    case Op::matmul:
      return check_matmul(r, got);
    case Op::gradients:
    case Op::interpolate:
      return check_states(r, got);
    default:
      return check_elementwise(r, got.values.data());
  }
}

}  // namespace gpubatch::reference
