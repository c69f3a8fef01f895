// What every keep-alive lease handle of the C API is -- mongoelector_lease (a locker's
// lock), mongoelector_semaphore_lease (a slot), mongoelector_rwlock_lease (a read or the
// write hold) --: a core KeepAliveLease (core/lease/lease.h, ONE lease for every kind of
// hold) over the hold of its owner handle, which has at most one live lease at a time.
// The calls on a lease (fence, lost, wait_lost, free) and the one-lease rule are the same
// whatever the hold: they are written here, once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "exceptions.h"
#include "handles.h"
#include "lease/lease.h"

namespace mongoelector::capi {

struct LeaseHandle {
  explicit LeaseHandle(std::uint64_t m) : magic(m) {}
  std::uint64_t magic;
  std::unique_ptr<KeepAliveLease> lease;
  // The owner handle's one-lease flag and magic (the owner outlives the lease: the
  // caller's contract; the magic is checked before the flag is cleared, best effort).
  std::atomic<bool>* owner_has_lease = nullptr;
  const std::uint64_t* owner_magic = nullptr;
  std::uint64_t owner_live_magic = 0;
};

// `*h`, or InvalidArgument unless it is a live lease handle of `magic` (`kind` names it).
LeaseHandle& checked_lease(LeaseHandle* h, std::uint64_t magic, const char* kind);

// The keep-alive options of an acquire (blocking, timeout, step, force, the per-call
// cancel token) and its on_lost callback (may be NULL).
KeepAliveOptions keepalive_options(const AcquireArgs& args, mongoelector_lease_lost_fn on_lost,
                                   void* user_data);

// Starts a lease of the owner whose one-lease flag is `has_lease` (`owner` names it in
// the refusal: "this semaphore already has a live lease"): `acquire()` returns the core
// lease. The flag is given back when anything throws.
template <class Handle, class Owner, class Acquire>
Handle* start_lease(Owner& owner, const char* what, Acquire&& acquire) {
  bool expected = false;
  if (!owner.has_lease.compare_exchange_strong(expected, true))
    throw InvalidArgument(std::string("this ") + what +
                          " already has a live lease (free it first: one lease per handle)");
  try {
    auto handle = std::make_unique<Handle>();
    handle->owner_has_lease = &owner.has_lease;
    handle->owner_magic = &owner.magic;
    handle->owner_live_magic = owner.magic;
    handle->lease = acquire();
    return handle.release();
  } catch (...) {
    owner.has_lease.store(false);
    throw;
  }
}

// The calls every lease handle answers (the header's mongoelector_*lease_fence, _lost,
// _wait_lost).
mongoelector_status lease_fence(LeaseHandle* h, std::uint64_t magic, const char* kind,
                                int64_t* out) noexcept;
mongoelector_status lease_lost(LeaseHandle* h, std::uint64_t magic, const char* kind,
                               int* out) noexcept;
mongoelector_status lease_wait_lost(LeaseHandle* h, std::uint64_t magic, const char* kind,
                                    double timeout_seconds, int* lost_out) noexcept;

// Stops the lease and releases its hold (fenced; not if lost), gives the owner its flag
// back; never throws. False (nothing done) unless `h` is a live lease of `magic`, which
// is poisoned on true: the caller then deletes it.
bool close_lease(LeaseHandle* h, std::uint64_t magic) noexcept;
template <class Handle>
void free_lease(Handle* h, std::uint64_t magic) noexcept {
  if (close_lease(h, magic)) delete h;
}

}  // namespace mongoelector::capi
