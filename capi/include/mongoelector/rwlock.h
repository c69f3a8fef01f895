/*
 * mongoelector/rwlock.h: read-write locks: many readers or one writer on a key, and their
 * keep-alive leases.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_RWLOCK_H
#define MONGOELECTOR_RWLOCK_H

#include "common.h"
#include "lease.h"
#include "locker.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Read-write lock (since 1.1) --------------------------------------------------- */

/* A read-write lock lets many readers (up to max_readers) OR one writer hold one key at
 * any instant. Each hold has a lease (ttl) and a fencing token; tokens strictly increase
 * per key across readers and writers, so a writer's token is greater than every token
 * granted before it. A holder that dies frees its hold at its expiry, on the server's
 * time base. With writer preference (the default), a writer that waits (a blocking
 * acquire of the write side) stops NEW readers from entering until it has the lock or
 * gives up, so a stream of readers cannot starve it; readers already in keep their
 * holds. One handle holds at most one hold, a read or the write: use one handle per
 * concurrent holder. Rules, round trips and limits: core/semaphore/rwlock.h (the lock
 * lives in one document per key, like a semaphore's, in its own collection).
 *
 * Status codes as for semaphores: MONGOELECTOR_ERR_LOCK_EXISTS (non-blocking, the side
 * asked for is not free: the message says who holds it, or that a writer waits),
 * MONGOELECTOR_ERR_TIMEOUT, MONGOELECTOR_ERR_CANCELLED, MONGOELECTOR_ERR_UNSAFE_SERVER
 * (FerretDB unless allow_unsafe_server), MONGOELECTOR_ERR_INVALID_ARGUMENT (also: a side
 * that is neither READ nor WRITE; a max_readers other than the one the key's document was
 * created with; a key whose document in the collection is another kind's, such as a
 * semaphore's; acquiring while this handle holds), all refused before anything is
 * written. */

typedef struct mongoelector_rwlock mongoelector_rwlock;

/* The sides of a read-write lock. */
typedef enum mongoelector_rwlock_side {
  MONGOELECTOR_RWLOCK_NONE = 0,  /* mongoelector_rwlock_held_side: this handle holds nothing */
  MONGOELECTOR_RWLOCK_READ = 1,  /* shared: up to max_readers holders at once */
  MONGOELECTOR_RWLOCK_WRITE = 2, /* exclusive: one holder, no readers */
  /* mongoelector_rwlock_holders only: a writer waiting for the lock (writer preference):
   * new readers wait for it. Its fence is that of its waiting mark, not a hold's. */
  MONGOELECTOR_RWLOCK_WAITING_WRITER = 3
} mongoelector_rwlock_side;

/* Version 1 is the struct up to op_timeout_seconds; a program compiled against it keeps
 * working (fair stays off). */
#define MONGOELECTOR_RWLOCK_CONFIG_VERSION 2
typedef struct mongoelector_rwlock_config {
  uint32_t version;          /* the version passed to mongoelector_rwlock_config_init */
  const char *collection;    /* NULL: "mongorwlock" (epochs in "<collection>.fences"); copied */
  int64_t max_readers;       /* 1..1000, default 64; fixed per key when its document is created */
  int writer_preference;     /* default 1: a waiting writer stops new readers; 0: readers
                              * enter while a writer waits (it may wait as long as readers
                              * keep overlapping) */
  double ttl_seconds;        /* default 600; > 0 and finite */
  int timeparanoid;          /* default 1: refuse to acquire when the host clock is off */
  double max_offset_seconds; /* default 0.5 */
  int allow_unsafe_server;   /* default 0 */
  double op_timeout_seconds; /* default 0: ttl/10 in [0.1 s, 5 s] */
  /* Version 2. Fair (FIFO) writers, default 0: with fair != 0 a blocking writer that
   * finds the lock taken waits in the key's queue instead of writing the waiting mark,
   * and writers are served in arrival order; with writer_preference a live queue stops
   * new readers as the mark does. A writer that dies holds the queue up for at most one
   * ttl. */
  int fair;
} mongoelector_rwlock_config;

MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_config_init(mongoelector_rwlock_config *config, uint32_t version);

/* A read-write lock on `key` over `client`'s connections (config NULL: defaults). No
 * round trip. *out: mongoelector_rwlock_free(). */
MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_new(mongoelector_client *client, const char *key,
                        const mongoelector_rwlock_config *config, mongoelector_rwlock **out);
/* Frees the handle; does NOT release (a held side ends at its ttl): release first. NULL ok. */
MONGOELECTOR_API void mongoelector_rwlock_free(mongoelector_rwlock *rwlock);

/* Takes `side` (MONGOELECTOR_RWLOCK_READ or _WRITE) as `options` say (NULL: blocking, no
 * timeout, step 0.25 s; `force` must be 0; `cancel` ends the wait). *fence_out (may be
 * NULL) = the hold's fencing token. A blocking writer refused by live holders waits with
 * its mark (writer preference), which it removes when it gives up (timeout, cancel,
 * error). Other calls on the handle answer while it waits. */
MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_acquire(mongoelector_rwlock *rwlock, mongoelector_rwlock_side side,
                            const mongoelector_acquire_options *options, int64_t *fence_out);
/* Releases this handle's hold, read or write (fenced), and its waiting mark if any. Not
 * holding is not an error. */
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_release(mongoelector_rwlock *rwlock);
/* Renews this handle's hold to now + ttl: *renewed_out = 1 and *expire_ms_out (may be
 * NULL) = the new expiry (server time, ms since the epoch); 0 when it holds nothing
 * unexpired any more. */
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_touch(mongoelector_rwlock *rwlock,
                                                               int *renewed_out,
                                                               int64_t *expire_ms_out);
/* *out = the token of this handle's hold, 0 when none. No round trip. */
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_fence(mongoelector_rwlock *rwlock,
                                                               int64_t *out);
/* *out = the side this handle holds: MONGOELECTOR_RWLOCK_READ, _WRITE, or _NONE. No round
 * trip. */
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_held_side(mongoelector_rwlock *rwlock,
                                                                   mongoelector_rwlock_side *out);
/* This handle's uuid, the identity its holds carry (mongoelector_rwlock_holder.uuid);
 * owned by the handle. No round trip. */
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_uuid(mongoelector_rwlock *rwlock,
                                                              const char **out);
/* A static name for a side ("read", "write", "none", "waiting_writer"), "unknown"
 * otherwise. */
MONGOELECTOR_API const char *mongoelector_rwlock_side_name(mongoelector_rwlock_side side);

/* One entry of mongoelector_rwlock_holders (a fixed struct: later fields would come with a
 * new function). */
typedef struct mongoelector_rwlock_holder {
  mongoelector_rwlock_side side; /* READ, WRITE or WAITING_WRITER */
  char *uuid;                    /* malloc'd: the holding handle's identity */
  char *host;                    /* malloc'd */
  int64_t pid;
  int64_t fence;
  int64_t created_ms; /* server time, ms since the epoch */
  int64_t expire_ms;
} mongoelector_rwlock_holder;

/* The unexpired holders (one round trip): the readers in slot order, then the writer,
 * then a waiting writer, each when there is one. *holders_out is a malloc'd array of
 * *count_out entries (NULL when 0): mongoelector_rwlock_holders_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_holders(
    mongoelector_rwlock *rwlock, mongoelector_rwlock_holder **holders_out, size_t *count_out);
MONGOELECTOR_API void mongoelector_rwlock_holders_free(mongoelector_rwlock_holder *holders,
                                                       size_t count);

/* A read or the write hold kept alive on the library's renewer thread until
 * mongoelector_rwlock_lease_free(), with the rules of mongoelector_lease (renewed about
 * every ttl/3, in batches with the client's other leases; declared LOST on this host's
 * monotonic clock at its renew deadline, before anyone else can take the
 * side; loss final; on_lost runs once on a callback thread). `side` and `acquire` as for
 * mongoelector_rwlock_acquire (NULL: blocking, no timeout). One live lease per handle;
 * the handle must outlive it, and must not be acquired, released or touched while it
 * lives (fence and held_side are fine). *out: mongoelector_rwlock_lease_free(). */
typedef struct mongoelector_rwlock_lease mongoelector_rwlock_lease;
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_lease_acquire(
    mongoelector_rwlock *rwlock, mongoelector_rwlock_side side,
    const mongoelector_acquire_options *acquire, mongoelector_lease_lost_fn on_lost,
    void *user_data, mongoelector_rwlock_lease **out);
/* The hold's fencing token (kept after loss). Local, any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_lease_fence(mongoelector_rwlock_lease *lease, int64_t *out);
/* *out = 1 once lost (never back to 0). Local, any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_lease_lost(mongoelector_rwlock_lease *lease, int *out);
/* Waits until lost or timeout_seconds pass (< 0: forever); *lost_out = 1 if lost. Not
 * from on_lost. */
MONGOELECTOR_API mongoelector_status mongoelector_rwlock_lease_wait_lost(
    mongoelector_rwlock_lease *lease, double timeout_seconds, int *lost_out);
/* Stops keeping the hold alive and releases it (fenced; not if lost). NULL ok. Not from
 * on_lost nor while another thread is inside a call on it. */
MONGOELECTOR_API void mongoelector_rwlock_lease_free(mongoelector_rwlock_lease *lease);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_RWLOCK_H */
