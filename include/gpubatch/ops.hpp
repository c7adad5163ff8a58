#pragma once
// What can be asked of the GPU: the operations, one request's description, and its result.
// A Request owns its inputs (move vectors in to avoid a copy); the same type feeds the synchronous
// path, the batching executor and the CPU reference.
#include <array>
#include <cfloat>
#include <iterator>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/op_table.hpp"
#include "gpubatch/host_buffer.hpp"

namespace gpubatch {

// ---- the operations (one entry each in gpubatch/op_table.hpp) --------------------------------
enum class Op : std::uint8_t {
#define GPUBATCH_OP_ENUM(name, ...) name,
  GPUBATCH_OPS(GPUBATCH_OP_ENUM)
#undef GPUBATCH_OP_ENUM
};

enum class OpKind : std::uint8_t {
  ew,       // element-wise: kernel generated from the table's body, fuses, may be a chain step
  kernel,   // its own shader(s), validator and encoding (dot, matmul, gradients, interpolate)
  runtime,  // chain, custom: kernels built at run time
};
enum class ScalarRule : std::uint8_t {
  none,
  ordered,  // scalar <= scalar2, neither NaN (clamp's lo and hi)
};

// One row of the table, as C++ reads it.
struct OpInfo {
  std::string_view name;
  OpKind kind = OpKind::ew;
  std::uint32_t arity = 1;    // float inputs: a, or a and b
  std::uint32_t scalars = 0;  // Request::scalar, then Request::scalar2
  ScalarRule rule = ScalarRule::none;
  float sample_lo = -4.0f, sample_hi = 4.0f;  // tests and benchmarks draw inputs from here
  float sample_scalar[2] = {0.0f, 0.0f};      // and use these scalars
  std::string_view body;                      // ew: the GLSL (and C++) expression of the result
};

#define GPUBATCH_UNPACK(...) __VA_ARGS__
#define GPUBATCH_OP_INFO(name, kind, arity, scalars, params, rule, sample, body, error) \
  OpInfo{#name, OpKind::kind, arity, scalars, ScalarRule::rule, GPUBATCH_SAMPLE_BOUNDS sample, \
         {GPUBATCH_SAMPLE_SCALARS sample}, #body},
#define GPUBATCH_SAMPLE_BOUNDS(lo, hi, s0, s1) lo, hi
#define GPUBATCH_SAMPLE_SCALARS(lo, hi, s0, s1) s0, s1
inline constexpr OpInfo kOpTable[] = {GPUBATCH_OPS(GPUBATCH_OP_INFO)};
#undef GPUBATCH_OP_INFO
#undef GPUBATCH_SAMPLE_BOUNDS
#undef GPUBATCH_SAMPLE_SCALARS

inline constexpr std::size_t kOpCount = std::size(kOpTable);
// The ops a Request describes by its data alone (every kind but runtime: chain needs its steps,
// custom its kernel). The runtime ops come last, so these are Op values 0 .. kBuiltinOpCount - 1.
// Tests that pick random ops pick among these.
inline constexpr std::size_t kBuiltinOpCount = [] {
  std::size_t n = 0;
  while (n < kOpCount && kOpTable[n].kind != OpKind::runtime) ++n;
  return n;
}();
static_assert(kOpTable[kBuiltinOpCount].name == "chain" && kOpTable[kBuiltinOpCount + 1].name == "custom" &&
                  kBuiltinOpCount + 2 == kOpCount,
              "op_table.hpp: chain and custom come last");

constexpr const OpInfo& op_info(Op op) noexcept { return kOpTable[static_cast<std::size_t>(op)]; }

// Helpers that turn a table row into a method's parameters (used by Request, ChainBuilder,
// BatchedGpuHandle and GpuCommandBatch to generate one method per element-wise op).
#define GPUBATCH_IF_EW_ew(...) __VA_ARGS__
#define GPUBATCH_IF_EW_kernel(...)
#define GPUBATCH_IF_EW_runtime(...)
#define GPUBATCH_FLOAT_PARAMS_0()
#define GPUBATCH_FLOAT_PARAMS_1(s0) , float s0
#define GPUBATCH_FLOAT_PARAMS_2(s0, s1) , float s0, float s1
#define GPUBATCH_FLOAT_ARGS_0()
#define GPUBATCH_FLOAT_ARGS_1(s0) , s0
#define GPUBATCH_FLOAT_ARGS_2(s0, s1) , s0, s1
#define GPUBATCH_OPERANDS_1(T) T x
#define GPUBATCH_OPERANDS_2(T) T a, T b
#define GPUBATCH_MOVED_OPERANDS_1 std::move(x)
#define GPUBATCH_MOVED_OPERANDS_2 std::move(a), std::move(b)

std::string_view to_string(Op op) noexcept;
std::optional<Op> op_from_string(std::string_view name) noexcept;
// The table's element-wise ops (OpKind::ew) and chain: output[i] depends on inputs[i] only. custom: depends on the kernel
// (KernelKind::elementwise), so false here.
bool is_elementwise(Op op) noexcept;

// ---- states ---------------------------------------------------------------------------------
// A state is 16 layers; a layer is a magnitude exponent rho in [-8, 7] and a phase theta in
// [0, 15], packed one byte per layer: high nibble rho + 8, low nibble theta. Every byte is
// therefore a valid layer; range checks happen where layers are packed.
inline constexpr std::size_t kLayersPerState = 16;
inline constexpr std::size_t kGradientsPerState = 2 * kLayersPerState;  // d/drho, d/dtheta per layer

struct Layer {
  int rho = -8;
  int theta = 0;
  friend bool operator==(const Layer&, const Layer&) = default;
};
using PackedState = std::array<std::uint8_t, kLayersPerState>;

// Throws Error(invalid_argument) when rho is outside [-8, 7] or theta outside [0, 15].
std::uint8_t pack_layer(Layer layer);
Layer unpack_layer(std::uint8_t byte) noexcept;
// layers.size() must be a multiple of 16; returns 16 bytes per state.
std::vector<std::uint8_t> pack_states(std::span<const Layer> layers);

enum class InterpolationMode : std::uint8_t {
  lerp,   // rho and theta mixed linearly
  slerp,  // rho linear, theta along the shorter arc of the 16-step circle
};

// ---- chains ---------------------------------------------------------------------------------
// A chain: element-wise steps applied in turn, each to the previous step's result (the first to
// x), some with a second operand from the request's extra inputs. It runs as one generated
// kernel that keeps intermediates in registers; requests whose chains have the same shape (the
// same ops, kernels and wiring; scalars may differ) are batched into one ragged dispatch.
inline constexpr std::size_t kMaxChainSteps = 64;

struct ChainStep {
  Op op = Op::relu;      // an element-wise op (OpKind::ew), or custom
  float scalar = 0.0f;   // the op's first scalar (scale's factor, lerp's t, clamp's lo), a custom kernel's p
  std::int32_t input = -1;  // two-input ops and kernels: index into Request::inputs
  KernelHandle kernel;      // Op::custom: an element-wise kernel from register_kernel()
  float scalar2 = 0.0f;     // the op's second scalar (clamp's hi)
};

// Immutable once made (share it between requests freely).
class ChainShape {
 public:
  ChainShape(std::vector<ChainStep> steps, std::uint32_t inputs);
  const std::vector<ChainStep>& steps() const noexcept { return steps_; }
  std::uint32_t inputs() const noexcept { return inputs_; }  // extra inputs the steps use
  // The shape's identity: ops, kernels and wiring, not scalars. Equal keys run the same kernel.
  const std::string& key() const noexcept { return key_; }
  // "relu -> scale -> add(in0)", for messages.
  std::string describe() const;

 private:
  std::vector<ChainStep> steps_;
  std::uint32_t inputs_ = 0;
  std::string key_;
};

struct Request;

// Builds a chain request: gpubatch::chain(x).relu().scale(2.0f).add(y) converts to a Request
// (handle.submit(chain(x).relu().scale(2).add(y)), device.run(...)). Each binary step takes a new
// extra input, which must have x's length (validate() checks). On a temporary each call returns
// the builder by value; on a named builder it adds the step in place (then std::move(b).build()).
class ChainBuilder {
 public:
  explicit ChainBuilder(std::vector<float> x) : x_(std::move(x)) {}

#define GPUBATCH_CHAIN_STEP(NAME, PARAMS, ...)                      \
  ChainBuilder& NAME PARAMS& { __VA_ARGS__; return *this; }         \
  ChainBuilder NAME PARAMS&& { __VA_ARGS__; return std::move(*this); }
  // One step per element-wise op of the table: relu(), scale(factor), add(y), lerp(y, t),
  // clamp(lo, hi), ... (a two-input op takes its second operand `y`, of x's length).
#define GPUBATCH_CHAIN_FLOATS_0()
#define GPUBATCH_CHAIN_FLOATS_1(s0) float s0
#define GPUBATCH_CHAIN_FLOATS_2(s0, s1) float s0, float s1
#define GPUBATCH_CHAIN_SIG_1(scalars, params) GPUBATCH_CHAIN_FLOATS_##scalars params
#define GPUBATCH_CHAIN_SIG_2(scalars, params) std::vector<float> y GPUBATCH_FLOAT_PARAMS_##scalars params
#define GPUBATCH_CHAIN_Y_1 nullptr
#define GPUBATCH_CHAIN_Y_2 &y
#define GPUBATCH_SCALAR_VALUES_0() 0.0f, 0.0f
#define GPUBATCH_SCALAR_VALUES_1(s0) s0, 0.0f
#define GPUBATCH_SCALAR_VALUES_2(s0, s1) s0, s1
#define GPUBATCH_CHAIN_OP_STEP(name, kind, arity, scalars, params, ...)    \
  GPUBATCH_IF_EW_##kind(GPUBATCH_CHAIN_STEP(name, (GPUBATCH_CHAIN_SIG_##arity(scalars, params)), \
                                            push(Op::name, GPUBATCH_CHAIN_Y_##arity, GPUBATCH_SCALAR_VALUES_##scalars params)))
  GPUBATCH_OPS(GPUBATCH_CHAIN_OP_STEP)
#undef GPUBATCH_CHAIN_OP_STEP
  // An element-wise custom kernel (one or two inputs); p is its scalar.
  GPUBATCH_CHAIN_STEP(custom, (KernelHandle kernel, float p = 0.0f), push(Op::custom, nullptr, p, 0.0f, std::move(kernel)))
  GPUBATCH_CHAIN_STEP(custom, (KernelHandle kernel, std::vector<float> y, float p = 0.0f),
                      push(Op::custom, &y, p, 0.0f, std::move(kernel)))
  // Any element-wise op: `y` for two-input ops, `scalar` and `scalar2` for its scalars.
  GPUBATCH_CHAIN_STEP(apply, (Op op, std::vector<float> y = {}, float scalar = 0.0f, float scalar2 = 0.0f),
                      push(op, y.empty() ? nullptr : &y, scalar, scalar2))
#undef GPUBATCH_CHAIN_STEP

  Request build() &&;
  operator Request() &&;  // implicit, so that submit(chain(x)...) reads naturally

 private:
  void push(Op op, std::vector<float>* y, float scalar, float scalar2, KernelHandle kernel = nullptr);
  std::vector<float> x_;
  std::vector<std::vector<float>> inputs_;
  std::vector<ChainStep> steps_;
};

inline ChainBuilder chain(std::vector<float> x) { return ChainBuilder(std::move(x)); }

// ---- requests -------------------------------------------------------------------------------
struct Request {
  Op op = Op::relu;
  std::vector<float> a;                // x for unary ops; left operand; matmul A (M x K)
  std::vector<float> b;                // right operand; matmul B (K x N)
  std::vector<std::uint8_t> states_a;  // packed states: gradients input, interpolate from
  std::vector<std::uint8_t> states_b;  // packed states: interpolate to
  float scalar = 0.0f;                 // the first scalar: scale factor; t of lerp and interpolate; clamp's lo
  float scalar2 = 0.0f;                // the second scalar: clamp's hi
  std::uint32_t m = 0, k = 0, n = 0;   // matmul dimensions
  InterpolationMode mode = InterpolationMode::lerp;
  std::shared_ptr<const ChainShape> chain;  // Op::chain: the steps (x is `a`)
  std::vector<std::vector<float>> inputs;   // Op::chain: extra inputs, each of x's length
  KernelHandle kernel;                      // Op::custom: the kernel (a, b and scalar as p)
  // Caller memory from Device::allocate_host, used in place (no CPU copy): host_a is read instead
  // of `a` and host_b instead of `b` (which must then be empty; host_b only for ops of two float
  // inputs: add ... lerp, dot, matmul's B, a custom kernel of two inputs); host_result receives
  // the values instead of Result::values (it must hold exactly the result). None for gradients or
  // interpolate. The caller must not touch them while the request is in flight.
  std::shared_ptr<detail::HostMemory> host_a, host_b, host_result;

  // One constructor per element-wise op of the table: relu(x), scale(x, factor), add(a, b),
  // lerp(a, b, t), clamp(x, lo, hi), ...
#define GPUBATCH_REQUEST_CTOR(name, kind, arity, scalars, params, ...) \
  GPUBATCH_IF_EW_##kind(static Request name(GPUBATCH_OPERANDS_##arity(std::vector<float>) GPUBATCH_FLOAT_PARAMS_##scalars params);)
  GPUBATCH_OPS(GPUBATCH_REQUEST_CTOR)
#undef GPUBATCH_REQUEST_CTOR
  static Request dot(std::vector<float> a, std::vector<float> b);
  static Request matmul(std::vector<float> a, std::vector<float> b, std::uint32_t m,
                        std::uint32_t k, std::uint32_t n);
  static Request gradients(std::vector<std::uint8_t> states);
  static Request interpolate(std::vector<std::uint8_t> a, std::vector<std::uint8_t> b, float t,
                             InterpolationMode mode);
  static Request unary(Op op, std::vector<float> x, float scalar = 0.0f, float scalar2 = 0.0f);
  // Any op of arity 2 without states (add ... lerp, dot) on a and b.
  static Request binary(Op op, std::vector<float> a, std::vector<float> b, float scalar = 0.0f);
  // A chain with a prepared (shareable) shape; `inputs` are its extra inputs.
  static Request chain_of(std::shared_ptr<const ChainShape> shape, std::vector<float> x,
                          std::vector<std::vector<float>> inputs = {});
  // A registered kernel on a (and b when it takes two inputs) with scalar p.
  static Request custom(KernelHandle kernel, std::vector<float> a, std::vector<float> b = {},
                        float p = 0.0f);
  // `op` with its input a (x) read in place from `x`; b and scalar as for the vector requests.
  static Request from_host(Op op, const HostBuffer& x, std::vector<float> b = {}, float scalar = 0.0f);
  // `op` of two inputs (add ... lerp, dot) with both read in place from host buffers.
  static Request from_hosts(Op op, const HostBuffer& a, const HostBuffer& b, float scalar = 0.0f);
  // Writes the result into `out` instead of Result::values.
  Request& deliver_to(const HostBuffer& out) &;
  Request&& deliver_to(const HostBuffer& out) &&;
};

// The answer to one request: `values` for every float-producing op (dot gives one value,
// gradients 32 per state), `states` for interpolate.
struct Result {
  std::vector<float> values;
  std::vector<std::uint8_t> states;
};

// Throws Error(invalid_argument) naming the cause when the request cannot be run: empty input,
// mismatched lengths, scalars that break the op's rule (clamp: lo <= hi, neither NaN), matmul sizes that are not M x K and K x N, t outside [0, 1] or NaN for
// interpolate, state data that is not a whole number of 16-byte states; a chain without steps,
// with more than kMaxChainSteps, with extra inputs of another length than x, or with a step that
// is not element-wise; a custom request without a kernel or with the wrong number of inputs.
// Throws Error(request_too_large) for a well-formed request whose output would hold more than
// 2^32 floats (a matmul's M x N, a custom kernel's output).
void validate(const Request& request);

// "relu request", "chain request (relu -> scale -> add(in0))", "custom request (kernel 'cube')".
std::string describe_op(const Request& request);

// Inline: the strand calls these for every request of every batch (grouping, layout, encoding),
// where out-of-line calls into another file were 15 % of its time on the H100's crowd (perf,
// BENCHMARKS.md seventh session of 2026-11-27).
// The request's input a: host_a's memory when it has one, else `a`.
inline std::span<const float> input_a(const Request& r) noexcept {
  return r.host_a ? std::span<const float>(r.host_a->data, r.host_a->floats) : std::span<const float>(r.a);
}
// The request's input b: host_b's memory when it has one, else `b`.
inline std::span<const float> input_b(const Request& r) noexcept {
  return r.host_b ? std::span<const float>(r.host_b->data, r.host_b->floats) : std::span<const float>(r.b);
}
// Whether it reads or writes any HostBuffer (host_a, host_b or host_result).
inline bool uses_host_buffers(const Request& r) noexcept { return r.host_a || r.host_b || r.host_result; }
// Whether its op reads a second float input b (add ... lerp, dot, matmul, a custom kernel of two).
bool has_float_b(const Request& request) noexcept;

// Sizes of a request's data as the device sees it (after validate()).
std::size_t input_bytes(const Request& request) noexcept;
namespace detail {
std::size_t output_bytes_other(const Request& request) noexcept;  // output_bytes of dot ... custom
}  // namespace detail
inline std::size_t output_bytes(const Request& r) noexcept {
  switch (r.op) {
    case Op::dot: case Op::matmul: case Op::gradients: case Op::interpolate: case Op::custom:
      return detail::output_bytes_other(r);
    default:  // element-wise and chains: one float out per float of x
      return input_a(r).size() * sizeof(float);
  }
}

}  // namespace gpubatch
