// Body of every user element-wise kernel (register_kernel: src/gpu/custom_kernels.cpp): one
// invocation per element of the concatenated segments.
// The including file defines apply() and, for two inputs, BINARY.
#include "common.glsl"
layout(local_size_x = WORKGROUP_SIZE) in;

#ifdef BINARY
float apply(float a, float b, float p);
#else
float apply(float x, float p);
#endif

void main() {
  uint block = block_index();
  if (block >= pc.block_count) return;
  uint g = block * WORKGROUP_SIZE + gl_LocalInvocationID.x;
  Segment s = SegmentTable(pc.segments).s[find_segment(block, g)];
  uint k = g - s.start;
  if (k >= s.len) return;
#ifdef BINARY
  FloatsOut(s.dst).v[k] = apply(FloatsIn(s.a).v[k], FloatsIn(s.b).v[k], s.p0);
#else
  FloatsOut(s.dst).v[k] = apply(FloatsIn(s.a).v[k], s.p0);
#endif
}
