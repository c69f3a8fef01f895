// One process-wide log sink. The C API forwards it to the user's callback, Python to
// logging.getLogger("mongoelector"). Without a sink, warnings and errors go to stderr.
#pragma once

#include <functional>
#include <string>

namespace mongoelector {

enum class LogLevel { Debug = 10, Info = 20, Warning = 30, Error = 40 };

using LogSink = std::function<void(LogLevel, const std::string&)>;

// Replaces the sink (an empty function restores the default). Messages below
// `min_level` are dropped before reaching it. The previous sink is destroyed when the
// last call in flight on it returns (its captures may rely on that). Thread-safe.
void set_log_sink(LogSink sink, LogLevel min_level = LogLevel::Debug);
// Whether a message at `level` would reach anyone: lets callers skip formatting.
bool log_enabled(LogLevel level);
void log(LogLevel level, const std::string& message);

}  // namespace mongoelector
