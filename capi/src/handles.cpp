// Handle validation and the per-handle storage timeouts.
#include "handles.h"

#include <algorithm>
#include <cmath>

#include "errors.h"
#include "identity.h"
#include "storage/mongo_storage.h"

namespace mongoelector::capi {

namespace {
template <class H>
H& checked_handle(H* h, std::uint64_t magic, const char* kind) {
  if (h == nullptr) throw InvalidArgument(std::string(kind) + " handle is NULL");
  if (h->magic != magic) {
    throw InvalidArgument(std::string(kind) +
                          " handle is not valid (already freed, or not a " + kind + ")");
  }
  return *h;
}
}  // namespace

mongoelector_client& checked(mongoelector_client* h) {
  return checked_handle(h, kClientMagic, "client");
}
mongoelector_locker& checked(mongoelector_locker* h) {
  return checked_handle(h, kLockerMagic, "locker");
}
mongoelector_elector& checked(mongoelector_elector* h) {
  return checked_handle(h, kElectorMagic, "elector");
}

// Both from core's rule (ttl/10 within [100 ms, 5 s]): a call is bounded by three such
// timeouts, so an elector's renewal at ttl/2 ends before its renew deadline, and a caller
// facing a dead server hears of it in seconds even with the default 600 s ttl.
std::int64_t locker_op_timeout_ms(double ttl_s) { return op_timeout_ms_for_ttl(ttl_s); }

std::int64_t elector_op_timeout_ms(double ttl_s) { return op_timeout_ms_for_ttl(ttl_s); }

std::string checked_key(const char* key) {
  require(key != nullptr, "key is NULL");
  std::string k(key);
  validate_key(k);
  return k;
}

}  // namespace mongoelector::capi
