// Numerically stable building blocks shared by sigmoid, tanh, swish and gelu. The CPU reference
// (src/reference.cpp) follows the same formulas in double precision.

// Never evaluates exp of a positive argument, so it neither overflows nor loses the tiny tail.
float stable_sigmoid(float x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  float e = exp(x);
  return e / (1.0 + e);
}

float stable_tanh(float x) {
  float ax = abs(x);
  if (ax < 0.1) {
    // (1 - e) / (1 + e) loses relative precision near 0; the series is exact to float there.
    float x2 = x * x;
    return x + x * x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0)));
  }
  float e = exp(-2.0 * ax);
  float r = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -r : r;
}

// 0.5 x (1 + tanh(u)) with u = 0.7978846 (x + 0.044715 x^3) equals x * sigmoid(2u), which keeps
// its relative precision where 1 + tanh(u) would cancel (large negative x).
float gelu_argument(float x) { return x * (1.5957692 + 0.0713548 * (x * x)); }
