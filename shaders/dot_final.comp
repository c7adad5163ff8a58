#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Pass 2 of dot: one workgroup per segment sums that segment's block partials.
layout(local_size_x = WORKGROUP_SIZE) in;
shared float partial[WORKGROUP_SIZE];

void main() {
  uint seg = block_index();
  if (seg >= pc.block_count) return;
  Segment s = SegmentTable(pc.segments).s[seg];
  if (s.u0 == 1) return;  // pass 1 already wrote it
  Floats scratch = Floats(pc.scratch);
  float sum = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < s.u0; i += WORKGROUP_SIZE) sum += scratch.v[s.start + i];
  partial[gl_LocalInvocationID.x] = sum;
  barrier();
  for (uint stride = WORKGROUP_SIZE / 2; stride > 0; stride /= 2) {
    if (gl_LocalInvocationID.x < stride)
      partial[gl_LocalInvocationID.x] += partial[gl_LocalInvocationID.x + stride];
    barrier();
  }
  if (gl_LocalInvocationID.x == 0) FloatsOut(s.dst).v[0] = partial[0];
}
