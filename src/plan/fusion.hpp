#pragma once
// Fusion of element-wise operations: a group of consecutive element-wise operations over
// vectors of one length becomes one generated kernel that loads each external input once, keeps
// intermediates in registers and stores only the values needed outside the group.
//
// The generated kernel runs on ragged segments like the built-ins (so a batch of chains of one
// shape, of different lengths, is one dispatch). Per segment:
//   a   -> the segment's address table: uvec2 per input (in order), then per output
//   b   -> the segment's scalar table: each operation's scalars in turn (op_info(op).scalars each,
//          one for a custom kernel)
//   start, len: as for every element-wise kernel
// Each operation's expression is its body in the op table (the one its built-in kernel uses, with
// stable_sigmoid etc. from math.glsl), evaluated into a `precise` variable so that the driver
// cannot contract across operations: results match the unfused kernels.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan/custom_kernel.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::gpu {

struct FusedStep {
  Op op = Op::relu;                             // when kernel is null
  std::shared_ptr<const CustomKernel> kernel;   // an element-wise custom kernel, else null
  // Operands: >= 0, the value of an earlier step; < 0, external input -(operand + 1).
  std::int32_t operand[2] = {0, 0};
  std::uint32_t arity = 1;
  std::int32_t scalar = -1;  // index of its first scalar in the scalar table, or -1
};

struct FusedShape {
  std::uint32_t inputs = 0;
  std::uint32_t scalars = 0;
  std::vector<FusedStep> steps;
  std::vector<std::uint32_t> outputs;  // steps whose values are stored, in address-table order
};

// Operations the fused kernel generator understands: the table's element-wise ops.
bool fusable(Op op) noexcept;
std::uint32_t arity(Op op) noexcept;
std::uint32_t scalars(Op op) noexcept;  // of an element-wise op

// The shape's identity (scalars and lengths excluded): the kernel cache's key.
std::string fused_key(const FusedShape& shape);
// The generated GLSL compute shader.
std::string fused_source(const FusedShape& shape);

}  // namespace gpubatch::gpu
