// Shared contract between every kernel and src/gpu/batch_encoder.cpp: the push constants, the
// segment table and the block table. Data is reached through buffer device addresses, so one
// dispatch can read and write any number of buffers and no descriptor set is ever written.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_spirv_intrinsics : require

// SignedZeroInfNanPreserve (SPV_KHR_float_controls) for 32-bit floats: without it Vulkan lets the
// compiler drop NaNs, infinities and the sign of zero (NVIDIA turns `x < 0 ? 0 : x` into a max()
// that eats NaN). gpubatch requires shaderSignedZeroInfNanPreserveFloat32 of the device.
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);

#define WORKGROUP_SIZE 256

// One request's slice of a dispatch. Field meaning per kernel is documented in batch_encoder.hpp.
struct Segment {
  uvec2 a;       // address of the first input
  uvec2 b;       // address of the second input (binary ops, lerp, dot, matmul, interpolate)
  uvec2 dst;     // address of the output
  uint start;    // element-wise: first global element; dot and matmul: first block
  uint len;      // element-wise: elements; dot: elements; matmul: unused
  float p0;      // the first scalar: scale factor, t, clamp's lo
  uint u0;       // matmul M; dot: blocks of this segment; interpolate: mode; element-wise: the second scalar's bits
  uint u1;       // matmul K; interpolate: t in 1/65536 steps
  uint u2;       // matmul N
};

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer SegmentTable { Segment s[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer BlockTable { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer FloatsIn { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer FloatsOut { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer WordsIn { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer WordsOut { uint v[]; };

layout(push_constant) uniform PushConstants {
  uvec2 segments;        // SegmentTable
  uvec2 blocks;          // BlockTable: per workgroup, the segment that holds its first item
  uvec2 scratch;         // Floats: dot partial sums, one per block
  uint block_count;      // workgroups that do work (the grid may be larger)
  uint grid_x;           // workgroups per row of the 2-D grid (maxComputeWorkGroupCount[0])
  uint segment_count;
  uint scratch_count;    // dot_final: partial sums in scratch (its reads stay below)
  float table[16];       // gradients: d/drho for each rho nibble
} pc;

uint block_index() { return gl_WorkGroupID.y * pc.grid_x + gl_WorkGroupID.x; }

// The segment that holds global element g of block `block`: between the block's first segment
// and the next block's first one, found by binary search over segment starts.
uint find_segment(uint block, uint g) {
  // One segment (a lone request, every graph step): no block table to read. Its reads and the
  // segment's are dependent reads across the bus on the direct path (staging in host memory),
  // each a round trip that a lone request's latency pays in full.
  if (pc.segment_count == 1u) return 0u;
  SegmentTable table = SegmentTable(pc.segments);
  uint lo = BlockTable(pc.blocks).v[block];
  uint hi = block + 1 < pc.block_count ? BlockTable(pc.blocks).v[block + 1] : pc.segment_count - 1;
  while (lo < hi) {
    uint mid = (lo + hi + 1) / 2;
    if (table.s[mid].start <= g) lo = mid; else hi = mid - 1;
  }
  return lo;
}
