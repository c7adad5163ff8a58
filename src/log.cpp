// The library's logger: stderr or the program's handler (include/gpubatch/log.hpp, src/log.hpp).
#include "log.hpp"

#include <gpubatch/log.hpp>
#include <spdlog/sinks/base_sink.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>

namespace gpubatch {
namespace {

// spdlog's levels are ours in the same order.
static_assert(static_cast<int>(LogLevel::trace) == spdlog::level::trace &&
              static_cast<int>(LogLevel::warn) == spdlog::level::warn &&
              static_cast<int>(LogLevel::off) == spdlog::level::off);
spdlog::level::level_enum to_spdlog(LogLevel l) { return static_cast<spdlog::level::level_enum>(l); }
LogLevel from_spdlog(spdlog::level::level_enum l) { return static_cast<LogLevel>(l); }

// stderr, or the program's handler; base_sink's mutex serialises the lines and the handler's swap.
class HandlerSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_handler(LogHandler handler) {
    std::lock_guard lock(mutex_);
    handler_ = std::move(handler);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (handler_) {
      handler_(from_spdlog(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
      return;
    }
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  LogHandler handler_;
};

struct Logging {
  std::shared_ptr<HandlerSink> sink = std::make_shared<HandlerSink>();
  spdlog::logger logger{"gpubatch", sink};

  Logging() {
    logger.set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    logger.set_level(spdlog::level::info);
    const char* env = std::getenv("GPUBATCH_LOG_LEVEL");
    if (!env || !*env) return;
    if (auto level = parse_log_level(env)) logger.set_level(to_spdlog(*level));
    else logger.warn("gpubatch: GPUBATCH_LOG_LEVEL={} is not a level (trace, debug, info, warn, error, "
                     "critical, off); logging at info", env);
  }
};

Logging& logging() {
  // Never destroyed: a static Device or executor made before the first line may log while it is
  // destroyed, after a function-local logger made later would be gone.
  static Logging* const l = new Logging;
  return *l;
}

}  // namespace

namespace log {
spdlog::logger& logger() { return logging().logger; }
}  // namespace log

void set_log_level(LogLevel level) { logging().logger.set_level(to_spdlog(level)); }
LogLevel log_level() { return from_spdlog(logging().logger.level()); }
void set_log_handler(LogHandler handler) { logging().sink->set_handler(std::move(handler)); }

std::optional<LogLevel> parse_log_level(std::string_view text) {
  static constexpr std::pair<std::string_view, LogLevel> kWords[] = {
      {"trace", LogLevel::trace}, {"debug", LogLevel::debug},       {"info", LogLevel::info},
      {"warn", LogLevel::warn},   {"warning", LogLevel::warn},      {"error", LogLevel::error},
      {"critical", LogLevel::critical}, {"off", LogLevel::off}};
  for (auto& [word, level] : kWords)
    if (text == word) return level;
  return std::nullopt;
}

}  // namespace gpubatch
