#pragma once
// Fusion of element-wise operations: a group of consecutive element-wise operations over
// vectors of one length becomes one generated kernel that loads each external input once, keeps
// intermediates in registers and stores only the values needed outside the group.
//
// The generated kernel runs on ragged segments like the built-ins (so a batch of chains of one
// shape, of different lengths, is one dispatch). Per segment:
//   a   -> the segment's address table: uvec2 per input (in order), then per output
//   b   -> the segment's scalar table: one float per operation that takes a scalar
//   start, len: as for every element-wise kernel
// Each operation's expression is the one its built-in kernel uses (shaders/<op>.comp, with
// stable_sigmoid etc. from math.glsl), evaluated into a `precise` variable so that the driver
// cannot contract across operations: results match the unfused kernels.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/custom_kernels.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::gpu {

struct FusedStep {
  Op op = Op::relu;                             // when kernel is null
  std::shared_ptr<const CustomKernel> kernel;   // an element-wise custom kernel, else null
  // Operands: >= 0, the value of an earlier step; < 0, external input -(operand + 1).
  std::int32_t operand[2] = {0, 0};
  std::uint32_t arity = 1;
  std::int32_t scalar = -1;  // index into the scalar table, or -1
};

struct FusedShape {
  std::uint32_t inputs = 0;
  std::uint32_t scalars = 0;
  std::vector<FusedStep> steps;
  std::vector<std::uint32_t> outputs;  // steps whose values are stored, in address-table order
};

// Operations the fused kernel generator understands.
bool fusable(Op op) noexcept;   // relu ... gelu, lerp
std::uint32_t arity(Op op) noexcept;
bool takes_scalar(Op op) noexcept;

// The shape's identity (scalars and lengths excluded): the kernel cache's key.
std::string fused_key(const FusedShape& shape);
// The generated GLSL compute shader.
std::string fused_source(const FusedShape& shape);

}  // namespace gpubatch::gpu
