#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// compute_gradients: one invocation per layer (byte) of the packed states; writes d/drho and
// d/dtheta. f depends on rho alone, so d/drho comes from the 16-entry table both CPU and GPU use
// and d/dtheta is exactly 0.
layout(local_size_x = WORKGROUP_SIZE) in;

void main() {
  uint block = block_index();
  if (block >= pc.block_count) return;
  uint g = block * WORKGROUP_SIZE + gl_LocalInvocationID.x;
  Segment s = SegmentTable(pc.segments).s[find_segment(block, g)];
  uint k = g - s.start;
  if (k >= s.len) return;
  uint byte_value = (WordsIn(s.a).v[k / 4] >> (8 * (k % 4))) & 0xFFu;
  FloatsOut dst = FloatsOut(s.dst);
  dst.v[2 * k] = pc.table[byte_value >> 4];
  dst.v[2 * k + 1] = 0.0;
}
