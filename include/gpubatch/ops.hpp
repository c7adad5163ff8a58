#pragma once
// What can be asked of the GPU: the operations, one request's description, and its result.
// A Request owns its inputs (move vectors in to avoid a copy); the same type feeds the synchronous
// path, the batching executor and the CPU reference.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace gpubatch {

enum class Op : std::uint8_t {
  relu, scale, add, sub, mul, sigmoid, tanh, swish, gelu,  // element-wise
  dot,          // sum(a[i] * b[i]) -> one float
  matmul,       // row-major M x K times K x N -> M x N
  lerp,         // a + t * (b - a), one t per request
  gradients,    // compute_gradients(states) -> 32 floats per state
  interpolate,  // interpolate(a, b, t, mode) -> packed states
};
inline constexpr std::size_t kOpCount = 14;
// The ops a Request describes by its data alone. Tests that pick random ops pick among these.
inline constexpr std::size_t kBuiltinOpCount = 14;

std::string_view to_string(Op op) noexcept;
std::optional<Op> op_from_string(std::string_view name) noexcept;
bool is_elementwise(Op op) noexcept;  // relu ... gelu, lerp: output[i] depends on inputs[i] only

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
};

// The answer to one request: `values` for every float-producing op (dot gives one value,
// gradients 32 per state), `states` for interpolate.
struct Result {
  std::vector<float> values;
  std::vector<std::uint8_t> states;
};

// Throws Error(invalid_argument) naming the cause when the request cannot be run: empty input,
// mismatched lengths, matmul sizes that are not M x K and K x N, t outside [0, 1] or NaN for
// interpolate, state data that is not a whole number of 16-byte states.
void validate(const Request& request);

// Sizes of a request's data as the device sees it (after validate()).
std::size_t input_bytes(const Request& request) noexcept;
std::size_t output_bytes(const Request& request) noexcept;

}  // namespace gpubatch
