#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Row-major C (M x N) = A (M x K) * B (K x N), one 16 x 16 output tile per workgroup, K walked in
// 16-wide tiles through shared memory. Requests of different shapes share one dispatch: the block
// table names each tile's segment and the segment holds M, K, N.
#define TILE 16
layout(local_size_x = TILE, local_size_y = TILE) in;
shared float tile_a[TILE][TILE];
shared float tile_b[TILE][TILE];

void main() {
  uint block = block_index();
  if (block >= pc.block_count) return;
  Segment s = SegmentTable(pc.segments).s[BlockTable(pc.blocks).v[block]];
  uint M = s.u0, K = s.u1, N = s.u2;
  uint tiles_n = (N + TILE - 1) / TILE;
  uint t = block - s.start;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint row = (t / tiles_n) * TILE + ty;
  uint col = (t % tiles_n) * TILE + tx;
  FloatsIn a = FloatsIn(s.a);
  FloatsIn b = FloatsIn(s.b);
  float sum = 0.0;
  for (uint k0 = 0; k0 < K; k0 += TILE) {
    tile_a[ty][tx] = (row < M && k0 + tx < K) ? a.v[row * K + k0 + tx] : 0.0;
    tile_b[ty][tx] = (k0 + ty < K && col < N) ? b.v[(k0 + ty) * N + col] : 0.0;
    barrier();
    for (uint k = 0; k < TILE; ++k) sum += tile_a[ty][k] * tile_b[k][tx];
    barrier();
  }
  if (row < M && col < N) FloatsOut(s.dst).v[row * N + col] = sum;
}
