#pragma once
// The state operations' arithmetic, shared by the CPU reference and the host side of the GPU
// path (which must compute t's fixed-point value exactly as the reference does). The GLSL twin
// is shaders/interpolate.comp.
#include <array>
#include <cmath>
#include <cstdint>

namespace gpubatch::detail {

// f(rho) = |2^(rho/4) e^(i theta 2 pi/16)| = 2^(rho/4), and 0 where rho <= -8.
inline double state_magnitude(double rho) { return rho <= -8.0 ? 0.0 : std::exp2(rho / 4.0); }

inline std::array<float, 16> rho_gradient_table() {
  constexpr double eps = 0.001;
  std::array<float, 16> table{};
  for (int nibble = 0; nibble < 16; ++nibble) {
    const double rho = nibble - 8;
    table[nibble] = static_cast<float>(
        (state_magnitude(rho + eps) - state_magnitude(rho - eps)) / (2 * eps));
  }
  return table;
}

// t in [0, 1] as a multiple of 1/65536, rounded to nearest.
inline int t_to_fixed16(float t) { return static_cast<int>(std::lround(double(t) * 65536.0)); }

// round-half-up of from + t * delta, in integers.
inline int mix_round(int from, int delta, int t16) {
  const int v = from * 65536 + t16 * delta + 32768 + 32 * 65536;
  return (v >> 16) - 32;
}

inline std::uint8_t interpolate_layer(std::uint8_t la, std::uint8_t lb, int t16, bool slerp) {
  const int rho_a = (la >> 4) - 8, rho_b = (lb >> 4) - 8;
  const int th_a = la & 15, th_b = lb & 15;
  int rho = mix_round(rho_a, rho_b - rho_a, t16);
  rho = rho < -8 ? -8 : (rho > 7 ? 7 : rho);
  int d = th_b - th_a;
  if (slerp) {
    if (d > 8) d -= 16;
    else if (d < -8) d += 16;
  }
  const int theta = mix_round(th_a, d, t16) & 15;
  return static_cast<std::uint8_t>(((rho + 8) << 4) | theta);
}

}  // namespace gpubatch::detail
