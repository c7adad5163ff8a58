#pragma once
// Helpers for the executor tests: data, futures, waiting.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpubatch/error.hpp"
#include "gpubatch/ops.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"

namespace gpubatch::testing {

using ::random_floats;
using ::random_states;

// A random valid request of any built-in op (sizes 1..max_len).
inline Request random_request(std::mt19937& rng, std::size_t max_len = 64) {
  std::uniform_int_distribution<int> pick(0, static_cast<int>(kBuiltinOpCount) - 1);
  std::uniform_int_distribution<std::size_t> len(1, max_len);
  const auto op = static_cast<Op>(pick(rng));
  const std::size_t n = len(rng);
  switch (op) {
    case Op::matmul: {
      std::uniform_int_distribution<std::uint32_t> d(1, 6);
      const auto m = d(rng), k = d(rng), nn = d(rng);
      return Request::matmul(random_floats(m * k, rng), random_floats(k * nn, rng), m, k, nn);
    }
    case Op::gradients: return Request::gradients(random_states(1 + n % 4, rng));
    case Op::interpolate:
      return Request::interpolate(random_states(1 + n % 4, rng), random_states(1 + n % 4, rng),
                                  0.5f, n % 2 ? InterpolationMode::lerp : InterpolationMode::slerp);
    default:  // element-wise ops and dot, as the table samples them
      return sample_request(op, n, rng);
  }
}

// The ErrorCode a ready future holds, or nullopt when it holds a value.
template <typename T>
std::optional<ErrorCode> error_code(std::future<T>& f) {
  try {
    f.get();
    return std::nullopt;
  } catch (const Error& e) {
    return e.code();
  }
}

template <typename T>
std::string error_message(std::future<T>& f) {
  try {
    f.get();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

template <typename T>
bool ready(const std::future<T>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

template <typename T>
bool ready_within(const std::future<T>& f, std::chrono::milliseconds timeout) {
  return f.wait_for(timeout) == std::future_status::ready;
}

template <typename F>
bool eventually(F&& predicate, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

inline void expect_matches_reference(const Request& request, const Result& got) {
  const auto problem = reference::check(request, got);
  EXPECT_FALSE(problem.has_value()) << *problem;
}

}  // namespace gpubatch::testing
