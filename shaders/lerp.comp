#version 460
#extension GL_GOOGLE_include_directive : require
#define BINARY
#include "elementwise.glsl"
float apply(float a, float b, float p) { return a + p * (b - a); }
