#version 450
// relu from one buffer into another; VEC4: four floats per invocation. STRIDE: a grid-stride loop
// over a fixed number of workgroups instead of one element (or vec4) per invocation.
layout(local_size_x = 256) in;
#ifdef VEC4
layout(std430, binding = 0) readonly buffer In { vec4 x[]; };
layout(std430, binding = 1) writeonly buffer Out { vec4 y[]; };
#else
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float y[]; };
#endif
layout(push_constant) uniform P { uint n; uint base; } p;  // elements (floats, or vec4s) from `base`
void main() {
  uint i = gl_GlobalInvocationID.x;
  uint stride = gl_NumWorkGroups.x * 256u;
  for (; i < p.n; i += stride) y[p.base + i] = max(x[p.base + i], 0.0);
}
