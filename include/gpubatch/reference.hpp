#pragma once
// The CPU reference for every operation. Tests and gpubatch-load check every GPU result against
// it; the tolerances below are part of the contract and are justified in docs/KERNELS.md.
#include <array>
#include <optional>
#include <string>

#include "gpubatch/ops.hpp"

namespace gpubatch::reference {

// Runs the request on the CPU (double precision internally, rounded to float). Validates first.
// A chain runs step by step, rounded to float after each step (as the fused kernel does).
// Throws Error(invalid_argument) for a custom request or a chain with a custom step: user GLSL
// has no CPU reference.
Result run(const Request& request);

// Checks a result against the reference: nullopt when it agrees within the operation's bound,
// otherwise a message naming the first element that does not.
// Element-wise ops: the bound their entry in gpubatch/op_table.hpp states, namely
//   relu/scale/add/sub/mul/abs/clamp: correctly rounded, |got - ref| <= 1e-5 |ref| (NaN matches NaN)
//   sigmoid/tanh/swish/gelu/exp: |got - ref| <= (1e-5 + 4|z| 2^-24) |ref| + 1e-30, z the argument
//           of exp (Vulkan allows exp (3 + 2|z|) ulp; the floor admits denormal flush)
//   lerp:   |got - ref| <= 1e-5 (|a| + |t (b - a)|)   (cancellation near 0 is not the kernel's)
//   dot:    |got - ref| <= (d + 2) 2^-24 sum|a_i b_i|, d = depth of the GPU's summation tree
//   matmul: |got - ref| <= (K + 2) 2^-24 sum_k |a_ik b_kj|   (sequential sum over K)
//   gradients, interpolate: exact.
//   chain:  the step-by-step reference v_k, with |got_k - v_k| <= e_k composed from the steps'
//           bounds: e_k = L_k e_(k-1) + b_k + ulp(v_k)/2 + FLT_MIN, L_k bounding |d op_k/dx|
//   custom (or a chain with a custom step): a message that user kernels cannot be checked.
// An invalid request gives a message too ("cannot check: ...").
std::optional<std::string> check(const Request& request, const Result& got);

// d/drho of f(rho) = 2^(rho/4) (0 where rho <= -8) by central difference, eps = 0.001, for each
// of the 16 rho values. The magnitude does not depend on theta, so d/dtheta is 0 everywhere.
// GPU and CPU both use this table, which is what makes them agree exactly.
std::array<float, 16> rho_gradient_table();

// Depth of the summation tree the dot kernel uses for n elements (for the bound above).
std::size_t dot_summation_depth(std::size_t n);

}  // namespace gpubatch::reference
