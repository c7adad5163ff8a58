#pragma once
// What can be asked of the GPU: the operations, one request's description, and its result.
// A Request owns its inputs (move vectors in to avoid a copy); the same type feeds the synchronous
// path, the batching executor and the CPU reference.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/host_buffer.hpp"

namespace gpubatch {

enum class Op : std::uint8_t {
  relu, scale, add, sub, mul, sigmoid, tanh, swish, gelu,  // element-wise
  dot,          // sum(a[i] * b[i]) -> one float
  matmul,       // row-major M x K times K x N -> M x N
  lerp,         // a + t * (b - a), one t per request
  gradients,    // compute_gradients(states) -> 32 floats per state
  interpolate,  // interpolate(a, b, t, mode) -> packed states
  chain,        // element-wise steps applied in turn to x (and extra inputs): one fused kernel
  custom,       // a kernel registered with register_kernel()
};
inline constexpr std::size_t kOpCount = 16;
// relu ... interpolate: the ops a Request describes by its data alone (chain needs its steps,
// custom its kernel). Tests that pick random ops pick among these.
inline constexpr std::size_t kBuiltinOpCount = 14;

std::string_view to_string(Op op) noexcept;
std::optional<Op> op_from_string(std::string_view name) noexcept;
// relu ... gelu, lerp, chain: output[i] depends on inputs[i] only. custom: depends on the kernel
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
  Op op = Op::relu;      // relu scale add sub mul sigmoid tanh swish gelu lerp, or custom
  float scalar = 0.0f;   // scale's factor, lerp's t, a custom kernel's p
  std::int32_t input = -1;  // add sub mul lerp, two-input kernels: index into Request::inputs
  KernelHandle kernel;      // Op::custom: an element-wise kernel from register_kernel()
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
  GPUBATCH_CHAIN_STEP(relu, (), push(Op::relu))
  GPUBATCH_CHAIN_STEP(scale, (float factor), push(Op::scale, factor))
  GPUBATCH_CHAIN_STEP(sigmoid, (), push(Op::sigmoid))
  GPUBATCH_CHAIN_STEP(tanh, (), push(Op::tanh))
  GPUBATCH_CHAIN_STEP(swish, (), push(Op::swish))
  GPUBATCH_CHAIN_STEP(gelu, (), push(Op::gelu))
  GPUBATCH_CHAIN_STEP(add, (std::vector<float> y), push(Op::add, 0.0f, &y))
  GPUBATCH_CHAIN_STEP(sub, (std::vector<float> y), push(Op::sub, 0.0f, &y))
  GPUBATCH_CHAIN_STEP(mul, (std::vector<float> y), push(Op::mul, 0.0f, &y))
  GPUBATCH_CHAIN_STEP(lerp, (std::vector<float> y, float t), push(Op::lerp, t, &y))
  // An element-wise custom kernel (one or two inputs); p is its scalar.
  GPUBATCH_CHAIN_STEP(custom, (KernelHandle kernel, float p = 0.0f), push(Op::custom, p, nullptr, std::move(kernel)))
  GPUBATCH_CHAIN_STEP(custom, (KernelHandle kernel, std::vector<float> y, float p = 0.0f),
                      push(Op::custom, p, &y, std::move(kernel)))
  // Any element-wise op (relu ... gelu, lerp): `y` for add sub mul lerp, `scalar` for scale, lerp.
  GPUBATCH_CHAIN_STEP(apply, (Op op, std::vector<float> y = {}, float scalar = 0.0f),
                      push(op, scalar, y.empty() ? nullptr : &y))
#undef GPUBATCH_CHAIN_STEP

  Request build() &&;
  operator Request() &&;  // implicit, so that submit(chain(x)...) reads naturally

 private:
  void push(Op op, float scalar = 0.0f, std::vector<float>* y = nullptr, KernelHandle kernel = nullptr);
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
  float scalar = 0.0f;                 // scale factor; t of lerp and interpolate
  std::uint32_t m = 0, k = 0, n = 0;   // matmul dimensions
  InterpolationMode mode = InterpolationMode::lerp;
  std::shared_ptr<const ChainShape> chain;  // Op::chain: the steps (x is `a`)
  std::vector<std::vector<float>> inputs;   // Op::chain: extra inputs, each of x's length
  KernelHandle kernel;                      // Op::custom: the kernel (a, b and scalar as p)
  // Caller memory from Device::allocate_host, used in place (no CPU copy): host_a is read instead
  // of `a` (which must then be empty); host_result receives the values instead of
  // Result::values (it must hold exactly the result). Neither for gradients or interpolate.
  // The caller must not touch them while the request is in flight.
  std::shared_ptr<detail::HostMemory> host_a, host_result;

  static Request relu(std::vector<float> x);
  static Request scale(std::vector<float> x, float factor);
  static Request add(std::vector<float> a, std::vector<float> b);
  static Request sub(std::vector<float> a, std::vector<float> b);
  static Request mul(std::vector<float> a, std::vector<float> b);
  static Request sigmoid(std::vector<float> x);
  static Request tanh(std::vector<float> x);
  static Request swish(std::vector<float> x);
  static Request gelu(std::vector<float> x);
  static Request dot(std::vector<float> a, std::vector<float> b);
  static Request matmul(std::vector<float> a, std::vector<float> b, std::uint32_t m,
                        std::uint32_t k, std::uint32_t n);
  static Request lerp(std::vector<float> a, std::vector<float> b, float t);
  static Request gradients(std::vector<std::uint8_t> states);
  static Request interpolate(std::vector<std::uint8_t> a, std::vector<std::uint8_t> b, float t,
                             InterpolationMode mode);
  static Request unary(Op op, std::vector<float> x, float scalar = 0.0f);
  // A chain with a prepared (shareable) shape; `inputs` are its extra inputs.
  static Request chain_of(std::shared_ptr<const ChainShape> shape, std::vector<float> x,
                          std::vector<std::vector<float>> inputs = {});
  // A registered kernel on a (and b when it takes two inputs) with scalar p.
  static Request custom(KernelHandle kernel, std::vector<float> a, std::vector<float> b = {},
                        float p = 0.0f);
  // `op` with its input a (x) read in place from `x`; b and scalar as for the vector requests.
  static Request from_host(Op op, const HostBuffer& x, std::vector<float> b = {}, float scalar = 0.0f);
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
// mismatched lengths, matmul sizes that are not M x K and K x N, t outside [0, 1] or NaN for
// interpolate, state data that is not a whole number of 16-byte states; a chain without steps,
// with more than kMaxChainSteps, with extra inputs of another length than x, or with a step that
// is not element-wise; a custom request without a kernel or with the wrong number of inputs.
void validate(const Request& request);

// "relu request", "chain request (relu -> scale -> add(in0))", "custom request (kernel 'cube')".
std::string describe_op(const Request& request);

// The request's input a: host_a's memory when it has one, else `a`.
std::span<const float> input_a(const Request& request) noexcept;

// Sizes of a request's data as the device sees it (after validate()).
std::size_t input_bytes(const Request& request) noexcept;
std::size_t output_bytes(const Request& request) noexcept;

}  // namespace gpubatch
