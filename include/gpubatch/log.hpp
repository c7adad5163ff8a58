#pragma once
// Where gpubatch's own log lines go. The library logs through a logger of its own (never spdlog's
// default one, which a program may use and which writes to stdout): lines go to stderr at `info`
// and above unless GPUBATCH_LOG_LEVEL or set_log_level says otherwise, or to a handler the
// program installs. A line is written only where something went wrong or a setting was refused,
// never once per request, so a handler is never on a request's path.
#include <functional>
#include <optional>
#include <string_view>

namespace gpubatch {

enum class LogLevel { trace, debug, info, warn, error, critical, off };

// Lines below `level` are dropped. Overrides GPUBATCH_LOG_LEVEL (which is read once, before the
// first line or the first call here).
void set_log_level(LogLevel level);
LogLevel log_level();

// Every line at or above the level goes to `handler` (the message without a timestamp or level
// prefix), from whatever thread logs it, one call at a time; an empty handler puts stderr back.
// The handler must not call into gpubatch's logging.
using LogHandler = std::function<void(LogLevel, std::string_view message)>;
void set_log_handler(LogHandler handler);

// "trace", "debug", "info", "warn" (or "warning"), "error", "critical", "off" (GPUBATCH_LOG_LEVEL's
// words); nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view text);

}  // namespace gpubatch
