#version 460
// relu through buffer device addresses, no tables: the library's addressing without its lookups.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer FloatsIn { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer FloatsOut { float v[]; };
layout(push_constant) uniform P { uvec2 x; uvec2 y; uint n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) FloatsOut(p.y).v[i] = max(FloatsIn(p.x).v[i], 0.0);
}
