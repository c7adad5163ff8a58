#version 460
#extension GL_GOOGLE_include_directive : require
// The library's own relu kernel (shaders/op_kernel.glsl, one element per invocation).
#define GPUBATCH_OP relu
#include "op_kernel.glsl"
