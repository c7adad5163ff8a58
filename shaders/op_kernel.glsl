// Every built-in element-wise kernel: one invocation per element of the concatenated segments. The build
// compiles this once per `ew` entry of include/gpubatch/op_table.hpp, with GPUBATCH_OP defined
// to the entry's name (shaders/CMakeLists.txt); the result is the entry's body, with a and b the
// inputs, p = the segment's p0 and q = uintBitsToFloat(u0) its scalars.
#include "common.glsl"
#include "math.glsl"
#include "gpubatch/op_table.hpp"
layout(local_size_x = WORKGROUP_SIZE) in;

// apply_<name>() and arity_<name> for every element-wise entry.
#define GPUBATCH_KERNEL_ew(name, arity, body) \
  float apply_##name(float a, float b, float p, float q) { return body; } const uint arity_##name = arity;
#define GPUBATCH_KERNEL_kernel(name, arity, body)
#define GPUBATCH_KERNEL_runtime(name, arity, body)
#define GPUBATCH_KERNEL(name, kind, arity, scalars, params, rule, sample, body, error) \
  GPUBATCH_KERNEL_##kind(name, arity, body)
GPUBATCH_OPS(GPUBATCH_KERNEL)

#define GPUBATCH_CAT2(x, y) x##y
#define GPUBATCH_CAT(x, y) GPUBATCH_CAT2(x, y)

void main() {
  uint block = block_index();
  if (block >= pc.block_count) return;
  uint g = block * WORKGROUP_SIZE + gl_LocalInvocationID.x;
  Segment s = SegmentTable(pc.segments).s[find_segment(block, g)];
  uint k = g - s.start;
  if (k >= s.len) return;
  float b = 0.0;
  if (GPUBATCH_CAT(arity_, GPUBATCH_OP) == 2u) b = FloatsIn(s.b).v[k];
  FloatsOut(s.dst).v[k] = GPUBATCH_CAT(apply_, GPUBATCH_OP)(FloatsIn(s.a).v[k], b, s.p0, uintBitsToFloat(s.u0));
}
