#pragma once
// The request mix of the copy-engine tests (tests/unit/gpu/copy_engine_test.cpp), shared with
// bench/first_batches.cpp, which must replay the tests' exact sequences: for one seed both draw
// the same requests.
#include <cstdint>
#include <random>

#include "gpubatch/ops.hpp"
#include "support/random_data.hpp"

// Op `kind % 7` on n floats: relu, scale, add, dot, gelu, a relu-scale-add chain, or a small
// matmul (its sizes drawn from rng).
inline gpubatch::Request copy_engine_op(unsigned kind, std::mt19937& rng, std::size_t n) {
  using gpubatch::Request;
  switch (kind % 7) {
    case 0: return Request::relu(random_floats(n, rng));
    case 1: return Request::scale(random_floats(n, rng), 1.5f);
    case 2: return Request::add(random_floats(n, rng), random_floats(n, rng));
    case 3: return Request::dot(random_floats(n, rng), random_floats(n, rng));
    case 4: return Request::gelu(random_floats(n, rng));
    case 5: return gpubatch::chain(random_floats(n, rng)).relu().scale(2.0f).add(random_floats(n, rng));
    default: {
      const auto m = static_cast<std::uint32_t>(1 + rng() % 40);
      return Request::matmul(random_floats(m * 17, rng), random_floats(17 * 23, rng), m, 17, 23);
    }
  }
}

// The op drawn from rng, then its inputs.
inline gpubatch::Request random_copy_engine_op(std::mt19937& rng, std::size_t n) {
  const auto kind = static_cast<unsigned>(rng());
  return copy_engine_op(kind, rng, n);
}
