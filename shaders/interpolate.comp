#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// interpolate(a, b, t, mode) on packed states, one invocation per 4 layers (one 32-bit word).
// Integer arithmetic with t in 1/65536 steps and round-half-up, exactly as the CPU reference
// does, so both agree bit for bit.
layout(local_size_x = WORKGROUP_SIZE) in;

int mix_round(int from, int delta, int t16) {
  // floor((from * 65536 + t16 * delta + 32768) / 65536); the bias keeps the shift's operand >= 0.
  int v = from * 65536 + t16 * delta + 32768 + 32 * 65536;
  return (v >> 16) - 32;
}

uint interpolate_layer(uint la, uint lb, int t16, bool slerp) {
  int rho_a = int(la >> 4) - 8, rho_b = int(lb >> 4) - 8;
  int th_a = int(la & 15u), th_b = int(lb & 15u);
  int rho = clamp(mix_round(rho_a, rho_b - rho_a, t16), -8, 7);
  int d = th_b - th_a;
  if (slerp) {
    if (d > 8) d -= 16;
    else if (d < -8) d += 16;
  }
  int theta = mix_round(th_a, d, t16) & 15;
  return (uint(rho + 8) << 4) | uint(theta);
}

void main() {
  uint block = block_index();
  if (block >= pc.block_count) return;
  uint g = block * WORKGROUP_SIZE + gl_LocalInvocationID.x;
  Segment s = SegmentTable(pc.segments).s[find_segment(block, g)];
  uint k = g - s.start;
  if (k >= s.len) return;
  uint wa = WordsIn(s.a).v[k], wb = WordsIn(s.b).v[k];
  int t16 = int(s.u1);
  bool slerp = s.u0 == 1u;
  uint word = 0u;
  for (uint i = 0; i < 4; ++i) {
    uint shift = 8 * i;
    word |= interpolate_layer((wa >> shift) & 0xFFu, (wb >> shift) & 0xFFu, t16, slerp) << shift;
  }
  WordsOut(s.dst).v[k] = word;
}
