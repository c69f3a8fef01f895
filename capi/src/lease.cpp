// mongoelector_lease_*: a core KeepAliveLease (core/lease) on a locker handle's Locker,
// renewed by the process-wide renewer; on_lost runs on a callback-dispatcher thread. What
// every lease handle shares (fence, lost, wait_lost, free): lease_handle.h.
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>

#include "exceptions.h"
#include "handles.h"
#include "lease_handle.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kLeaseMagic = 0x6d654c6561736521ULL;  // "meLease!"
}  // namespace mongoelector::capi

struct mongoelector_lease : mongoelector::capi::LeaseHandle {
  mongoelector_lease() : LeaseHandle(mongoelector::capi::kLeaseMagic) {}
};

namespace {

// The fields that exist in the caller's options version (only ever appended).
struct LeaseArgs {
  mongoelector::capi::AcquireArgs acquire;  // cancel: the 1.1 per-call token
  mongoelector_lease_lost_fn on_lost = nullptr;
  void* user_data = nullptr;
};

LeaseArgs to_args(const mongoelector_lease_options* o) {
  LeaseArgs a;
  if (o == nullptr) return a;
  mongoelector::capi::check_options_version(o->version, MONGOELECTOR_LEASE_OPTIONS_VERSION,
                                            "lease");
  a.acquire.blocking = o->blocking != 0;
  require(!std::isnan(o->timeout_seconds), "timeout_seconds is NaN");
  if (!a.acquire.blocking) {
    require(o->timeout_seconds < 0, "blocking=0 takes no timeout: pass a negative timeout_seconds");
  } else {
    mongoelector::capi::require_positive_duration(o->step_seconds, "step_seconds");
    a.acquire.step_s = o->step_seconds;
    // Negative means "none"; +infinity is the same wait.
    if (o->timeout_seconds >= 0 && std::isfinite(o->timeout_seconds))
      a.acquire.timeout_s = o->timeout_seconds;
  }
  a.on_lost = o->on_lost;
  a.user_data = o->user_data;
  return a;
}

// Acquires and starts keeping alive; the handle for the caller. legacy_cancel: the 1.0
// entry point, which honours (and consumes) mongoelector_locker_cancel.
mongoelector_lease* start_locker_lease(mongoelector_locker* locker, const LeaseArgs& args,
                                       bool legacy_cancel) {
  auto& h = checked(locker);
  return mongoelector::capi::start_lease<mongoelector_lease>(h, "locker", [&] {
    // The handle owns the Locker; the lease borrows it (the locker outlives the lease).
    std::shared_ptr<mongoelector::Locker> borrowed(h.locker.get(), [](mongoelector::Locker*) {});
    if (!legacy_cancel) {
      return mongoelector::KeepAliveLease::acquire(
          std::move(borrowed),
          mongoelector::capi::keepalive_options(args.acquire, args.on_lost, args.user_data));
    }
    mongoelector::capi::AcquireArgs no_token = args.acquire;
    no_token.cancel = nullptr;
    auto ko = mongoelector::capi::keepalive_options(no_token, args.on_lost, args.user_data);
    std::lock_guard<std::mutex> g(h.mu);  // as mongoelector_locker_acquire
    if (no_token.blocking && h.cancel_requested.exchange(false)) {
      throw mongoelector::Cancelled("acquire cancelled by mongoelector_locker_cancel()");
    }
    if (no_token.blocking) ko.cancel = [&h] { return h.cancel_requested.exchange(false); };
    return mongoelector::KeepAliveLease::acquire(std::move(borrowed), std::move(ko));
  });
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
    *out = start_locker_lease(locker, to_args(options), /*legacy_cancel=*/true);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_acquire_with(
    mongoelector_locker* locker, const mongoelector_acquire_options* acquire,
    mongoelector_lease_lost_fn on_lost, void* user_data, mongoelector_lease** out) {
  return guard([&] {
    checked(locker);
    require(out != nullptr, "out is NULL");
    LeaseArgs args;
    args.acquire = mongoelector::capi::to_acquire_args(acquire);
    args.on_lost = on_lost;
    args.user_data = user_data;
    *out = start_locker_lease(locker, args, /*legacy_cancel=*/false);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_fence(mongoelector_lease* lease,
                                                              int64_t* out) {
  return mongoelector::capi::lease_fence(lease, mongoelector::capi::kLeaseMagic, "lease", out);
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_lost(mongoelector_lease* lease, int* out) {
  return mongoelector::capi::lease_lost(lease, mongoelector::capi::kLeaseMagic, "lease", out);
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_wait_lost(mongoelector_lease* lease,
                                                                  double timeout_seconds,
                                                                  int* lost_out) {
  return mongoelector::capi::lease_wait_lost(lease, mongoelector::capi::kLeaseMagic, "lease",
                                             timeout_seconds, lost_out);
}

MONGOELECTOR_API mongoelector_status mongoelector_lease_release(mongoelector_lease* lease,
                                                                double min_hold_seconds) {
  return guard([&] {
    mongoelector::capi::checked_lease(lease, mongoelector::capi::kLeaseMagic, "lease")
        .lease->close(min_hold_seconds);
  });
}

MONGOELECTOR_API void mongoelector_lease_free(mongoelector_lease* lease) {
  mongoelector::capi::free_lease(lease, mongoelector::capi::kLeaseMagic);
}

}  // extern "C"
