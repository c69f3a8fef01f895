// One process-wide log sink. The C API forwards it to the user's callback, Python to
// logging.getLogger("mongoelector"). Without a sink, warnings and errors go to stderr.
//
// Records carry structured fields (event, key, fence, uuid, host) besides the message,
// so each host can log them its own way (Python `extra=`, slog attributes, the C
// callback's event code). Levels: leadership changes INFO, renew failures WARNING,
// nothing chatty at INFO.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace mongoelector {

enum class LogLevel { Debug = 10, Info = 20, Warning = 30, Error = 40 };

// What happened. Numbers are ABI (the C API's mongoelector_log_event): append only.
enum class LogEvent {
  None = 0,            // free text (driver messages, configuration notes)
  LeaderElected = 1,   // this node became leader (INFO)
  LeaderLost = 2,      // this node's leadership ended: released, lost or stepped down (INFO)
  StepDown = 3,        // a leader stepped down before its lease could expire (WARNING)
  RenewFailed = 4,     // a renewal failed; the hold is kept until its deadline (WARNING)
  LeaseLost = 5,       // a keep-alive lease was declared lost (WARNING)
  ClockJump = 6,       // the server's clock stepped (WARNING)
  UnsafeServer = 7,    // the server's findAndModify is not atomic (WARNING)
  ReleaseFailed = 8,   // a release could not be confirmed (WARNING)
  CallbackFailed = 9,  // a user callback raised (ERROR)
};
const char* log_event_name(LogEvent event);

struct LogFields {
  LogEvent event = LogEvent::None;
  std::string key;         // "" when not about one key
  std::int64_t fence = 0;  // 0 when none
  std::string uuid;        // the node/locker identity, "" when none
  std::string host;        // "" when none
};

struct LogRecord {
  LogLevel level;
  const std::string& message;
  const LogFields& fields;
};

using LogSink = std::function<void(const LogRecord&)>;

// Replaces the sink (an empty function restores the default). Messages below
// `min_level` are dropped before reaching it. The previous sink is destroyed when the
// last call in flight on it returns (its captures may rely on that). Thread-safe.
void set_log_sink(LogSink sink, LogLevel min_level = LogLevel::Debug);
// Whether a message at `level` would reach anyone: lets callers skip formatting.
bool log_enabled(LogLevel level);
void log(LogLevel level, const std::string& message);
void log(LogLevel level, const std::string& message, const LogFields& fields);

}  // namespace mongoelector
