// The exception barrier of the C API: every extern "C" body runs inside guard(), which
// turns any C++ exception into a status code plus a thread-local message, so that no
// exception ever crosses the C boundary.
#pragma once

#include <string>

#include "mongoelector.h"

namespace mongoelector::capi {

// Records `message` as this thread's last error and returns `status`.
mongoelector_status fail(mongoelector_status status, const char* message) noexcept;
mongoelector_status fail(mongoelector_status status, const std::string& message) noexcept;

// Maps the exception currently being handled to a status (and records its message).
// Must be called from inside a catch block.
mongoelector_status fail_current_exception() noexcept;

// Runs `body` (which returns nothing and reports failure by throwing) and returns
// MONGOELECTOR_OK, or the status of whatever it threw.
template <class F>
mongoelector_status guard(F&& body) noexcept {
  try {
    body();
    return MONGOELECTOR_OK;
  } catch (...) {
    return fail_current_exception();
  }
}

// Argument checks: throw InvalidArgument with `message` unless `condition` holds.
void require(bool condition, const char* message);
// A duration in seconds (`what` names it in the message): finite and > 0.
void require_positive_duration(double seconds, const char* what);

}  // namespace mongoelector::capi
