#include "log.h"
#include "user_code.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>

namespace mongoelector {

namespace {
// Never destroyed: elector threads may still log while the process exits.
std::mutex& sink_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::shared_ptr<LogSink>& sink_slot() {
  static auto* sink = new std::shared_ptr<LogSink>;
  return *sink;
}
// The lowest level anyone receives: the sink's minimum, Warning for the default.
std::atomic<int> g_min_level{static_cast<int>(LogLevel::Warning)};
}  // namespace

void set_log_sink(LogSink sink, LogLevel min_level) {
  std::shared_ptr<LogSink> previous;  // destroyed outside the mutex (its captures may log)
  std::lock_guard<std::mutex> g(sink_mutex());
  previous = std::move(sink_slot());
  sink_slot() = sink ? std::make_shared<LogSink>(std::move(sink)) : nullptr;
  g_min_level.store(static_cast<int>(sink_slot() ? min_level : LogLevel::Warning));
}

bool log_enabled(LogLevel level) { return static_cast<int>(level) >= g_min_level.load(); }

const char* log_event_name(LogEvent event) {
  switch (event) {
    case LogEvent::None:
      return "none";
    case LogEvent::LeaderElected:
      return "leader_elected";
    case LogEvent::LeaderLost:
      return "leader_lost";
    case LogEvent::StepDown:
      return "step_down";
    case LogEvent::RenewFailed:
      return "renew_failed";
    case LogEvent::LeaseLost:
      return "lease_lost";
    case LogEvent::ClockJump:
      return "clock_jump";
    case LogEvent::UnsafeServer:
      return "unsafe_server";
    case LogEvent::ReleaseFailed:
      return "release_failed";
    case LogEvent::CallbackFailed:
      return "callback_failed";
  }
  return "unknown";
}

void log(LogLevel level, const std::string& message) {
  if (!log_enabled(level)) return;
  static const LogFields* no_fields = new LogFields;  // leaked: threads may log at exit
  log(level, message, *no_fields);
}

void log(LogLevel level, const std::string& message, const LogFields& fields) {
  if (!log_enabled(level)) return;
  std::shared_ptr<LogSink> sink;
  {
    std::lock_guard<std::mutex> g(sink_mutex());
    sink = sink_slot();
  }
  // The sink runs outside the mutex: it may log again or take the GIL.
  if (sink) {
    // A failing sink must not break the caller (often the election loop).
    call_user_code([&] { (*sink)(LogRecord{level, message, fields}); }, nullptr);
    return;
  }
  if (level >= LogLevel::Warning) std::fprintf(stderr, "mongoelector: %s\n", message.c_str());
}

}  // namespace mongoelector
