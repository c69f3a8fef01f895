/*
 * mongoelector/locker.h: lockers: one distributed lock on a key.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_LOCKER_H
#define MONGOELECTOR_LOCKER_H

#include "cancel.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Locker ------------------------------------------------------------------------ */

/* Since 1.1: a locker's configuration, grown by appending fields. Defaults (shared by
 * every binding: Go, Rust and the CLI use this struct; see README, "Defaults"):
 * collection "mongolocker", ttl 600 s, timeparanoid on, max offset 0.5 s,
 * delete_on_release off (Python's drop-in MongoLocker turns it on, as the original
 * deletes on release), allow_unsafe_server off, per-call timeout ttl/10 in [0.1 s, 5 s]. */
/* Version 1 is the struct up to op_timeout_seconds; a program compiled against it keeps
 * working (fair stays off). */
#define MONGOELECTOR_LOCKER_CONFIG_VERSION 2
typedef struct mongoelector_locker_config {
  uint32_t version;       /* the version passed to mongoelector_locker_config_init */
  const char *collection; /* NULL: "mongolocker"; copied */
  double ttl_seconds;     /* > 0 and finite */
  int timeparanoid;
  double max_offset_seconds;
  int delete_on_release; /* see README, "Mixed fleets" */
  int allow_unsafe_server;
  /* Time bound of one round trip (server selection, connect, socket, maxTimeMS).
   * 0: ttl/10 clamped to [0.1 s, 5 s]; else finite, > 0 and at most ttl/2. */
  double op_timeout_seconds;
  /* Version 2. Fair (FIFO) locking, default 0: with fair != 0 a blocking acquire that
   * finds the lock held waits in the key's queue ("<collection>.queue") and is served in
   * arrival order (a queued waiter renews its place; one that dies holds the queue up
   * for at most one ttl; a timeout or a cancel leaves the queue). Every acquire of a fair
   * locker honours the live queue: a non-blocking one refused while others wait gets
   * MONGOELECTOR_ERR_LOCK_EXISTS with a message about the waiters. A locker without fair
   * neither queues nor reads the queue (it may pass the waiters, never break exclusion):
   * make every locker of the key fair. */
  int fair;
} mongoelector_locker_config;

/* Sets version and the defaults of the fields that exist in `version` (1 ..
 * MONGOELECTOR_LOCKER_CONFIG_VERSION; pass that macro). INVALID_ARGUMENT for another
 * version or NULL. Any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_locker_config_init(mongoelector_locker_config *config, uint32_t version);
/* Creates a locker for `key` (non-empty UTF-8, at most 1024 bytes) with `config` (NULL:
 * defaults). Ensures the collection's TTL index (one round trip; a server that rejects
 * TTL indexes is tolerated with a logged warning). *out is owned by the caller:
 * mongoelector_locker_free(). A locker may be used from several threads. */
MONGOELECTOR_API mongoelector_status
mongoelector_locker_new_with(mongoelector_client *client, const char *key,
                             const mongoelector_locker_config *config, mongoelector_locker **out);

/* Frees a locker (does NOT release a held lock: it expires at its ttl). NULL ok. */
MONGOELECTOR_API void mongoelector_locker_free(mongoelector_locker *locker);

/* Since 1.1: how to acquire, one struct per call, grown by appending fields. */
#define MONGOELECTOR_ACQUIRE_OPTIONS_VERSION 1
typedef struct mongoelector_acquire_options {
  uint32_t version;       /* the version passed to mongoelector_acquire_options_init */
  int blocking;           /* default 1: wait for the lock; 0: one attempt */
  double timeout_seconds; /* default -1: no limit (blocking only; must be < 0 otherwise) */
  double step_seconds;    /* default 0.25: retry interval while waiting */
  int force;              /* default 0; 1 takes the lock whoever holds it */
  mongoelector_cancel_token *cancel; /* default NULL; borrowed for the call */
} mongoelector_acquire_options;

/* Sets version and defaults (version: 1 .. MONGOELECTOR_ACQUIRE_OPTIONS_VERSION). */
MONGOELECTOR_API mongoelector_status
mongoelector_acquire_options_init(mongoelector_acquire_options *options, uint32_t version);
/* Acquires the lock (options NULL: blocking, no timeout). blocking=0: one attempt,
 * MONGOELECTOR_ERR_LOCK_EXISTS if held; timeout_seconds must then be < 0 ("none").
 * blocking=1: retries every step_seconds (finite, > 0) until timeout_seconds (< 0 or
 * +inf: wait forever), then MONGOELECTOR_ERR_TIMEOUT. force=1 takes the lock whoever
 * holds it. On success *fence_out (may be NULL) receives the fencing token: strictly
 * greater than every token handed out before for this key. Tokens are epoch << 32 | n,
 * so the first one of a fresh key is 4294967296, not 1. The wait does NOT hold the
 * locker: locked, owned, current, release and touch from other threads answer while it
 * waits. Cancellation is per call through options->cancel (MONGOELECTOR_ERR_CANCELLED,
 * also when the token is already cancelled at the call); mongoelector_locker_cancel()
 * does not affect it. Two acquires on one locker at once are allowed; at most one of
 * them gets the lock. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_acquire_with(
    mongoelector_locker *locker, const mongoelector_acquire_options *options, int64_t *fence_out);

/* Releases this locker's lock (any holder's with force=1). Not holding is not an error. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_release(mongoelector_locker *locker,
                                                                 int force);
/* Since 1.1. Scheduler semantics (ShedLock's lockAtLeastFor): lets go of this locker's
 * hold but keeps the lock TAKEN until at least min_hold_seconds after it was acquired (on
 * the server's clock; never early, late by at most a round trip and the clock estimate's
 * uncertainty), so that no node runs the same job again within that time even if this
 * run finished sooner. Past that point it is a plain release. *frees_at_ms_out (may be
 * NULL): server time (ms since the epoch) at which the lock frees, 0 when it was released
 * now or nothing was held. INVALID_ARGUMENT (hold kept) unless min_hold_seconds is a
 * finite number >= 0. LOST when the write landed after the hold had ended at the server
 * (it expired, or another holder took the lock): the lock is NOT kept taken until then.
 * UNAVAILABLE/SERVER: the write failed and may still land; the hold stays given up and
 * the next release, release_min_hold or acquire sends it again. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_release_min_hold(
    mongoelector_locker *locker, double min_hold_seconds, int64_t *frees_at_ms_out);
/* Since 1.1. At most once per window: claims the current window of window_seconds for
 * this locker's key. Windows are aligned on the server's clock (start = floor(server now /
 * window) * window, ms since the epoch), so every node agrees on them whatever its own
 * clock says. The first claim of a window wins it (a marker lock "<key>@window:<start>" in
 * the locker's collection, kept until the window ends exactly); every later claim in that
 * window, from any node, gets *claimed_out = 0, as does a claim within the server-time
 * estimate's uncertainty of the window's end (the window may be over). On a win *claimed_out = 1 and
 * *window_start_ms_out (may be NULL) = the window's start (else 0). Independent of the
 * key's own lock: take the lock first, then claim, to get "skip if running" as well.
 * INVALID_ARGUMENT unless 0.001 <= window_seconds <= 1e9. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_claim_window(mongoelector_locker *locker,
                                                                      double window_seconds,
                                                                      int *claimed_out,
                                                                      int64_t *window_start_ms_out);
/* Renews a held, unexpired lock: *renewed_out = 1 and *expire_ms_out = new expiry; else
 * *renewed_out = 0 and *expire_ms_out = 0. expire_ms_out may be NULL. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_touch(mongoelector_locker *locker,
                                                               int *renewed_out,
                                                               int64_t *expire_ms_out);
/* *out = 1 if anyone holds an unexpired lock on the key (one round trip). */
MONGOELECTOR_API mongoelector_status mongoelector_locker_locked(mongoelector_locker *locker,
                                                                int *out);
/* *out = 1 if this locker holds it (one round trip). */
MONGOELECTOR_API mongoelector_status mongoelector_locker_owned(mongoelector_locker *locker,
                                                               int *out);
/* The fencing token of this locker's current hold, 0 when it holds nothing (local). */
MONGOELECTOR_API mongoelector_status mongoelector_locker_fence(mongoelector_locker *locker,
                                                               int64_t *out);
/* This locker's uuid (owned by the locker). */
MONGOELECTOR_API mongoelector_status mongoelector_locker_uuid(mongoelector_locker *locker,
                                                              const char **out);
/* Compares the host clock with the server's; MONGOELECTOR_ERR_TIME_OFFSET when the
 * difference exceeds max_offset_seconds. *offset_seconds_out (may be NULL) = server
 * minus host, written in both cases. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_verify_time(mongoelector_locker *locker,
                                                                     double *offset_seconds_out);

/* Since 1.1: the current lock document, with strings the caller owns and room to grow.
 * Set version before the call; release the strings with mongoelector_lock_details_clear. */
#define MONGOELECTOR_LOCK_DETAILS_VERSION 1
typedef struct mongoelector_lock_details {
  uint32_t version; /* set by the caller: MONGOELECTOR_LOCK_DETAILS_VERSION */
  char *uuid;       /* holder's uuid, whole; owned by the struct */
  char *host;       /* holder's host, whole; owned by the struct */
  int64_t pid;
  int64_t created_ms; /* server time */
  int64_t expire_ms;  /* server time */
  int64_t fence;      /* 0 if written by a node without fencing (original schema) */
} mongoelector_lock_details;
/* *found_out = 1 and *details filled when the key is held (one round trip); 0 otherwise
 * (then uuid and host are NULL). Any strings the struct held before are NOT freed:
 * clear it first when reusing it. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_current_details(
    mongoelector_locker *locker, mongoelector_lock_details *details, int *found_out);
/* Frees the strings of `details` and sets them to NULL. NULL ok. */
MONGOELECTOR_API void mongoelector_lock_details_clear(mongoelector_lock_details *details);
/* Since 1.1: the lock document of `key` in `collection` (NULL: the lockers' default,
 * "mongolocker") as mongoelector_locker_current_details reports it, read without a
 * locker, for tools that may only read (`mongoelector status`): it never writes (no
 * index, unlike mongoelector_locker_new) and does not create a database or collection
 * that does not exist; MongoDB: one find plus a server-clock sample. Set
 * details->version first; release the strings with mongoelector_lock_details_clear.
 * INVALID_ARGUMENT: NULL client, details or found_out, a NULL, empty or invalid key or
 * collection. Any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_client_read_lock(mongoelector_client *client, const char *collection, const char *key,
                              mongoelector_lock_details *details, int *found_out);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_LOCKER_H */
