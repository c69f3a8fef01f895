/*
 * mongoelector/semaphore.h: semaphores: at most N holders of a key, and their keep-alive leases.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_SEMAPHORE_H
#define MONGOELECTOR_SEMAPHORE_H

#include "common.h"
#include "lease.h"
#include "locker.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Semaphore (since 1.1) ------------------------------------------------------- */

/* A semaphore lets at most `limit` holders hold one key at any instant (distributex's
 * maxlocks pools, Curator's semaphore). Each hold has a lease (ttl) and a fencing token
 * strictly increasing per key across all holders, releases and expiries. A holder that
 * dies frees its slot at its expiry, on the server's time base. One handle holds at most
 * one slot: use one handle per concurrent holder. Protocol, round trips and limits:
 * core/semaphore/semaphore.h (one round trip for an uncontended acquire whose handle made
 * the last claim, two otherwise).
 *
 * Status codes as for lockers: MONGOELECTOR_ERR_LOCK_EXISTS (non-blocking, every slot
 * held), MONGOELECTOR_ERR_TIMEOUT, MONGOELECTOR_ERR_CANCELLED, MONGOELECTOR_ERR_UNSAFE_SERVER
 * (FerretDB unless allow_unsafe_server), MONGOELECTOR_ERR_INVALID_ARGUMENT (also: a limit
 * other than the one the key's document was created with; acquiring while this handle
 * holds a slot). */

typedef struct mongoelector_semaphore mongoelector_semaphore;

/* Version 1 is the struct up to op_timeout_seconds; a program compiled against it keeps
 * working (fair stays off). */
#define MONGOELECTOR_SEMAPHORE_CONFIG_VERSION 2
typedef struct mongoelector_semaphore_config {
  uint32_t version;          /* the version passed to mongoelector_semaphore_config_init */
  const char *collection;    /* NULL: "mongosemaphore" (epochs in "<collection>.fences"); copied */
  int64_t limit;             /* 1..1000, default 1; fixed per key when its document is created */
  double ttl_seconds;        /* default 600; > 0 and finite */
  int timeparanoid;          /* default 1: refuse to acquire when the host clock is off */
  double max_offset_seconds; /* default 0.5 */
  int allow_unsafe_server;   /* default 0 */
  double op_timeout_seconds; /* default 0: ttl/10 in [0.1 s, 5 s] */
  /* Version 2. Fair (FIFO) queueing, default 0: with fair != 0 a blocking acquire that
   * finds every slot held waits in the key's queue and is served in arrival order (a
   * queued waiter renews its place; one that dies holds the queue up for at most one
   * ttl). Every acquire honours a live queue, fair or not: a non-fair or non-blocking
   * acquire never takes a slot ahead of a live waiter. */
  int fair;
} mongoelector_semaphore_config;

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_config_init(mongoelector_semaphore_config *config, uint32_t version);

/* A semaphore on `key` over `client`'s connections (config NULL: defaults, limit 1).
 * No round trip. *out: mongoelector_semaphore_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_new(
    mongoelector_client *client, const char *key, const mongoelector_semaphore_config *config,
    mongoelector_semaphore **out);
/* Frees the handle; does NOT release (a held slot ends at its ttl): release first. NULL ok. */
MONGOELECTOR_API void mongoelector_semaphore_free(mongoelector_semaphore *semaphore);

/* Takes one slot (options NULL: blocking, no timeout, step 0.25 s; `force` must be 0).
 * *fence_out (may be NULL) = the hold's fencing token. Other calls on the handle answer
 * while it waits. */
MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_acquire(mongoelector_semaphore *semaphore,
                               const mongoelector_acquire_options *options, int64_t *fence_out);
/* Releases this handle's slot (fenced). Not holding is not an error. */
MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_release(mongoelector_semaphore *semaphore);
/* Renews this handle's slot to now + ttl: *renewed_out = 1 and *expire_ms_out (may be
 * NULL) = the new expiry (server time, ms since the epoch); 0 when it holds no unexpired
 * slot any more. */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_touch(mongoelector_semaphore *semaphore,
                                                                  int *renewed_out,
                                                                  int64_t *expire_ms_out);
/* *out = the token of this handle's hold, 0 when none. No round trip. */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_fence(mongoelector_semaphore *semaphore,
                                                                  int64_t *out);

/* One holder as listed by mongoelector_semaphore_holders (a fixed struct: later fields
 * would come with a new function). */
typedef struct mongoelector_semaphore_holder {
  char *uuid; /* malloc'd */
  char *host; /* malloc'd */
  int64_t pid;
  int64_t fence;
  int64_t created_ms; /* server time, ms since the epoch */
  int64_t expire_ms;
} mongoelector_semaphore_holder;

/* The unexpired holders, in slot order (one round trip). *holders_out is a malloc'd
 * array of *count_out entries (NULL when 0): mongoelector_semaphore_holders_free(). */
MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_holders(mongoelector_semaphore *semaphore,
                               mongoelector_semaphore_holder **holders_out, size_t *count_out);
MONGOELECTOR_API void mongoelector_semaphore_holders_free(mongoelector_semaphore_holder *holders,
                                                          size_t count);

/* A semaphore slot kept alive on the library's renewer thread until
 * mongoelector_semaphore_lease_free(), with the rules of mongoelector_lease: renewed about
 * every ttl/3, declared LOST on this host's monotonic clock at its renew deadline (before
 * anyone else can take the slot), loss final; on_lost runs once on a callback thread. `acquire` as for mongoelector_semaphore_acquire (NULL: blocking, no timeout).
 * One live lease per semaphore handle; the handle must outlive it, and must not be
 * acquired, released or touched while it lives. *out: mongoelector_semaphore_lease_free(). */
typedef struct mongoelector_semaphore_lease mongoelector_semaphore_lease;
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_acquire(
    mongoelector_semaphore *semaphore, const mongoelector_acquire_options *acquire,
    mongoelector_lease_lost_fn on_lost, void *user_data, mongoelector_semaphore_lease **out);
/* The hold's fencing token (kept after loss). Local, any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_lease_fence(mongoelector_semaphore_lease *lease, int64_t *out);
/* *out = 1 once lost (never back to 0). Local, any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_lease_lost(mongoelector_semaphore_lease *lease, int *out);
/* Waits until lost or timeout_seconds pass (< 0: forever); *lost_out = 1 if lost. Not
 * from on_lost. */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_wait_lost(
    mongoelector_semaphore_lease *lease, double timeout_seconds, int *lost_out);
/* Stops keeping the slot alive and releases it (fenced; not if lost). NULL ok. Not from
 * on_lost nor while another thread is inside a call on it. */
MONGOELECTOR_API void mongoelector_semaphore_lease_free(mongoelector_semaphore_lease *lease);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_SEMAPHORE_H */
