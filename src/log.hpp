#pragma once
// The library's logger (include/gpubatch/log.hpp): every file logs through log::warn(...) etc.,
// never through spdlog's free functions, which write to the program's default logger (stdout).
#include <spdlog/spdlog.h>

#include <utility>

namespace gpubatch::log {

// Made on first use (thread-safe), its level from GPUBATCH_LOG_LEVEL (default info).
spdlog::logger& logger();

template <class... Args>
void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().debug(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().info(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().warn(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().error(fmt, std::forward<Args>(args)...);
}

}  // namespace gpubatch::log
