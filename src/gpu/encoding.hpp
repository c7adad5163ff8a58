#pragma once
// Small helpers shared by everything that encodes work for the built-in kernels
// (vulkan_batch_device.cpp for ragged batches, graph.cpp for command batches): alignment, work
// division, and which built-in kernel runs an op.
#include <cstddef>
#include <cstdint>

#include "gpu/batch_layout.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::gpu {

inline constexpr std::size_t kDataAlignment = 16;
constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }
constexpr std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint32_t>((a + b - 1) / b);
}

// Which built-in kernel runs an op (dot's first pass; "dot_final" sums its partials).
inline const char* kernel_name(Op op) {
  switch (op) {
    case Op::relu: return "relu";
    case Op::scale: return "scale";
    case Op::add: return "add";
    case Op::sub: return "sub";
    case Op::mul: return "mul";
    case Op::sigmoid: return "sigmoid";
    case Op::tanh: return "tanh";
    case Op::swish: return "swish";
    case Op::gelu: return "gelu";
    case Op::dot: return "dot_partial";
    case Op::matmul: return "matmul";
    case Op::lerp: return "lerp";
    case Op::gradients: return "gradients";
    case Op::interpolate: return "interpolate";
    case Op::chain: case Op::custom: return "";  // generated / user kernels, built at run time
  }
  return "";
}

// Workgroups one request needs: dot, a block of kDotBlock elements each; matmul, a 16 x 16 tile.
inline std::uint32_t dot_blocks(std::uint64_t n) { return ceil_div(n, kDotBlock); }
inline std::uint32_t matmul_blocks(std::uint32_t m, std::uint32_t n) {
  return ceil_div(m, kMatmulTile) * ceil_div(n, kMatmulTile);
}

}  // namespace gpubatch::gpu
