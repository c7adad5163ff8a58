#pragma once
// Small helpers shared by everything that encodes work for the built-in kernels
// (batch_plan.cpp and vulkan_batch_device.cpp for ragged batches, graph_plan.cpp and
// graph_record.cpp for command batches): alignment, work division, and which built-in kernel
// runs an op.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plan/batch_layout.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::plan {

inline constexpr std::size_t kDataAlignment = 16;
constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }
constexpr std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint32_t>((a + b - 1) / b);
}

// Which built-in kernel runs an op: its name in the table (an element-wise op's kernel is
// generated from its entry under that name), except dot's first pass, "dot_partial" ("dot_final"
// sums its partials). Chain and custom kernels are built at run time: "".
inline std::string_view kernel_name(Op op) {
  if (op == Op::dot) return "dot_partial";
  return op_info(op).kind == OpKind::runtime ? std::string_view() : op_info(op).name;
}

// Workgroups one request needs: dot, a block of kDotBlock elements each; matmul, a 16 x 16 tile.
inline std::uint32_t dot_blocks(std::uint64_t n) { return ceil_div(n, kDotBlock); }
inline std::uint32_t matmul_blocks(std::uint32_t m, std::uint32_t n) {
  return ceil_div(m, kMatmulTile) * ceil_div(n, kMatmulTile);
}

}  // namespace gpubatch::plan
