#pragma once
// Small helpers the executor's source files share (executor.cpp, strand.cpp, completion.cpp,
// executor_stats.cpp). Not for other parts of the library.
#include <atomic>
#include <exception>
#include <string>
#include <utility>

#include "gpubatch/error.hpp"

namespace gpubatch::detail {

// A counter with one writer: a plain load and store, no read-modify-write.
template <typename A>
void bump(std::atomic<A>& counter, A by = 1) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

inline std::exception_ptr make_error(ErrorCode code, const std::string& message) {
  return std::make_exception_ptr(Error(code, message));
}

// A new exception equal to the one being handled (executor.cpp says why).
std::exception_ptr fresh_current_exception() noexcept;
// The code and message of an exception (for a batch that failed as a whole).
std::pair<ErrorCode, std::string> explain(const std::exception_ptr& e);

}  // namespace gpubatch::detail
