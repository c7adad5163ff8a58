#pragma once
// Fresh random inputs for the tests.
#include <cstdint>
#include <random>
#include <vector>

#include "gpubatch/ops.hpp"

inline std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float lo = -4.0f, float hi = 4.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// `states` packed states of random bytes (every byte is a valid layer).
inline std::vector<std::uint8_t> random_states(std::size_t states, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<std::uint8_t> v(states * gpubatch::kLayersPerState);
  for (auto& b : v) b = static_cast<std::uint8_t>(d(rng));
  return v;
}
