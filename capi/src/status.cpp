// Status codes, the thread-local last error, and the exception -> status mapping.
#include <cmath>
#include <new>
#include <string>

#include "exceptions.h"
#include "guard.h"

namespace mongoelector::capi {

// One message per thread; mongoelector_last_error() hands out its c_str(), which stays
// valid until this thread's next failure.
static thread_local std::string t_last_error;

mongoelector_status fail(mongoelector_status status, const char* message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while copying the message: the status code still tells the story.
    t_last_error.clear();
  }
  return status;
}

mongoelector_status fail(mongoelector_status status, const std::string& message) noexcept {
  return fail(status, message.c_str());
}

namespace {
// Rethrows the exception being handled and maps it. Building a message may itself throw
// std::bad_alloc; the caller catches that.
mongoelector_status map_current_exception() {
  try {
    throw;
  } catch (const InvalidArgument& e) {
    return fail(MONGOELECTOR_ERR_INVALID_ARGUMENT, e.what());
  } catch (const LockExists& e) {
    return fail(MONGOELECTOR_ERR_LOCK_EXISTS, e.what());
  } catch (const AcquireTimeout& e) {
    return fail(MONGOELECTOR_ERR_TIMEOUT, e.what());
  } catch (const TimeOffsetError& e) {
    return fail(MONGOELECTOR_ERR_TIME_OFFSET, e.what());
  } catch (const Cancelled& e) {
    return fail(MONGOELECTOR_ERR_CANCELLED, e.what());
  } catch (const StorageUnavailable& e) {
    return fail(MONGOELECTOR_ERR_UNAVAILABLE, e.what());
  } catch (const StorageError& e) {
    return fail(MONGOELECTOR_ERR_SERVER, e.what());
  } catch (const UnsafeServer& e) {
    return fail(MONGOELECTOR_ERR_UNSAFE_SERVER, e.what());
  } catch (const std::bad_alloc&) {
    return fail(MONGOELECTOR_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(MONGOELECTOR_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(MONGOELECTOR_ERR_INTERNAL, "internal error: unknown exception");
  }
}
}  // namespace

mongoelector_status fail_current_exception() noexcept {
  try {
    return map_current_exception();
  } catch (...) {
    return fail(MONGOELECTOR_ERR_INTERNAL, "out of memory");
  }
}

void require(bool condition, const char* message) {
  if (!condition) throw InvalidArgument(message);
}

void require_positive_duration(double seconds, const char* what) {
  if (!std::isfinite(seconds) || seconds <= 0) {
    throw InvalidArgument(std::string(what) + " must be a finite number > 0");
  }
}

}  // namespace mongoelector::capi

extern "C" {

MONGOELECTOR_API const char* mongoelector_status_name(mongoelector_status status) {
  switch (status) {
    case MONGOELECTOR_OK: return "MONGOELECTOR_OK";
    case MONGOELECTOR_ERR_INVALID_ARGUMENT: return "MONGOELECTOR_ERR_INVALID_ARGUMENT";
    case MONGOELECTOR_ERR_LOCK_EXISTS: return "MONGOELECTOR_ERR_LOCK_EXISTS";
    case MONGOELECTOR_ERR_TIMEOUT: return "MONGOELECTOR_ERR_TIMEOUT";
    case MONGOELECTOR_ERR_TIME_OFFSET: return "MONGOELECTOR_ERR_TIME_OFFSET";
    case MONGOELECTOR_ERR_CANCELLED: return "MONGOELECTOR_ERR_CANCELLED";
    case MONGOELECTOR_ERR_UNAVAILABLE: return "MONGOELECTOR_ERR_UNAVAILABLE";
    case MONGOELECTOR_ERR_SERVER: return "MONGOELECTOR_ERR_SERVER";
    case MONGOELECTOR_ERR_UNSAFE_SERVER: return "MONGOELECTOR_ERR_UNSAFE_SERVER";
    case MONGOELECTOR_ERR_INTERNAL: return "MONGOELECTOR_ERR_INTERNAL";
  }
  return "unknown";
}

MONGOELECTOR_API const char* mongoelector_last_error(void) {
  return mongoelector::capi::t_last_error.c_str();
}

}  // extern "C"
