#include "holdable.h"

#include <algorithm>

#include "../metrics.h"

namespace mongoelector {

std::int64_t renew_margin_ms(std::int64_t ttl_ms, std::int64_t uncertainty_ms) {
  return std::max<std::int64_t>(ttl_ms / 10, 2 * uncertainty_ms + 50);
}

void RenewTicket::raise_expire(std::int64_t at_least_ms) {
  std::int64_t& e = kind == Kind::Lock ? request.expire_ms : semaphore.expire_ms;
  e = std::max(e, at_least_ms);
}

std::optional<std::int64_t> Holdable::renew_alone() {
  try {
    RenewTicket t = begin_renew(clock().mono_ms());  // `sent` before the estimate
    const std::optional<std::int64_t> lease_end =
        finish_renew(t, renew_one(storage(), collection(), t));
    metrics::record_renewal(lease_end.has_value());
    return lease_end;
  } catch (...) {
    metrics::record_renewal(false);
    throw;
  }
}

bool renew_one(Storage& storage, const std::string& collection, const RenewTicket& t) {
  if (t.kind == RenewTicket::Kind::Lock) {
    const RenewRequest& r = t.request;
    return storage.renew(collection, r.key, r.uuid, r.fence, t.at.now_ms, r.expire_ms);
  }
  const SemaphoreRenewRequest& r = t.semaphore;
  return storage.renew_semaphore(collection, r.key, r.slot, r.uuid, r.fence, t.at.now_ms,
                                 r.expire_ms);
}

}  // namespace mongoelector
