/*
 * mongoelector/deprecated.h: the frozen 1.0 forms of functions that have a 1.1 successor.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_DEPRECATED_H
#define MONGOELECTOR_DEPRECATED_H

#include "client.h"
#include "common.h"
#include "elector.h"
#include "lease.h"
#include "locker.h"
#include "log.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The 1.0 forms, frozen: each has a 1.1 successor (named at each) that takes a
 * versioned struct grown by appending fields, or returns strings the caller owns. They
 * stay supported and their ABI never changes, so programs written against 1.0 compile
 * and run unchanged; new code uses the successors. Define MONGOELECTOR_NO_DEPRECATED
 * before including <mongoelector.h> to leave them out (and find the calls to move). */

/* ---- Library ----------------------------------------------------------------------- */

/* Successor: mongoelector_set_log_handler (minimum level, and a release hook for
 * user_data).
 * Log callback: receives every message the library logs (level, NUL-terminated text
 * valid only during the call, user_data). Runs on whichever thread logs, often an
 * elector thread; it must be thread-safe and must not call back into the library's
 * *_free functions. NULL restores the default (warnings and errors to stderr).
 * A message being logged on another thread while the callback is replaced may still
 * reach the previous callback: keep its user_data valid a little longer.
 * Process-wide; any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_set_log_callback(mongoelector_log_fn fn,
                                                                   void *user_data);

/* ---- Client ------------------------------------------------------------------------ */

/* Successor: mongoelector_client_server_info_copy (strings owned by the caller, any
 * thread, answer remembered).
 * Asks the server what it is (one round trip): name ("MongoDB", "FerretDB",
 * "mongo-java-server") and version, as strings owned by the client, valid until the
 * next call of this function on this client or its free. Not concurrent with itself
 * on one client. */
MONGOELECTOR_API mongoelector_status mongoelector_client_server_info(mongoelector_client *client,
                                                                     const char **name_out,
                                                                     const char **version_out);

/* ---- Locker ------------------------------------------------------------------------ */

/* Successor: mongoelector_locker_config and mongoelector_locker_new_with. */
#define MONGOELECTOR_LOCKER_OPTIONS_VERSION 1
typedef struct mongoelector_locker_options {
  uint32_t version;          /* MONGOELECTOR_LOCKER_OPTIONS_VERSION */
  const char *collection;    /* NULL: "mongolocker" */
  double ttl_seconds;        /* default 600; must be > 0 and finite */
  int timeparanoid;          /* default 1: check the host clock before acquiring */
  double max_offset_seconds; /* default 0.5 */
  int delete_on_release;     /* default 0: see README, "Mixed fleets" */
  int allow_unsafe_server;   /* default 0: refuse servers with non-atomic findAndModify */
} mongoelector_locker_options;

/* Sets version and defaults. Any thread. */
MONGOELECTOR_API void mongoelector_locker_options_init(mongoelector_locker_options *options);

/* Creates a locker for `key` (non-empty UTF-8, at most 1024 bytes). `options` may be
 * NULL (defaults). Ensures the collection's TTL index (one round trip; a server that
 * rejects TTL indexes is tolerated with a logged warning). *out is owned by the caller:
 * mongoelector_locker_free(). A locker may be used from several threads; calls on it
 * are serialised except mongoelector_locker_cancel(). */
MONGOELECTOR_API mongoelector_status
mongoelector_locker_new(mongoelector_client *client, const char *key,
                        const mongoelector_locker_options *options, mongoelector_locker **out);

/* Successors: mongoelector_locker_acquire_with (per-call cancel token, the wait does not
 * hold the locker) and mongoelector_cancel_token.
 * Acquires the lock. blocking=0: one attempt, MONGOELECTOR_ERR_LOCK_EXISTS if held;
 * timeout_seconds must then be < 0 ("none"). blocking=1: retries every step_seconds
 * (finite, > 0) until timeout_seconds (< 0 or +inf: wait forever), then
 * MONGOELECTOR_ERR_TIMEOUT. The wait holds the locker's mutex: other calls on the same
 * locker wait, except fence, uuid and cancel. force=1
 * takes the lock whoever holds it. On success *fence_out (may be NULL) receives the
 * fencing token: strictly greater than every token handed out before for this key.
 * Tokens are epoch << 32 | n, so the first one of a fresh key is 4294967296, not 1. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_acquire(mongoelector_locker *locker,
                                                                 int blocking,
                                                                 double timeout_seconds,
                                                                 double step_seconds, int force,
                                                                 int64_t *fence_out);
/* Makes a blocking acquire running on another thread return MONGOELECTOR_ERR_CANCELLED
 * within about 100 ms. The request stays pending until an acquire consumes it, so a
 * cancel that races just ahead of acquire() is not lost. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_cancel(mongoelector_locker *locker);

/* Successor: mongoelector_locker_current_details (whole strings, room to grow).
 * The current, unexpired lock document of the key. */
typedef struct mongoelector_lock_info {
  char uuid[64];  /* holder's uuid, NUL-terminated (truncated if longer) */
  char host[256]; /* holder's host, NUL-terminated (truncated if longer) */
  int64_t pid;
  int64_t created_ms; /* server time */
  int64_t expire_ms;  /* server time */
  int64_t fence;      /* 0 if written by a node without fencing (original schema) */
} mongoelector_lock_info;
/* *found_out = 1 and *out filled when the key is held; *found_out = 0 otherwise. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_current(mongoelector_locker *locker,
                                                                 mongoelector_lock_info *out,
                                                                 int *found_out);

/* ---- Elector ----------------------------------------------------------------------- */

/* Successor: mongoelector_elector_config and mongoelector_elector_new_with. */
#define MONGOELECTOR_ELECTOR_OPTIONS_VERSION 1
typedef struct mongoelector_elector_options {
  uint32_t version;                        /* MONGOELECTOR_ELECTOR_OPTIONS_VERSION */
  double ttl_seconds;                      /* default 15; > 0 and finite */
  int report_status;                       /* default 1 */
  const char *app_version;                 /* NULL: none; copied */
  mongoelector_callback_fn on_leader;      /* NULL: none */
  mongoelector_callback_fn on_leader_loss; /* NULL: none */
  mongoelector_callback_fn on_loop;        /* NULL: none; after each poll */
  void *user_data;                         /* passed to the three callbacks */
  int allow_unsafe_server;                 /* must be 0 (kept for ABI compatibility) */
} mongoelector_elector_options;

MONGOELECTOR_API void mongoelector_elector_options_init(mongoelector_elector_options *options);

/* Creates an elector for `key` (collections "elector.locks" and
 * "elector.leader_status"). *out is owned by the caller: mongoelector_elector_free(). */
MONGOELECTOR_API mongoelector_status
mongoelector_elector_new(mongoelector_client *client, const char *key,
                         const mongoelector_elector_options *options, mongoelector_elector **out);

/* ---- Keep-alive lease -------------------------------------------------------------- */

/* Successor: mongoelector_lease_acquire_with (mongoelector_acquire_options, cancel token). */
#define MONGOELECTOR_LEASE_OPTIONS_VERSION 1
typedef struct mongoelector_lease_options {
  uint32_t version;                   /* MONGOELECTOR_LEASE_OPTIONS_VERSION */
  int blocking;                       /* default 1: wait for the lock */
  double timeout_seconds;             /* default -1 (none); blocking only */
  double step_seconds;                /* default 0.25: retry interval while waiting */
  mongoelector_lease_lost_fn on_lost; /* NULL: none */
  void *user_data;
} mongoelector_lease_options;

/* Sets version and defaults. Any thread. */
MONGOELECTOR_API void mongoelector_lease_options_init(mongoelector_lease_options *options);
/* Acquires `locker`'s lock (as mongoelector_locker_acquire: LOCK_EXISTS when not blocking
 * and held, TIMEOUT, CANCELLED through mongoelector_locker_cancel) and keeps it alive
 * until mongoelector_lease_free. One live lease per locker (else INVALID_ARGUMENT). The
 * locker must outlive the lease. `options` may be NULL (defaults). *out is owned by the
 * caller: mongoelector_lease_free(). While the lease lives, do not acquire, release or
 * touch through the locker yourself (fence, uuid, current, locked and owned are fine).
 * Any thread; a lease may be queried from several threads. */
MONGOELECTOR_API mongoelector_status
mongoelector_lease_acquire(mongoelector_locker *locker, const mongoelector_lease_options *options,
                           mongoelector_lease **out);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_DEPRECATED_H */
