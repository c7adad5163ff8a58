#ifndef GPUBATCH_OP_TABLE_HPP
#define GPUBATCH_OP_TABLE_HPP
// THE table of operations: every operation is one X(...) entry below, and everything else reads
// it (docs/KERNELS.md, "Adding an operation"): the Op enum and its names, Request's constructors,
// the handle's, the graph's and the chain builder's methods, validation, the element-wise kernels
// (shaders/elementwise.glsl is compiled once per `ew` entry at build time), fusion, the CPU
// reference and its error bounds, gpubatch-load's --op list, the fuzzers and the per-op tests.
//
// This file is read by C++ and by GLSL (glslang's preprocessor), and shaders/CMakeLists.txt
// finds the `ew` entries by matching lines that start with `X(name, ew,`: it may hold only
// preprocessor lines and comments, one entry per line.
//
// Columns:
//   name    the op's name everywhere (Op::name, Request::name, handle.name, graph.name, --op name)
//   kind    ew:      element-wise; its kernel is generated from `body` at build time, it fuses
//                    and may be a chain step; output[i] depends on the inputs' element i only
//           kernel:  its own shader(s) in shaders/ and its own validator and encoding
//           runtime: chain, custom (kernels built at run time); they must come last
//   arity   float inputs: 1 (x) or 2 (a, b)
//   scalars how many float parameters it takes (Request::scalar, then Request::scalar2)
//   params  their names, as the methods' parameters: (), (factor), (lo, hi)
//   rule    what the scalars must satisfy, else invalid_argument: none; ordered (p <= q, no NaN)
//   sample  (lo, hi, s0, s1): tests, fuzzers and gpubatch-load draw inputs from [lo, hi] and use
//           the scalars s0, s1
//   body    ew: the result, an expression in a, b (inputs), p, q (scalars) that is both GLSL (the
//           kernel, with math.glsl's helpers) and C++ (the CPU reference evaluates the same
//           expression in double, with exact helpers: src/reference.cpp)
//   error   ew: (floor, magnitude, z, L, Ly), the reference check's bound (docs/KERNELS.md):
//           |got - ref| <= (1e-5 + 4|z| 2^-24) magnitude + floor, z the argument the kernel
//           passes to exp() (Vulkan lets exp err by 3 + 2|z| ulp; 0 when it calls no exp);
//           L and Ly bound |d body/da| and |d body/db| near the inputs, for chains. `r` is the
//           exact result.
//
// Operations:
//   relu   a < 0 ? 0 : a (NaN and -0 kept)     scale  a * factor
//   add, sub, mul: a + b, a - b, a * b          lerp   a + t (b - a)
//   sigmoid 1 / (1 + e^-a)   tanh   swish a sigmoid(a)   gelu (tanh form) a sigmoid(2u)
//   abs    |a|    exp    e^a    clamp  a < lo ? lo : a > hi ? hi : a (NaN kept)
//   dot    sum a_i b_i -> one float           matmul row-major M x K times K x N
//   gradients, interpolate: packed 16-layer states (ops.hpp)
//   chain  element-wise steps fused into one kernel       custom  register_kernel() kernels
//
// name        kind     arity scalars params    rule     sample              body                                          error
#define GPUBATCH_OPS(X) \
X(relu,        ew,      1, 0, (),       none,    (-4, 4, 0, 0),      (a < 0.0 ? 0.0 : a),                            (FLT_MIN, abs(r), 0.0, 1.0, 0.0)) \
X(scale,       ew,      1, 1, (factor), none,    (-4, 4, 1.75, 0),   (a * p),                                        (FLT_MIN, abs(r), 0.0, abs(p), 0.0)) \
X(add,         ew,      2, 0, (),       none,    (-4, 4, 0, 0),      (a + b),                                        (FLT_MIN, abs(r), 0.0, 1.0, 1.0)) \
X(sub,         ew,      2, 0, (),       none,    (-4, 4, 0, 0),      (a - b),                                        (FLT_MIN, abs(r), 0.0, 1.0, 1.0)) \
X(mul,         ew,      2, 0, (),       none,    (-4, 4, 0, 0),      (a * b),                                        (FLT_MIN, abs(r), 0.0, abs(b), abs(a))) \
X(sigmoid,     ew,      1, 0, (),       none,    (-30, 30, 0, 0),    (stable_sigmoid(a)),                            (1e-30, abs(r), abs(a), 0.25, 0.0)) \
X(tanh,        ew,      1, 0, (),       none,    (-30, 30, 0, 0),    (stable_tanh(a)),                               (1e-30, abs(r), 2.0 * abs(a), 1.0, 0.0)) \
X(swish,       ew,      1, 0, (),       none,    (-30, 30, 0, 0),    (a * stable_sigmoid(a)),                        (1e-30, abs(r), abs(a), 1.15, 0.0)) \
X(gelu,        ew,      1, 0, (),       none,    (-30, 30, 0, 0),    (a * stable_sigmoid(gelu_argument(a))),         (1e-30, abs(r), abs(gelu_argument(a)), 1.15, 0.0)) \
X(dot,         kernel,  2, 0, (),       none,    (-4, 4, 0, 0),      (0.0),                                          (0, 0, 0, 0, 0)) \
X(matmul,      kernel,  2, 0, (),       none,    (-4, 4, 0, 0),      (0.0),                                          (0, 0, 0, 0, 0)) \
X(lerp,        ew,      2, 1, (t),      none,    (-4, 4, 0.3, 0),    (a + p * (b - a)),                              (FLT_MIN, abs(a) + abs(p * (b - a)), 0.0, abs(1.0 - p), abs(p))) \
X(gradients,   kernel,  1, 0, (),       none,    (-4, 4, 0, 0),      (0.0),                                          (0, 0, 0, 0, 0)) \
X(interpolate, kernel,  2, 1, (t),      none,    (-4, 4, 0.37, 0),   (0.0),                                          (0, 0, 0, 0, 0)) \
X(abs,         ew,      1, 0, (),       none,    (-4, 4, 0, 0),      (abs(a)),                                       (FLT_MIN, abs(r), 0.0, 1.0, 0.0)) \
X(exp,         ew,      1, 0, (),       none,    (-30, 30, 0, 0),    (exp(a)),                                       (1e-30, abs(r), abs(a), exp(a), 0.0)) \
X(clamp,       ew,      1, 2, (lo, hi), ordered, (-4, 4, -1, 2),     (a < p ? p : (a > q ? q : a)),                  (FLT_MIN, abs(r), 0.0, 1.0, 0.0)) \
X(chain,       runtime, 1, 0, (),       none,    (-4, 4, 0, 0),      (0.0),                                          (0, 0, 0, 0, 0)) \
X(custom,      runtime, 2, 1, (p),      none,    (-4, 4, 0, 0),      (0.0),                                          (0, 0, 0, 0, 0))

#endif  // GPUBATCH_OP_TABLE_HPP
