#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Pass 1 of dot: each workgroup owns one block of DOT_BLOCK elements of one segment (blocks never
// straddle segments) and writes its partial sum; a segment of one block writes its result directly.
// Any length works: long vectors simply get more blocks, summed by dot_final.
layout(local_size_x = WORKGROUP_SIZE) in;
#define ITEMS 4
#define DOT_BLOCK (WORKGROUP_SIZE * ITEMS)
shared float partial[WORKGROUP_SIZE];

void main() {
  uint block = block_index();
  if (block >= pc.block_count) return;  // whole workgroup leaves together
  Segment s = SegmentTable(pc.segments).s[BlockTable(pc.blocks).v[block]];
  uint base = (block - s.start) * DOT_BLOCK;
  FloatsIn a = FloatsIn(s.a);
  FloatsIn b = FloatsIn(s.b);
  float sum = 0.0;
  for (uint i = 0; i < ITEMS; ++i) {
    uint k = base + i * WORKGROUP_SIZE + gl_LocalInvocationID.x;
    if (k < s.len) sum += a.v[k] * b.v[k];
  }
  partial[gl_LocalInvocationID.x] = sum;
  barrier();
  for (uint stride = WORKGROUP_SIZE / 2; stride > 0; stride /= 2) {
    if (gl_LocalInvocationID.x < stride)
      partial[gl_LocalInvocationID.x] += partial[gl_LocalInvocationID.x + stride];
    barrier();
  }
  if (gl_LocalInvocationID.x == 0) {
    if (s.u0 == 1) FloatsOut(s.dst).v[0] = partial[0];
    else Floats(pc.scratch).v[block] = partial[0];
  }
}
