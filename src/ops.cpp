#include "gpubatch/ops.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "gpubatch/error.hpp"

namespace gpubatch {
namespace {

[[noreturn]] void invalid(const Request& r, const std::string& why) {
  throw Error(ErrorCode::invalid_argument, describe_op(r) + ": " + why);
}

// Well-formed, but larger than a kernel can address (docs/RELIABILITY.md: request_too_large).
[[noreturn]] void too_large(const Request& r, const std::string& why) {
  throw Error(ErrorCode::request_too_large, describe_op(r) + ": " + why);
}

void require_data(const Request& r, std::size_t size, const char* what) {
  if (size == 0) invalid(r, std::string(what) + " is empty");
}

void require_same_length(const Request& r) {
  require_data(r, input_a(r).size(), "input a");
  if (input_a(r).size() != input_b(r).size())
    invalid(r, "inputs differ in length (a has " + std::to_string(input_a(r).size()) + ", b has " +
                   std::to_string(input_b(r).size()) + " elements)");
}

void require_states(const Request& r, std::size_t size, const char* what) {
  require_data(r, size, what);
  if (size % kLayersPerState != 0)
    invalid(r, std::string(what) + " has " + std::to_string(size) +
                   " bytes, not a whole number of 16-byte states");
}

// Ops a chain step may be (besides custom).
bool chain_op(Op op) { return static_cast<std::size_t>(op) < kOpCount && op_info(op).kind == OpKind::ew; }

std::string number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(v));
  return buf;
}

// The table's rule for an op's scalars; `what` names the request or step for the message.
void check_scalars(const Request& r, const OpInfo& info, float s0, float s1, const std::string& what) {
  switch (info.rule) {
    case ScalarRule::none: return;
    case ScalarRule::ordered:
      if (!(s0 <= s1))  // also catches NaN
        invalid(r, what + "lo = " + number(s0) + ", hi = " + number(s1) + ": needs lo <= hi, neither NaN");
      return;
  }
}

void validate_elementwise(const Request& r, const OpInfo& info) {
  if (info.arity == 2) require_same_length(r);
  else require_data(r, input_a(r).size(), "input");
  check_scalars(r, info, r.scalar, r.scalar2, "");
}

std::string step_name(const ChainStep& s) {
  std::string name = s.op == Op::custom ? (s.kernel ? s.kernel->name : std::string("custom?"))
                                        : std::string(to_string(s.op));
  if (s.input >= 0) name += "(in" + std::to_string(s.input) + ")";
  return name;
}

void validate_chain(const Request& r) {
  if (!r.chain) invalid(r, "no chain shape (build it with gpubatch::chain(x)...)");
  const ChainShape& shape = *r.chain;
  if (shape.steps().empty()) invalid(r, "the chain has no steps");
  if (shape.steps().size() > kMaxChainSteps)
    invalid(r, "the chain has " + std::to_string(shape.steps().size()) + " steps, more than " +
                   std::to_string(kMaxChainSteps));
  require_data(r, input_a(r).size(), "input x");
  if (shape.inputs() > shape.steps().size())
    invalid(r, "the chain declares " + std::to_string(shape.inputs()) + " extra inputs for " +
                   std::to_string(shape.steps().size()) + " steps");
  if (r.inputs.size() != shape.inputs())
    invalid(r, "the chain uses " + std::to_string(shape.inputs()) + " extra inputs, the request has " +
                   std::to_string(r.inputs.size()));
  for (std::size_t i = 0; i < r.inputs.size(); ++i)
    if (r.inputs[i].size() != input_a(r).size())
      invalid(r, "extra input in" + std::to_string(i) + " has " + std::to_string(r.inputs[i].size()) +
                     " elements, x has " + std::to_string(input_a(r).size()));
  if (!input_b(r).empty()) invalid(r, "a chain's second operands go in its extra inputs, not in b");
  for (std::size_t i = 0; i < shape.steps().size(); ++i) {
    const ChainStep& s = shape.steps()[i];
    const std::string which = "step " + std::to_string(i + 1) + " (" + step_name(s) + ")";
    std::uint32_t arity = chain_op(s.op) ? op_info(s.op).arity : 1;
    if (s.op == Op::custom) {
      if (!s.kernel) invalid(r, which + " has no kernel");
      if (s.kernel->kind != KernelKind::elementwise)
        invalid(r, which + ": kernel '" + s.kernel->name + "' is per_segment; only element-wise kernels chain");
      arity = s.kernel->inputs;
    } else if (!chain_op(s.op)) {
      invalid(r, which + " is not an element-wise operation");
    } else if (s.kernel) {
      invalid(r, which + " has a kernel but is not a custom step");
    } else {
      check_scalars(r, op_info(s.op), s.scalar, s.scalar2, which + ": ");
    }
    if (arity == 2 && (s.input < 0 || static_cast<std::uint32_t>(s.input) >= shape.inputs()))
      invalid(r, which + " needs a second input (an extra input index below " +
                     std::to_string(shape.inputs()) + ")");
    if (arity == 1 && s.input >= 0) invalid(r, which + " takes one input");
  }
}

void validate_custom(const Request& r) {
  if (!r.kernel) invalid(r, "no kernel (use a handle from register_kernel())");
  require_data(r, input_a(r).size(), "input a");
  if (r.kernel->inputs == 2) {
    if (input_a(r).size() != input_b(r).size())
      invalid(r, "inputs differ in length (a has " + std::to_string(input_a(r).size()) + ", b has " +
                     std::to_string(input_b(r).size()) + " elements)");
  } else if (!input_b(r).empty()) {
    invalid(r, "kernel '" + r.kernel->name + "' takes one input, b has " + std::to_string(input_b(r).size()) + " elements");
  }
  if (input_a(r).size() > UINT32_MAX || r.kernel->output_floats(input_a(r).size()) > UINT32_MAX)
    too_large(r, "more than 2^32 elements");
}

}  // namespace

std::string_view to_string(Op op) noexcept {
  auto i = static_cast<std::size_t>(op);
  return i < kOpCount ? kOpTable[i].name : "unknown";
}

std::optional<Op> op_from_string(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kOpCount; ++i)
    if (kOpTable[i].name == name) return static_cast<Op>(i);
  return std::nullopt;
}

bool is_elementwise(Op op) noexcept {
  return chain_op(op) || op == Op::chain;
}

std::string describe_op(const Request& r) {
  std::string s(to_string(r.op));
  s += " request";
  if (r.op == Op::chain && r.chain) s += " (" + r.chain->describe() + ")";
  if (r.op == Op::custom && r.kernel) s += " (kernel '" + r.kernel->name + "')";
  return s;
}

// ---- chains ---------------------------------------------------------------------------------

ChainShape::ChainShape(std::vector<ChainStep> steps, std::uint32_t inputs)
    : steps_(std::move(steps)), inputs_(inputs) {
  key_ = "chain/v1/i" + std::to_string(inputs_);
  for (const ChainStep& s : steps_) {
    key_ += '|';
    if (s.op == Op::custom) key_ += s.kernel ? s.kernel->key : std::string("custom?");
    else key_ += to_string(s.op);
    if (s.input >= 0) key_ += ':' + std::to_string(s.input);
  }
}

std::string ChainShape::describe() const {
  std::string s;
  for (const ChainStep& step : steps_) {
    if (!s.empty()) s += " -> ";
    s += step_name(step);
  }
  return s;
}

void ChainBuilder::push(Op op, std::vector<float>* y, float scalar, float scalar2, KernelHandle kernel) {
  ChainStep step{op, scalar, -1, std::move(kernel), scalar2};
  if (y) {
    step.input = static_cast<std::int32_t>(inputs_.size());
    inputs_.push_back(std::move(*y));
  }
  steps_.push_back(std::move(step));
}

Request ChainBuilder::build() && {
  const auto inputs = static_cast<std::uint32_t>(inputs_.size());
  return Request::chain_of(std::make_shared<const ChainShape>(std::move(steps_), inputs), std::move(x_),
                           std::move(inputs_));
}

ChainBuilder::operator Request() && { return std::move(*this).build(); }

Request Request::chain_of(std::shared_ptr<const ChainShape> shape, std::vector<float> x,
                          std::vector<std::vector<float>> inputs) {
  Request r;
  r.op = Op::chain;
  r.chain = std::move(shape);
  r.a = std::move(x);
  r.inputs = std::move(inputs);
  return r;
}

Request Request::custom(KernelHandle kernel, std::vector<float> a, std::vector<float> b, float p) {
  Request r;
  r.op = Op::custom;
  r.kernel = std::move(kernel);
  r.a = std::move(a);
  r.b = std::move(b);
  r.scalar = p;
  return r;
}

std::uint8_t pack_layer(Layer layer) {
  if (layer.rho < -8 || layer.rho > 7)
    throw Error(ErrorCode::invalid_argument,
                "layer rho " + std::to_string(layer.rho) + " is outside [-8, 7]");
  if (layer.theta < 0 || layer.theta > 15)
    throw Error(ErrorCode::invalid_argument,
                "layer theta " + std::to_string(layer.theta) + " is outside [0, 15]");
  return static_cast<std::uint8_t>(((layer.rho + 8) << 4) | layer.theta);
}

Layer unpack_layer(std::uint8_t byte) noexcept { return {(byte >> 4) - 8, byte & 15}; }

std::vector<std::uint8_t> pack_states(std::span<const Layer> layers) {
  if (layers.size() % kLayersPerState != 0)
    throw Error(ErrorCode::invalid_argument,
                std::to_string(layers.size()) + " layers is not a whole number of 16-layer states");
  std::vector<std::uint8_t> out;
  out.reserve(layers.size());
  for (const Layer& l : layers) out.push_back(pack_layer(l));
  return out;
}

Request Request::unary(Op op, std::vector<float> x, float scalar, float scalar2) {
  Request r;
  r.op = op;
  r.a = std::move(x);
  r.scalar = scalar;
  r.scalar2 = scalar2;
  return r;
}

Request Request::binary(Op op, std::vector<float> a, std::vector<float> b, float scalar) {
  Request r;
  r.op = op;
  r.a = std::move(a);
  r.b = std::move(b);
  r.scalar = scalar;
  return r;
}

// One constructor per element-wise op of the table.
#define GPUBATCH_SET_OPERANDS_1 r.a = std::move(x);
#define GPUBATCH_SET_OPERANDS_2 r.a = std::move(a), r.b = std::move(b);
#define GPUBATCH_SET_SCALARS_0()
#define GPUBATCH_SET_SCALARS_1(s0) r.scalar = s0;
#define GPUBATCH_SET_SCALARS_2(s0, s1) r.scalar = s0, r.scalar2 = s1;
#define GPUBATCH_REQUEST_CTOR(name, kind, arity, scalars, params, ...)                                   \
  GPUBATCH_IF_EW_##kind(                                                                                \
      Request Request::name(GPUBATCH_OPERANDS_##arity(std::vector<float>) GPUBATCH_FLOAT_PARAMS_##scalars params) { \
        Request r;                                                                                     \
        r.op = Op::name;                                                                               \
        GPUBATCH_SET_OPERANDS_##arity GPUBATCH_SET_SCALARS_##scalars params return r;                  \
      })
GPUBATCH_OPS(GPUBATCH_REQUEST_CTOR)
#undef GPUBATCH_REQUEST_CTOR

Request Request::dot(std::vector<float> a, std::vector<float> b) { return binary(Op::dot, std::move(a), std::move(b)); }
Request Request::matmul(std::vector<float> a, std::vector<float> b, std::uint32_t m,
                        std::uint32_t k, std::uint32_t n) {
  Request r = binary(Op::matmul, std::move(a), std::move(b));
  r.m = m;
  r.k = k;
  r.n = n;
  return r;
}
Request Request::gradients(std::vector<std::uint8_t> states) {
  Request r;
  r.op = Op::gradients;
  r.states_a = std::move(states);
  return r;
}
Request Request::interpolate(std::vector<std::uint8_t> a, std::vector<std::uint8_t> b, float t,
                             InterpolationMode mode) {
  Request r;
  r.op = Op::interpolate;
  r.states_a = std::move(a);
  r.states_b = std::move(b);
  r.scalar = t;
  r.mode = mode;
  return r;
}

static void validate_host_buffers(const Request& r) {
  const bool states = r.op == Op::gradients || r.op == Op::interpolate;
  if (r.host_a) {
    if (states) invalid(r, "takes states, not a float host buffer");
    if (!r.a.empty()) invalid(r, "has both a vector and a host buffer as input a");
  }
  if (r.host_b) {
    if (!has_float_b(r)) invalid(r, "takes no second float input, yet has a host buffer as input b");
    if (!r.b.empty()) invalid(r, "has both a vector and a host buffer as input b");
  }
  if (r.host_result) {
    if (r.op == Op::interpolate) invalid(r, "gives states, which a float host buffer cannot hold");
    if (r.host_result->floats * sizeof(float) != output_bytes(r))
      invalid(r, "the result buffer holds " + std::to_string(r.host_result->floats) + " floats, the result has " +
                     std::to_string(output_bytes(r) / sizeof(float)));
  }
}

static void validate_op(const Request& r) {
  if (static_cast<std::size_t>(r.op) >= kOpCount)
    invalid(r, "unknown operation " + std::to_string(static_cast<int>(r.op)));
  if (op_info(r.op).kind == OpKind::ew) return validate_elementwise(r, op_info(r.op));
  switch (r.op) {
    case Op::dot:
      require_same_length(r);
      return;
    case Op::matmul: {
      if (r.m == 0 || r.k == 0 || r.n == 0)
        invalid(r, "dimensions " + std::to_string(r.m) + "x" + std::to_string(r.k) + " * " +
                       std::to_string(r.k) + "x" + std::to_string(r.n) + " include a zero");
      const auto mk = std::uint64_t{r.m} * r.k, kn = std::uint64_t{r.k} * r.n;
      if (input_a(r).size() != mk)
        invalid(r, "A has " + std::to_string(input_a(r).size()) + " elements, M x K = " +
                       std::to_string(r.m) + " x " + std::to_string(r.k) + " needs " + std::to_string(mk));
      if (input_b(r).size() != kn)
        invalid(r, "B has " + std::to_string(input_b(r).size()) + " elements, K x N = " +
                       std::to_string(r.k) + " x " + std::to_string(r.n) + " needs " + std::to_string(kn));
      if (std::uint64_t{r.m} * r.n > UINT32_MAX) too_large(r, "M x N exceeds 2^32 elements");
      return;
    }
    case Op::gradients:
      require_states(r, r.states_a.size(), "states");
      return;
    case Op::interpolate:
      require_states(r, r.states_a.size(), "states a");
      require_states(r, r.states_b.size(), "states b");
      if (r.states_a.size() != r.states_b.size())
        invalid(r, "a has " + std::to_string(r.states_a.size() / kLayersPerState) + " states, b has " +
                       std::to_string(r.states_b.size() / kLayersPerState));
      if (!(r.scalar >= 0.0f && r.scalar <= 1.0f))  // also catches NaN
        invalid(r, "t = " + std::to_string(r.scalar) + " is not in [0, 1]");
      if (r.mode != InterpolationMode::lerp && r.mode != InterpolationMode::slerp)
        invalid(r, "unknown interpolation mode");
      return;
    case Op::chain:
      validate_chain(r);
      return;
    case Op::custom:
      validate_custom(r);
      return;
    default:
      break;
  }
  invalid(r, "unknown operation " + std::to_string(static_cast<int>(r.op)));
}

void validate(const Request& r) {
  if ((r.host_a && (r.op == Op::gradients || r.op == Op::interpolate)) || (r.host_b && !has_float_b(r)))
    validate_host_buffers(r);
  validate_op(r);
  validate_host_buffers(r);
}

bool has_float_b(const Request& r) noexcept {
  if (r.op == Op::custom) return r.kernel && r.kernel->inputs == 2;
  if (r.op == Op::chain || r.op == Op::interpolate || static_cast<std::size_t>(r.op) >= kOpCount) return false;
  return op_info(r.op).arity == 2;
}

Request Request::from_hosts(Op op, const HostBuffer& a, const HostBuffer& b, float scalar) {
  Request r;
  r.op = op;
  r.host_a = a.memory();
  r.host_b = b.memory();
  r.scalar = scalar;
  return r;
}

Request Request::from_host(Op op, const HostBuffer& x, std::vector<float> b, float scalar) {
  Request r;
  r.op = op;
  r.host_a = x.memory();
  r.b = std::move(b);
  r.scalar = scalar;
  return r;
}

Request& Request::deliver_to(const HostBuffer& out) & {
  host_result = out.memory();
  return *this;
}

Request&& Request::deliver_to(const HostBuffer& out) && {
  host_result = out.memory();
  return std::move(*this);
}

std::size_t input_bytes(const Request& r) noexcept {
  std::size_t floats = input_a(r).size() + input_b(r).size();
  for (const auto& in : r.inputs) floats += in.size();
  return floats * sizeof(float) + r.states_a.size() + r.states_b.size();
}

std::size_t detail::output_bytes_other(const Request& r) noexcept {
  switch (r.op) {
    case Op::dot: return sizeof(float);
    case Op::matmul: return std::size_t{r.m} * r.n * sizeof(float);
    case Op::gradients: return r.states_a.size() * 2 * sizeof(float);
    case Op::interpolate: return r.states_a.size();
    case Op::custom: return (r.kernel ? r.kernel->output_floats(input_a(r).size()) : input_a(r).size()) * sizeof(float);
    default: return output_bytes(r);
  }
}

}  // namespace gpubatch
