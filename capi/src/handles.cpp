// Handle validation and the per-handle storage timeouts.
#include "handles.h"

#include <algorithm>
#include <cmath>

#include "exceptions.h"
#include "identity.h"
#include "storage/client.h"
#include "storage/mongo_storage.h"

namespace mongoelector::capi {

mongoelector_client& checked(mongoelector_client* h) {
  return checked_handle(h, kClientMagic, "client");
}
mongoelector_locker& checked(mongoelector_locker* h) {
  return checked_handle(h, kLockerMagic, "locker");
}
mongoelector_elector& checked(mongoelector_elector* h) {
  return checked_handle(h, kElectorMagic, "elector");
}

mongoelector_cancel_token& checked(mongoelector_cancel_token* h) {
  return checked_handle(h, kCancelMagic, "cancel token");
}

void check_struct_version(std::uint32_t version, std::uint32_t latest, const char* init_name) {
  if (version == 0 || version > latest) {
    throw InvalidArgument("struct version " + std::to_string(version) +
                          " is not supported (this library knows 1.." + std::to_string(latest) +
                          "); initialise it with " + init_name + "()");
  }
}

AcquireArgs to_acquire_args(const mongoelector_acquire_options* o) {
  AcquireArgs a;
  if (o == nullptr) return a;
  check_struct_version(o->version, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION,
                       "mongoelector_acquire_options_init");
  a.blocking = o->blocking != 0;
  require(!std::isnan(o->timeout_seconds), "timeout_seconds is NaN");
  if (!a.blocking) {
    require(o->timeout_seconds < 0, "blocking=0 takes no timeout: pass a negative timeout_seconds");
  } else {
    require_positive_duration(o->step_seconds, "step_seconds");
    a.step_s = o->step_seconds;
    // Negative means "none"; +infinity is the same wait.
    if (o->timeout_seconds >= 0 && std::isfinite(o->timeout_seconds))
      a.timeout_s = o->timeout_seconds;
  }
  a.force = o->force != 0;
  if (o->cancel != nullptr) a.cancel = &checked(o->cancel);
  return a;
}

CancelFn cancel_fn(const AcquireArgs& args) {
  auto* token = args.cancel;
  if (token == nullptr) return {};
  if (token->cancelled.load())
    throw Cancelled("acquire cancelled: its cancel token was already cancelled");
  return [token] { return token->cancelled.load(); };
}

std::int64_t op_timeout_ms(double op_timeout_s, double ttl_s) {
  if (op_timeout_s == 0) return op_timeout_ms_for_ttl(ttl_s);
  require_positive_duration(op_timeout_s, "op_timeout_seconds");
  // ttl is checked by the core; a NaN or negative one fails there with its own message.
  if (std::isfinite(ttl_s) && ttl_s > 0) {
    require(op_timeout_s <= ttl_s / 2,
            "op_timeout_seconds must be at most ttl_seconds/2: a renewal could not finish "
            "before the renew deadline");
  }
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(op_timeout_s * 1000)));
}

void check_options_version(std::uint32_t version, std::uint32_t latest, const char* kind) {
  if (version == 0 || version > latest) {
    throw InvalidArgument(std::string(kind) + " options version " + std::to_string(version) +
                          " is not supported (this library knows 1.." + std::to_string(latest) +
                          "); initialise options with mongoelector_" + kind + "_options_init()");
  }
}

std::string checked_key(const char* key) {
  require(key != nullptr, "key is NULL");
  std::string k(key);
  validate_key(k);
  return k;
}

}  // namespace mongoelector::capi
