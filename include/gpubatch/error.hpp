#pragma once
// Every failure gpubatch reports is a gpubatch::Error carrying an ErrorCode, so callers can branch
// on the cause without parsing messages; the message names the request and what was wrong.
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpubatch {

enum class ErrorCode {
  invalid_argument,   // bad input: empty, mismatched lengths, bad dimensions, t outside [0, 1], ...
  request_too_large,  // a single request larger than the device can hold in one buffer
  queue_full,         // overflow policy reject / block_for gave up
  deadline_exceeded,  // the request's deadline passed before it ran
  shut_down,          // submitted after shutdown, or cancelled by shutdown(cancel)
  device_lost,        // VK_ERROR_DEVICE_LOST or a batch that never completed
  out_of_memory,      // host or device memory exhausted
  compile_failed,     // a shader (generated or user GLSL) failed to compile or build
  no_device,          // no usable Vulkan device
  invalid_config,     // a configuration key or value is wrong
  internal,           // a Vulkan call failed in a way none of the above describes
  cancelled,          // its Asio cancellation slot was signalled before it was submitted
                      // (the counterpart of boost::asio::error::operation_aborted)
};

std::string_view to_string(ErrorCode code) noexcept;

// what() is "<code>: <message>", the code's name once; an error that wraps another passes on
// the inner one's message(), not its what(), so that the prefix is never repeated.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(std::string(to_string(code)) + ": " + message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
  // what() without its "<code>: " prefix.
  std::string_view message() const noexcept;

 private:
  ErrorCode code_;
};

// The code of the failure `error` holds, as a completion handler receives it: its ErrorCode for a
// gpubatch::Error, ErrorCode::out_of_memory for std::bad_alloc, ErrorCode::internal for anything
// else; nullopt for a null `error` (success). Cheap where it counts: requests failed together
// share one exception object (a round of expired or refused requests of one shape), and this
// thread remembers the last few exceptions it read, compared by identity, so reading a code again
// costs no rethrow. A handler that rethrew each error to read its code spent about 40 % of the
// deadline watch's time doing so (BENCHMARKS.md, tenth session of 2026-11-28). Never throws.
std::optional<ErrorCode> error_code_of(const std::exception_ptr& error) noexcept;

}  // namespace gpubatch
