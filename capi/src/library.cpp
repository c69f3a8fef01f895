// Library-wide calls: version, mongoelector_free, the log callback.
#include <cstdlib>
#include <memory>
#include <string>

#include "guard.h"
#include "log.h"

// The header's version macros and the CMake project version must agree: the runtime
// version is the one this library was built as.
static_assert(MONGOELECTOR_VERSION_MAJOR == MONGOELECTOR_BUILD_VERSION_MAJOR &&
                  MONGOELECTOR_VERSION_MINOR == MONGOELECTOR_BUILD_VERSION_MINOR &&
                  MONGOELECTOR_VERSION_PATCH == MONGOELECTOR_BUILD_VERSION_PATCH,
              "capi/include/mongoelector.h version macros differ from project(VERSION)");

namespace {

// The user's handler: a message function or a record function, and the release of its
// user_data. Owned by the core's sink; destroyed when the sink was replaced and its last
// call in flight returned -- the hand-over point of user_data.
struct Handler {
  mongoelector_log_fn message_fn = nullptr;
  mongoelector_log_record_fn record_fn = nullptr;
  void* user_data = nullptr;
  mongoelector_release_fn release = nullptr;
  ~Handler() {
    if (release != nullptr) release(user_data);
  }
};

mongoelector_status install_handler(mongoelector_log_level min_level,
                                    mongoelector_log_fn message_fn,
                                    mongoelector_log_record_fn record_fn, void* user_data,
                                    mongoelector_release_fn release) {
  return mongoelector::capi::guard([&] {
    if (message_fn == nullptr && record_fn == nullptr) {  // the default; min_level ignored
      mongoelector::set_log_sink({});
      if (release != nullptr) release(user_data);  // never installed: handed back at once
      return;
    }
    mongoelector::capi::require(
        min_level == MONGOELECTOR_LOG_DEBUG || min_level == MONGOELECTOR_LOG_INFO ||
            min_level == MONGOELECTOR_LOG_WARNING || min_level == MONGOELECTOR_LOG_ERROR,
        "min_level is not a mongoelector_log_level");
    auto handler = std::make_shared<Handler>();  // not a copy: a temporary would release
    handler->message_fn = message_fn;
    handler->record_fn = record_fn;
    handler->user_data = user_data;
    handler->release = release;
    mongoelector::set_log_sink(
        [handler](const mongoelector::LogRecord& r) {
          const auto level = static_cast<mongoelector_log_level>(r.level);
          if (handler->message_fn != nullptr) {
            handler->message_fn(level, r.message.c_str(), handler->user_data);
            return;
          }
          mongoelector_log_record record;
          record.version = MONGOELECTOR_LOG_RECORD_VERSION;
          record.level = level;
          record.event = static_cast<mongoelector_log_event>(r.fields.event);
          record.message = r.message.c_str();
          record.key = r.fields.key.c_str();
          record.fence = r.fields.fence;
          record.uuid = r.fields.uuid.c_str();
          record.host = r.fields.host.c_str();
          handler->record_fn(&record, handler->user_data);
        },
        static_cast<mongoelector::LogLevel>(min_level));
  });
}

}  // namespace

extern "C" {

MONGOELECTOR_API const char* mongoelector_version(void) { return MONGOELECTOR_VERSION_STRING; }

MONGOELECTOR_API int mongoelector_version_number(void) { return MONGOELECTOR_VERSION_NUMBER; }

MONGOELECTOR_API void mongoelector_free(void* ptr) { std::free(ptr); }

MONGOELECTOR_API mongoelector_status mongoelector_set_log_callback(mongoelector_log_fn fn,
                                                                   void* user_data) {
  return mongoelector::capi::guard([&] {
    if (fn == nullptr) {
      mongoelector::set_log_sink({});  // back to the default: warnings+ to stderr
      return;
    }
    mongoelector::set_log_sink([fn, user_data](const mongoelector::LogRecord& r) {
      fn(static_cast<mongoelector_log_level>(r.level), r.message.c_str(), user_data);
    });
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_set_log_handler(mongoelector_log_level min_level,
                                                                  mongoelector_log_fn fn,
                                                                  void* user_data,
                                                                  mongoelector_release_fn release) {
  return install_handler(min_level, fn, nullptr, user_data, release);
}

MONGOELECTOR_API mongoelector_status
mongoelector_set_log_record_handler(mongoelector_log_level min_level, mongoelector_log_record_fn fn,
                                    void* user_data, mongoelector_release_fn release) {
  return install_handler(min_level, nullptr, fn, user_data, release);
}

MONGOELECTOR_API const char* mongoelector_log_event_name(mongoelector_log_event event) {
  const int e = static_cast<int>(event);
  if (e < 0 || e > static_cast<int>(mongoelector::LogEvent::CallbackFailed)) return "unknown";
  return mongoelector::log_event_name(static_cast<mongoelector::LogEvent>(e));
}

}  // extern "C"
