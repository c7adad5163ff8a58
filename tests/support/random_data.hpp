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

// The element-wise ops of the table (gpubatch/op_table.hpp), in table order: per-op tests loop
// over these, so a new table entry is tested without a test change.
inline std::vector<gpubatch::Op> elementwise_ops() {
  std::vector<gpubatch::Op> ops;
  for (std::size_t i = 0; i < gpubatch::kOpCount; ++i)
    if (gpubatch::kOpTable[i].kind == gpubatch::OpKind::ew) ops.push_back(static_cast<gpubatch::Op>(i));
  return ops;
}

// A request of an op on floats (an element-wise op, or dot) with n elements per input drawn from
// the table's sample range, and the table's sample scalars.
inline gpubatch::Request sample_request(gpubatch::Op op, std::size_t n, std::mt19937& rng) {
  const gpubatch::OpInfo& info = gpubatch::op_info(op);
  gpubatch::Request r = gpubatch::Request::unary(op, random_floats(n, rng, info.sample_lo, info.sample_hi),
                                                 info.sample_scalar[0], info.sample_scalar[1]);
  if (info.arity == 2) r.b = random_floats(n, rng, info.sample_lo, info.sample_hi);
  return r;
}

// `states` packed states of random bytes (every byte is a valid layer).
inline std::vector<std::uint8_t> random_states(std::size_t states, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<std::uint8_t> v(states * gpubatch::kLayersPerState);
  for (auto& b : v) b = static_cast<std::uint8_t>(d(rng));
  return v;
}
