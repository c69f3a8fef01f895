// mongoelector_lease_*: a core KeepAliveLease (core/lease) on a locker handle's Locker,
// renewed by the process-wide renewer; on_lost runs on a callback-dispatcher thread.
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "exceptions.h"
#include "handles.h"
#include "lease/lease.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kLeaseMagic = 0x6d654c6561736521ULL;  // "meLease!"
}  // namespace mongoelector::capi

struct mongoelector_lease {
  std::uint64_t magic = mongoelector::capi::kLeaseMagic;
  mongoelector_locker* locker = nullptr;  // outlives the lease (caller's contract)
  std::unique_ptr<mongoelector::KeepAliveLease> lease;
};

namespace {

mongoelector_lease& checked_lease(mongoelector_lease* h) {
  if (h == nullptr) throw mongoelector::InvalidArgument("lease handle is NULL");
  if (h->magic != mongoelector::capi::kLeaseMagic)
    throw mongoelector::InvalidArgument(
        "lease handle is not valid (already freed, or not a lease)");
  return *h;
}

// The fields that exist in the caller's options version (only ever appended).
struct LeaseArgs {
  bool blocking = true;
  std::optional<double> timeout_s;
  double step_s = 0.25;
  bool force = false;
  // 1.1 per-call token; without one (1.0 entry point) mongoelector_locker_cancel applies.
  mongoelector_cancel_token* cancel = nullptr;
  mongoelector_lease_lost_fn on_lost = nullptr;
  void* user_data = nullptr;
};

LeaseArgs to_args(const mongoelector_lease_options* o) {
  LeaseArgs a;
  if (o == nullptr) return a;
  mongoelector::capi::check_options_version(o->version, MONGOELECTOR_LEASE_OPTIONS_VERSION,
                                            "lease");
  a.blocking = o->blocking != 0;
  require(!std::isnan(o->timeout_seconds), "timeout_seconds is NaN");
  if (!a.blocking) {
    require(o->timeout_seconds < 0, "blocking=0 takes no timeout: pass a negative timeout_seconds");
  } else {
    mongoelector::capi::require_positive_duration(o->step_seconds, "step_seconds");
    a.step_s = o->step_seconds;
    // Negative means "none"; +infinity is the same wait.
    if (o->timeout_seconds >= 0 && std::isfinite(o->timeout_seconds))
      a.timeout_s = o->timeout_seconds;
  }
  a.on_lost = o->on_lost;
  a.user_data = o->user_data;
  return a;
}

// Acquires and starts keeping alive; the handle for the caller. legacy_cancel: the 1.0
// entry point, which honours (and consumes) mongoelector_locker_cancel.
mongoelector_lease* start_lease(mongoelector_locker* locker, const LeaseArgs& args,
                                bool legacy_cancel) {
  auto& h = checked(locker);
  bool expected = false;
  if (!h.has_lease.compare_exchange_strong(expected, true))
    throw mongoelector::InvalidArgument(
        "this locker already has a live lease (free it first: one lease per locker)");
  try {
    auto handle = std::make_unique<mongoelector_lease>();
    handle->locker = locker;
    mongoelector::KeepAliveOptions ko;
    ko.blocking = args.blocking;
    ko.timeout_s = args.timeout_s;
    ko.step_s = args.step_s;
    ko.force = args.force;
    if (args.on_lost != nullptr) {
      ko.on_lost = [fn = args.on_lost, ud = args.user_data] { fn(ud); };
    }
    // The handle owns the Locker; the lease borrows it (the locker outlives the lease).
    std::shared_ptr<mongoelector::Locker> borrowed(h.locker.get(), [](mongoelector::Locker*) {});
    if (!legacy_cancel) {
      mongoelector::capi::AcquireArgs a;
      a.cancel = args.cancel;
      ko.cancel = mongoelector::capi::cancel_fn(a);
      handle->lease = mongoelector::KeepAliveLease::acquire(std::move(borrowed), std::move(ko));
    } else {
      std::lock_guard<std::mutex> g(h.mu);  // as mongoelector_locker_acquire
      if (args.blocking && h.cancel_requested.exchange(false)) {
        throw mongoelector::Cancelled("acquire cancelled by mongoelector_locker_cancel()");
      }
      if (args.blocking) ko.cancel = [&h] { return h.cancel_requested.exchange(false); };
      handle->lease = mongoelector::KeepAliveLease::acquire(std::move(borrowed), std::move(ko));
    }
    return handle.release();
  } catch (...) {
    h.has_lease.store(false);
    throw;
  }
}

}  // namespace

extern "C" {

MONGOELECTOR_API void mongoelector_lease_options_init(mongoelector_lease_options* options) {
  if (options == nullptr) return;
  options->version = MONGOELECTOR_LEASE_OPTIONS_VERSION;
  options->blocking = 1;
  options->timeout_seconds = -1;
  options->step_seconds = 0.25;
  options->on_lost = nullptr;
  options->user_data = nullptr;
}

MONGOELECTOR_API mongoelector_status
mongoelector_lease_acquire(mongoelector_locker* locker, const mongoelector_lease_options* options,
                           mongoelector_lease** out) {
  return guard([&] {
    checked(locker);
    require(out != nullptr, "out is NULL");
    *out = start_lease(locker, to_args(options), /*legacy_cancel=*/true);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_acquire_with(
    mongoelector_locker* locker, const mongoelector_acquire_options* acquire,
    mongoelector_lease_lost_fn on_lost, void* user_data, mongoelector_lease** out) {
  return guard([&] {
    checked(locker);
    require(out != nullptr, "out is NULL");
    const auto a = mongoelector::capi::to_acquire_args(acquire);
    LeaseArgs args;
    args.blocking = a.blocking;
    args.timeout_s = a.timeout_s;
    args.step_s = a.step_s;
    args.force = a.force;
    args.cancel = a.cancel;
    args.on_lost = on_lost;
    args.user_data = user_data;
    *out = start_lease(locker, args, /*legacy_cancel=*/false);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_fence(mongoelector_lease* lease,
                                                              int64_t* out) {
  return guard([&] {
    auto& h = checked_lease(lease);
    require(out != nullptr, "out is NULL");
    *out = h.lease->fence();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_lost(mongoelector_lease* lease, int* out) {
  return guard([&] {
    auto& h = checked_lease(lease);
    require(out != nullptr, "out is NULL");
    *out = h.lease->lost() ? 1 : 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_wait_lost(mongoelector_lease* lease,
                                                                  double timeout_seconds,
                                                                  int* lost_out) {
  return guard([&] {
    auto& h = checked_lease(lease);
    require(lost_out != nullptr, "lost_out is NULL");
    require(!std::isnan(timeout_seconds), "timeout_seconds is NaN");
    std::optional<std::int64_t> timeout_ms;
    if (timeout_seconds >= 0 && std::isfinite(timeout_seconds))
      timeout_ms = static_cast<std::int64_t>(std::ceil(std::min(timeout_seconds, 1e12) * 1000.0));
    *lost_out = h.lease->wait_lost(timeout_ms) ? 1 : 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_release(mongoelector_lease* lease,
                                                                double min_hold_seconds) {
  return guard([&] { checked_lease(lease).lease->close(min_hold_seconds); });
}

MONGOELECTOR_API void mongoelector_lease_free(mongoelector_lease* lease) {
  if (lease == nullptr || lease->magic != mongoelector::capi::kLeaseMagic) return;
  lease->magic = mongoelector::capi::kFreedMagic;
  try {
    lease->lease->close();  // stops renewing; releases (fenced) unless lost
  } catch (...) {
  }
  try {
    lease->lease.reset();
  } catch (...) {
  }
  if (lease->locker != nullptr && lease->locker->magic == mongoelector::capi::kLockerMagic)
    lease->locker->has_lease.store(false);
  delete lease;
}

}  // extern "C"
