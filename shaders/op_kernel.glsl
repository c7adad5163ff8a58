// Every built-in element-wise kernel. The build compiles this twice per `ew` entry of
// include/gpubatch/op_table.hpp, with GPUBATCH_OP defined to the entry's name
// (shaders/CMakeLists.txt): <name>.comp, one invocation per element of the concatenated segments
// (a workgroup is one block of WORKGROUP_SIZE elements), and <name>_v4.comp with GPUBATCH_VECTOR,
// sixteen consecutive elements per invocation as four vec4 loads (EW_WIDE; a workgroup covers
// sixteen blocks; the recorder dispatches a sixteenth as many, DispatchArgs::blocks_per_workgroup).
// The entry's body is the result, with a and b the inputs, p = the segment's p0 and q =
// uintBitsToFloat(u0) its scalars.
//
// Why wide: on the direct path the kernel reads its inputs and writes its results across the bus.
// With one float per invocation a warp moves 128 bytes per load and store and looks its segment up
// for each 128; with a vec4 it moves 512 bytes, and the segment's table reads (dependent round
// trips across the bus when the tables are in host memory) are paid once per 512 bytes. That lost
// on the H100 (from HostBuffers 10-20 % fewer GB/s at four per invocation: fewer, wider loads in
// flight across the bus), so GPUs run the one-wide form; a device of host cores (lavapipe, where
// each lane's load of a buffer reference is a scalar gather and each invocation pays its segment
// lookup) runs this one. Four elements per invocation gave 1.33-1.38x the requests/s of 256-float
// relu there; sixteen 1.03-1.29x more again (2 threads x 64 in flight, five interleaved pairs) and
// 1.5-2x the GB/s of 65,536-float relu; thirty-two measured no better than sixteen
// (src/gpu/transfer_path.hpp, ew_vector_kernels).
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
#define APPLY GPUBATCH_CAT(apply_, GPUBATCH_OP)
#define ARITY GPUBATCH_CAT(arity_, GPUBATCH_OP)

// Element k of segment s (k < s.len).
void apply_one(Segment s, uint k) {
  float b = 0.0;
  if (ARITY == 2u) b = FloatsIn(s.b).v[k];
  FloatsOut(s.dst).v[k] = APPLY(FloatsIn(s.a).v[k], b, s.p0, uintBitsToFloat(s.u0));
}

#ifndef GPUBATCH_VECTOR
// A lone request whose inputs lie in the batch's staging (segment_count 1, scratch_count its
// length; vulkan_batch_device.cpp dispatches_of): its inputs' addresses ride in the push constants,
// a in `blocks` and b in `scratch`, so their loads go out beside the segment record's instead of
// after it. That dependent read cost a lone request 0.7 us on the H200 (bench/probes/submit-parts,
// PROBE_DEP; BENCHMARKS.md, thirty-first session); the record still gives dst and the scalars,
// which change from request to request while the recorded command buffer does not.
void lone_segment(uint g) {
  if (g >= pc.scratch_count) return;
  float b = 0.0;
  if (ARITY == 2u) b = FloatsIn(pc.scratch).v[g];
  float a = FloatsIn(pc.blocks).v[g];
  Segment s = SegmentTable(pc.segments).s[0];
  FloatsOut(s.dst).v[g] = APPLY(a, b, s.p0, uintBitsToFloat(s.u0));
}

void main() {
  uint block = block_index();
  if (block >= pc.block_count) return;
  uint g = block * WORKGROUP_SIZE + gl_LocalInvocationID.x;
  if (pc.segment_count == 1u && pc.scratch_count != 0u) {
    lone_segment(g);
    return;
  }
  Segment s = SegmentTable(pc.segments).s[find_segment(block, g)];
  uint k = g - s.start;
  if (k < s.len) apply_one(s, k);
}
#else
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4In { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer Vec4Out { vec4 v[]; };

bool aligned16(uvec2 address) { return (address.x & 15u) == 0u; }

// vec4s per invocation: WORKGROUP_SIZE must be a multiple of 4 * EW_WIDE, and the recorder's
// blocks_per_workgroup (vulkan_batch_device.cpp) is 4 * EW_WIDE.
#define EW_WIDE 4u

void main() {
  // EW_WIDE blocks per workgroup: invocation i takes elements g .. g+4*EW_WIDE-1 of block
  // g / WORKGROUP_SIZE (all in one block: WORKGROUP_SIZE is a multiple of 4 * EW_WIDE).
  uint g = block_index() * (WORKGROUP_SIZE * 4u * EW_WIDE) + gl_LocalInvocationID.x * 4u * EW_WIDE;
  uint block = g / WORKGROUP_SIZE;
  if (block >= pc.block_count) return;
  Segment s = SegmentTable(pc.segments).s[find_segment(block, g)];
  uint k = g - s.start;
  if (k >= s.len) return;  // past the last segment
  float q = uintBitsToFloat(s.u0);
  bool whole = k + 4u * EW_WIDE <= s.len && (k & 3u) == 0u && aligned16(s.a) && aligned16(s.dst) &&
               (ARITY == 1u || aligned16(s.b));
  if (whole) {
    uint i0 = k >> 2;
    for (uint j = 0u; j < EW_WIDE; ++j) {
      uint i = i0 + j;
      vec4 a = Vec4In(s.a).v[i];
      vec4 b = vec4(0.0);
      if (ARITY == 2u) b = Vec4In(s.b).v[i];
      Vec4Out(s.dst).v[i] = vec4(APPLY(a.x, b.x, s.p0, q), APPLY(a.y, b.y, s.p0, q), APPLY(a.z, b.z, s.p0, q),
                                 APPLY(a.w, b.w, s.p0, q));
    }
    return;
  }
  // A segment's end, or a segment that starts off a multiple of 4 (ragged lengths): one element
  // at a time, each in whichever segment holds it.
  for (uint e = 0u; e < 4u * EW_WIDE; ++e) {
    uint ge = g + e;
    if (ge - s.start >= s.len) s = SegmentTable(pc.segments).s[find_segment(block, ge)];
    uint ke = ge - s.start;
    if (ke < s.len) apply_one(s, ke);
  }
}
#endif
