#version 460
#extension GL_GOOGLE_include_directive : require
#include "elementwise.glsl"
float apply(float x, float p) { return x * p; }
