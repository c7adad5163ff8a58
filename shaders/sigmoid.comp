#version 460
#extension GL_GOOGLE_include_directive : require
#include "elementwise.glsl"
#include "math.glsl"
float apply(float x, float p) { return stable_sigmoid(x); }
