#version 450
// relu whose input offset is first read from a control word the host writes before each request
// (in device-local memory): one dependent read before the data, as gpubatch's kernels read a
// segment record (its input's address) before the data.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float y[]; };
layout(std430, binding = 2) readonly buffer Ctl { uint c[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  uint off = c[0];
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) y[i] = max(x[i + off], 0.0);
}
