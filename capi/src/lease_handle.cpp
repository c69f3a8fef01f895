// The calls every keep-alive lease handle answers (lease_handle.h).
#include "lease_handle.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace mongoelector::capi {

LeaseHandle& checked_lease(LeaseHandle* h, std::uint64_t magic, const char* kind) {
  return checked_handle(h, magic, kind);
}

KeepAliveOptions keepalive_options(const AcquireArgs& args, mongoelector_lease_lost_fn on_lost,
                                   void* user_data) {
  KeepAliveOptions ko;
  ko.blocking = args.blocking;
  ko.timeout_s = args.timeout_s;
  ko.step_s = args.step_s;
  ko.force = args.force;
  ko.cancel = cancel_fn(args);
  if (on_lost != nullptr) ko.on_lost = [on_lost, user_data] { on_lost(user_data); };
  return ko;
}

mongoelector_status lease_fence(LeaseHandle* h, std::uint64_t magic, const char* kind,
                                int64_t* out) noexcept {
  return guard([&] {
    auto& l = checked_lease(h, magic, kind);
    require(out != nullptr, "out is NULL");
    *out = l.lease->fence();
  });
}

mongoelector_status lease_lost(LeaseHandle* h, std::uint64_t magic, const char* kind,
                               int* out) noexcept {
  return guard([&] {
    auto& l = checked_lease(h, magic, kind);
    require(out != nullptr, "out is NULL");
    *out = l.lease->lost() ? 1 : 0;
  });
}

mongoelector_status lease_wait_lost(LeaseHandle* h, std::uint64_t magic, const char* kind,
                                    double timeout_seconds, int* lost_out) noexcept {
  return guard([&] {
    auto& l = checked_lease(h, magic, kind);
    require(lost_out != nullptr, "lost_out is NULL");
    require(!std::isnan(timeout_seconds), "timeout_seconds is NaN");
    std::optional<std::int64_t> timeout_ms;  // negative or infinite: forever
    if (timeout_seconds >= 0 && std::isfinite(timeout_seconds))
      timeout_ms = static_cast<std::int64_t>(std::ceil(std::min(timeout_seconds, 1e12) * 1000.0));
    *lost_out = l.lease->wait_lost(timeout_ms) ? 1 : 0;
  });
}

bool close_lease(LeaseHandle* h, std::uint64_t magic) noexcept {
  if (h == nullptr || h->magic != magic) return false;
  h->magic = kFreedMagic;
  try {
    h->lease->close();  // stops renewing; releases the hold (fenced) unless lost
  } catch (...) {
  }
  try {
    h->lease.reset();
  } catch (...) {
  }
  if (h->owner_has_lease != nullptr && *h->owner_magic == h->owner_live_magic)
    h->owner_has_lease->store(false);
  return true;
}

}  // namespace mongoelector::capi
