#version 460
#extension GL_GOOGLE_include_directive : require
#include "elementwise.glsl"
// x < 0 ? 0 : x keeps NaN and -0 as they are (max() may return either operand for NaN).
float apply(float x, float p) { return x < 0.0 ? 0.0 : x; }
