#version 450
// relu through a descriptor set: bench/probes/duplex's kernel.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float y[]; };
layout(push_constant) uniform P { uint n; uint base; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) y[p.base + i] = max(x[p.base + i], 0.0);
}
