// Status codes, the thread-local last error, and the exception -> status mapping.
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "exceptions.h"
#include "guard.h"

namespace mongoelector::capi {

namespace {
// One failure per thread; mongoelector_last_error() and mongoelector_last_error_info()
// hand out pointers into it, valid until this thread's next failure.
struct LastError {
  mongoelector_status status = MONGOELECTOR_OK;
  std::string message;
  ServerErrorDetail detail;
  std::vector<const char*> label_ptrs;  // into detail.labels
};
thread_local LastError t_last;
}  // namespace

mongoelector_status fail(mongoelector_status status, const char* message) noexcept {
  t_last.status = status;
  t_last.detail = ServerErrorDetail{};
  t_last.label_ptrs.clear();
  try {
    t_last.message = message;
  } catch (...) {
    // Out of memory while copying the message: the status code still tells the story.
    t_last.message.clear();
  }
  return status;
}

namespace {
// fail(), keeping what the backend said about the failure.
mongoelector_status fail_storage(mongoelector_status status, const StorageFailure& e) {
  fail(status, e.what());
  t_last.detail = e.detail();  // may throw bad_alloc: the caller maps it
  for (const auto& label : t_last.detail.labels) t_last.label_ptrs.push_back(label.c_str());
  return status;
}
}  // namespace

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
    return fail_storage(MONGOELECTOR_ERR_UNAVAILABLE, e);
  } catch (const StorageError& e) {
    return fail_storage(MONGOELECTOR_ERR_SERVER, e);
  } catch (const UnsafeServer& e) {
    return fail(MONGOELECTOR_ERR_UNSAFE_SERVER, e.what());
  } catch (const LockLost& e) {
    return fail(MONGOELECTOR_ERR_LOST, e.what());
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
    case MONGOELECTOR_OK:
      return "MONGOELECTOR_OK";
    case MONGOELECTOR_ERR_INVALID_ARGUMENT:
      return "MONGOELECTOR_ERR_INVALID_ARGUMENT";
    case MONGOELECTOR_ERR_LOCK_EXISTS:
      return "MONGOELECTOR_ERR_LOCK_EXISTS";
    case MONGOELECTOR_ERR_TIMEOUT:
      return "MONGOELECTOR_ERR_TIMEOUT";
    case MONGOELECTOR_ERR_TIME_OFFSET:
      return "MONGOELECTOR_ERR_TIME_OFFSET";
    case MONGOELECTOR_ERR_CANCELLED:
      return "MONGOELECTOR_ERR_CANCELLED";
    case MONGOELECTOR_ERR_UNAVAILABLE:
      return "MONGOELECTOR_ERR_UNAVAILABLE";
    case MONGOELECTOR_ERR_SERVER:
      return "MONGOELECTOR_ERR_SERVER";
    case MONGOELECTOR_ERR_UNSAFE_SERVER:
      return "MONGOELECTOR_ERR_UNSAFE_SERVER";
    case MONGOELECTOR_ERR_LOST:
      return "MONGOELECTOR_ERR_LOST";
    case MONGOELECTOR_ERR_INTERNAL:
      return "MONGOELECTOR_ERR_INTERNAL";
  }
  return "unknown";
}

MONGOELECTOR_API const char* mongoelector_last_error(void) {
  return mongoelector::capi::t_last.message.c_str();
}

MONGOELECTOR_API mongoelector_status mongoelector_last_error_info(mongoelector_error_info* out) {
  // Not through guard(): a failure here must not overwrite the error being read.
  if (out == nullptr || out->version < 1) return MONGOELECTOR_ERR_INVALID_ARGUMENT;
  const auto& last = mongoelector::capi::t_last;
  // Version 1 fields (later versions only append).
  out->status = last.status;
  out->message = last.message.c_str();
  out->code = static_cast<int32_t>(last.detail.code);
  out->code_name = last.detail.code_name.c_str();
  out->labels = last.label_ptrs.empty() ? nullptr : last.label_ptrs.data();
  out->label_count = last.label_ptrs.size();
  return MONGOELECTOR_OK;
}

MONGOELECTOR_API int mongoelector_last_error_has_label(const char* label) {
  if (label == nullptr) return 0;
  for (const char* l : mongoelector::capi::t_last.label_ptrs) {
    if (std::strcmp(l, label) == 0) return 1;
  }
  return 0;
}

}  // extern "C"
