/*
 * mongoelector/lease.h: keep-alive leases: a locker's lock kept alive by the library.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_LEASE_H
#define MONGOELECTOR_LEASE_H

#include "common.h"
#include "locker.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Keep-alive lease -------------------------------------------------------------- */

/* A lease holds a locker's lock and keeps it alive on the library's renewer thread (ONE
 * thread per process renews every lease; threads do not grow with leases) until
 * mongoelector_lease_free(). It renews about every ttl/3, retries a failed renewal every
 * min(ttl/20, 250 ms), and declares the lease LOST on this host's monotonic clock at the
 * renew deadline (lease end minus a margin, as the elector does: see README, "Keep-alive
 * leases"), whether or not a renewal call is still hanging or a callback is slow (the
 * clock is read: in a fork()ed child too), so that the holder stops before anyone else
 * can take the lock. Loss is final: a renewal that succeeds after it
 * does not bring the lease back (that hold is released instead, fenced). A renewal that
 * finds the lock taken by another declares the loss at once. */
typedef struct mongoelector_lease mongoelector_lease;
/* on_lost: runs once, on one of the library's callback threads (never the timer that
 * decides losses: a slow on_lost delays no other lease's loss), when the lease is
 * declared lost (its renew deadline passed without a successful renewal, or a renewal
 * found the lock taken), or inside mongoelector_lease_free if it had not run yet. Keep it
 * short; it may call mongoelector_lease_lost/fence but not free. */
typedef void (*mongoelector_lease_lost_fn)(void *user_data);

/* Since 1.1. Acquires `locker`'s lock as mongoelector_locker_acquire_with does with
 * `acquire` (NULL: blocking, no timeout; LOCK_EXISTS when not blocking and held, TIMEOUT,
 * CANCELLED through its cancel token, which cancels the wait for the lock, not the
 * lease) and keeps it alive until mongoelector_lease_free; on_lost (may be NULL) gets
 * user_data. One live lease per locker (else INVALID_ARGUMENT). The locker must outlive
 * the lease. *out is owned by the caller: mongoelector_lease_free(). While the lease
 * lives, do not acquire, release or touch through the locker yourself (fence, uuid,
 * current, locked and owned are fine). Any thread; a lease may be queried from several
 * threads. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_acquire_with(
    mongoelector_locker *locker, const mongoelector_acquire_options *acquire,
    mongoelector_lease_lost_fn on_lost, void *user_data, mongoelector_lease **out);
/* The fencing token of the lease's hold (unchanged by renewals; still readable after
 * loss). Local, any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_fence(mongoelector_lease *lease,
                                                              int64_t *out);
/* *out = 1 once the lease is lost (never goes back to 0). Local, any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_lost(mongoelector_lease *lease, int *out);
/* Waits until the lease is lost or timeout_seconds pass (< 0: forever); *lost_out = 1 if lost.
 * Any thread; several threads may wait at once. Must not be called from on_lost. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_wait_lost(mongoelector_lease *lease,
                                                                  double timeout_seconds,
                                                                  int *lost_out);
/* Since 1.1. Stops keeping the lease alive and releases its lock now (fenced; a lost
 * lease is not released), or with min_hold_seconds > 0 keeps the lock taken until that
 * long after it was acquired (mongoelector_locker_release_min_hold). The lease must still
 * be freed; freeing it then releases nothing more. A failed release is logged, not
 * returned (the lock then expires at its ttl). INVALID_ARGUMENT (lease untouched) unless
 * min_hold_seconds is a finite number >= 0. With a minimum hold that is not surely kept,
 * the lease is released all the same and the call says so: LOST (the lease was lost, or
 * the lock had expired or been taken when the write landed), UNAVAILABLE/SERVER (the
 * write failed: it may still land, otherwise the lock frees at its ttl). Same thread rules
 * as mongoelector_lease_free. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_release(mongoelector_lease *lease,
                                                                double min_hold_seconds);
/* Stops keeping it alive and releases the lock (fenced; a lost lease is not released). NULL ok.
 * Waits for a renewal or on_lost call of this lease that is running on another thread;
 * must not be called from on_lost nor while another thread is inside a call on it. */
MONGOELECTOR_API void mongoelector_lease_free(mongoelector_lease *lease);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_LEASE_H */
