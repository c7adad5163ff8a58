#include "gpubatch/error.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <new>

namespace gpubatch {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::request_too_large: return "request_too_large";
    case ErrorCode::queue_full: return "queue_full";
    case ErrorCode::deadline_exceeded: return "deadline_exceeded";
    case ErrorCode::shut_down: return "shut_down";
    case ErrorCode::device_lost: return "device_lost";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::compile_failed: return "compile_failed";
    case ErrorCode::no_device: return "no_device";
    case ErrorCode::invalid_config: return "invalid_config";
    case ErrorCode::internal: return "internal";
    case ErrorCode::cancelled: return "cancelled";
  }
  return "unknown";
}

std::string_view Error::message() const noexcept {
  std::string_view what = this->what();
  what.remove_prefix(std::min(what.size(), to_string(code_).size() + 2));  // "<code>: "
  return what;
}

namespace {

ErrorCode read_code(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.code();
  } catch (const std::bad_alloc&) {
    return ErrorCode::out_of_memory;
  } catch (...) {
    return ErrorCode::internal;
  }
}

// The last exceptions this thread read, round robin. Holding them keeps a few exception objects
// alive per thread: the executor's shared ones live as long anyway.
struct SeenErrors {
  static constexpr std::size_t kSize = 4;
  std::array<std::exception_ptr, kSize> error{};
  std::array<ErrorCode, kSize> code{};
  std::size_t next = 0;
};

}  // namespace

std::optional<ErrorCode> error_code_of(const std::exception_ptr& error) noexcept {
  if (!error) return std::nullopt;
  thread_local SeenErrors seen;
  for (std::size_t i = 0; i < SeenErrors::kSize; ++i)
    if (seen.error[i] == error) return seen.code[i];
  const ErrorCode code = read_code(error);
  seen.error[seen.next] = error;
  seen.code[seen.next] = code;
  seen.next = (seen.next + 1) % SeenErrors::kSize;
  return code;
}

}  // namespace gpubatch
