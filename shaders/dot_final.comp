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
  // The segment's partial sums, within those the first pass wrote: a count or start read from a
  // stale or damaged table can neither make this loop long nor read past scratch (on the H100 a
  // copy-engine dot once never finished; docs/RELIABILITY.md).
  uint first = min(s.start, pc.scratch_count);
  uint n = min(s.u0, pc.scratch_count - first);
  float sum = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < n; i += WORKGROUP_SIZE) sum += scratch.v[first + i];
  partial[gl_LocalInvocationID.x] = sum;
  barrier();
  for (uint stride = WORKGROUP_SIZE / 2; stride > 0; stride /= 2) {
    if (gl_LocalInvocationID.x < stride)
      partial[gl_LocalInvocationID.x] += partial[gl_LocalInvocationID.x + stride];
    barrier();
  }
  if (gl_LocalInvocationID.x == 0) FloatsOut(s.dst).v[0] = partial[0];
}
