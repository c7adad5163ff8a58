#include "gpubatch/error.hpp"

#include <algorithm>

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

}  // namespace gpubatch
