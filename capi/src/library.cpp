// Library-wide calls: version, mongoelector_free, the log callback.
#include <cstdlib>
#include <string>

#include "guard.h"
#include "log.h"

// The header's version macros and the CMake project version must agree: the runtime
// version is the one this library was built as.
static_assert(MONGOELECTOR_VERSION_MAJOR == MONGOELECTOR_BUILD_VERSION_MAJOR &&
                  MONGOELECTOR_VERSION_MINOR == MONGOELECTOR_BUILD_VERSION_MINOR &&
                  MONGOELECTOR_VERSION_PATCH == MONGOELECTOR_BUILD_VERSION_PATCH,
              "capi/include/mongoelector.h version macros differ from project(VERSION)");

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
    mongoelector::set_log_sink([fn, user_data](mongoelector::LogLevel level,
                                               const std::string& message) {
      fn(static_cast<mongoelector_log_level>(level), message.c_str(), user_data);
    });
  });
}

}  // extern "C"
