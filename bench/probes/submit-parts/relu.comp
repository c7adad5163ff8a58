#version 450
// relu on a buffer of floats; with -DDONE_WORD the workgroup then writes a done word after its
// results (a barrier, then one atomic store), which the host may poll instead of the timeline.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float y[]; };
layout(std430, binding = 2) coherent buffer Ctl { uint c[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  uint stride = gl_NumWorkGroups.x * 256u;
  for (; i < p.n; i += stride) y[i] = max(x[i], 0.0);
#ifdef DONE_WORD
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationID.x == 0u) atomicExchange(c[32], 1u);
#endif
}
