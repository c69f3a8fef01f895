/*
 * mongoelector: distributed locks and leader election over MongoDB.
 *
 * The stable C ABI of libmongoelector (SONAME libmongoelector.so.1).
 *
 * Conventions (every function follows them):
 *  - Functions return a mongoelector_status; results come through `out` parameters,
 *    which are written only on MONGOELECTOR_OK (unless documented otherwise).
 *  - On failure, mongoelector_last_error() gives a message for the calling thread.
 *  - Handles are opaque. Every creator has a *_free that accepts NULL. Passing a handle
 *    after freeing it is a caller bug the library detects when it can (a freed handle
 *    is poisoned and answers MONGOELECTOR_ERR_INVALID_ARGUMENT) but cannot promise to.
 *  - Strings passed in are UTF-8, NUL-terminated, owned by the caller and copied when
 *    kept. Strings returned through `char **` are owned by the caller and released
 *    with mongoelector_free(). Strings returned through `const char **` belong to the
 *    handle and live as long as it does.
 *  - Times are seconds as double for durations; instants are int64 milliseconds since
 *    the Unix epoch on the SERVER's clock (the library estimates it; see README).
 *  - Options structs start with a `version` field; initialise them with the matching
 *    *_options_init(), which sets the version and the defaults. New fields are only
 *    ever appended.
 *  - No C++ exception ever crosses this boundary.
 */
#ifndef MONGOELECTOR_H
#define MONGOELECTOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One visibility macro: exported from the shared library, nothing else is. */
#if defined(_WIN32)
#define MONGOELECTOR_API
#elif defined(__GNUC__) && __GNUC__ >= 4
#define MONGOELECTOR_API __attribute__((visibility("default")))
#else
#define MONGOELECTOR_API
#endif

#define MONGOELECTOR_VERSION_MAJOR 1
#define MONGOELECTOR_VERSION_MINOR 0
#define MONGOELECTOR_VERSION_PATCH 0
#define MONGOELECTOR_VERSION_STRING "1.0.0"
/* major * 10000 + minor * 100 + patch */
#define MONGOELECTOR_VERSION_NUMBER \
  (MONGOELECTOR_VERSION_MAJOR * 10000 + MONGOELECTOR_VERSION_MINOR * 100 + MONGOELECTOR_VERSION_PATCH)

typedef enum mongoelector_status {
  MONGOELECTOR_OK = 0,
  /* NULL or freed handle, NULL out pointer, empty/non-UTF-8/too long key, ttl <= 0 or
   * NaN, blocking=0 together with a timeout, bad URI. */
  MONGOELECTOR_ERR_INVALID_ARGUMENT = 1,
  /* Non-blocking acquire: the lock is held by another ("<key> owned by <host> pid <pid>"). */
  MONGOELECTOR_ERR_LOCK_EXISTS = 2,
  /* Blocking acquire ran past its timeout. */
  MONGOELECTOR_ERR_TIMEOUT = 3,
  /* timeparanoid: host clock differs from the server's by more than max_offset. */
  MONGOELECTOR_ERR_TIME_OFFSET = 4,
  /* A blocking acquire was cancelled with mongoelector_locker_cancel(). */
  MONGOELECTOR_ERR_CANCELLED = 5,
  /* The server could not be reached or did not answer in time. */
  MONGOELECTOR_ERR_UNAVAILABLE = 6,
  /* The server answered with an error, or with a document we cannot use. */
  MONGOELECTOR_ERR_SERVER = 7,
  /* The server cannot run the protocol safely (non-atomic findAndModify, e.g. FerretDB)
   * and allow_unsafe_server was not set. */
  MONGOELECTOR_ERR_UNSAFE_SERVER = 8,
  /* A bug in the library or out of memory; the message says what. */
  MONGOELECTOR_ERR_INTERNAL = 100
} mongoelector_status;

typedef enum mongoelector_log_level {
  MONGOELECTOR_LOG_DEBUG = 10,
  MONGOELECTOR_LOG_INFO = 20,
  MONGOELECTOR_LOG_WARNING = 30,
  MONGOELECTOR_LOG_ERROR = 40
} mongoelector_log_level;

typedef struct mongoelector_client mongoelector_client;
typedef struct mongoelector_locker mongoelector_locker;
typedef struct mongoelector_elector mongoelector_elector;

/* ---- Library ----------------------------------------------------------------------- */

/* The runtime version, e.g. "1.0.0". Static string. Any thread. */
MONGOELECTOR_API const char *mongoelector_version(void);
/* The runtime version as MONGOELECTOR_VERSION_NUMBER would give it. Any thread. */
MONGOELECTOR_API int mongoelector_version_number(void);
/* A static name for a status code ("MONGOELECTOR_ERR_TIMEOUT"), "unknown" otherwise. */
MONGOELECTOR_API const char *mongoelector_status_name(mongoelector_status status);
/* The message of the last failed call on THIS thread ("" if none). Owned by the library,
 * valid until the next call into the library from this thread. */
MONGOELECTOR_API const char *mongoelector_last_error(void);
/* Releases a string the library returned through a `char **` out parameter. NULL ok. */
MONGOELECTOR_API void mongoelector_free(void *ptr);

/* Log callback: receives every message the library logs (level, NUL-terminated text
 * valid only during the call, user_data). Runs on whichever thread logs, often an
 * elector thread; it must be thread-safe and must not call back into the library's
 * *_free functions. NULL restores the default (warnings and errors to stderr).
 * A message being logged on another thread while the callback is replaced may still
 * reach the previous callback: keep its user_data valid a little longer.
 * Process-wide; any thread. */
typedef void (*mongoelector_log_fn)(mongoelector_log_level level, const char *message,
                                    void *user_data);
MONGOELECTOR_API mongoelector_status mongoelector_set_log_callback(mongoelector_log_fn fn,
                                                                   void *user_data);

/* ---- Client ------------------------------------------------------------------------ */

/* Opens a client for `uri` ("mongodb://host:port/?options") and `database`. Every
 * locker and elector made from it shares its connections: one libmongoc pool per
 * timeout class (lockers of one ttl share one pool; a class is a rung of a sqrt(2)
 * ladder of per-call timeouts, never above ttl/10), each with one monitor per server
 * and at most maxPoolSize (URI option; default 10) connections for commands, opened
 * lazily. Nothing is sent until first use. Unless the URI sets them, socket and connect
 * timeouts are the class and server selection half of it; a call that finds every
 * connection busy waits at most the other half, then fails with
 * MONGOELECTOR_ERR_UNAVAILABLE (see README, "Connections"). After fork(), lockers and
 * electors made in the child from this client get fresh connections; those made in
 * the parent fail in the child with MONGOELECTOR_ERR_INVALID_ARGUMENT.
 * *out is owned by the caller: mongoelector_client_free(), before or after the lockers
 * and electors made from it. Any thread; a client may be shared by threads.
 *
 * Embedded backend: uri "sqlite:///absolute/path/locks.db" keeps the locks in one SQLite
 * file for processes on THIS host (no server; see README, "Embedded SQLite backend").
 * `database` is then ignored (pass ""; collections live inside the file). The file and
 * its tables are created now if absent; its directory must exist. A missing directory,
 * a file that is read-only or not a SQLite database of mongoelector fail here with
 * MONGOELECTOR_ERR_INVALID_ARGUMENT, a file written by a newer schema version with
 * MONGOELECTOR_ERR_SERVER. One SQLite connection per client, shared by its lockers and electors;
 * after fork() the child opens its own on first use. server_info names "SQLite". */
MONGOELECTOR_API mongoelector_status mongoelector_client_new(const char *uri, const char *database,
                                                             mongoelector_client **out);
/* Frees a client. NULL ok. Lockers/electors made from it keep its connections open
 * until the last of them is freed. */
MONGOELECTOR_API void mongoelector_client_free(mongoelector_client *client);
/* Asks the server what it is (one round trip): name ("MongoDB", "FerretDB",
 * "mongo-java-server") and version, as strings owned by the client, valid until the
 * next call of this function on this client or its free. Not concurrent with itself
 * on one client. */
MONGOELECTOR_API mongoelector_status mongoelector_client_server_info(mongoelector_client *client,
                                                                     const char **name_out,
                                                                     const char **version_out);

/* ---- Locker ------------------------------------------------------------------------ */

#define MONGOELECTOR_LOCKER_OPTIONS_VERSION 1
typedef struct mongoelector_locker_options {
  uint32_t version;           /* MONGOELECTOR_LOCKER_OPTIONS_VERSION */
  const char *collection;     /* NULL: "mongolocker" */
  double ttl_seconds;         /* default 600; must be > 0 and finite */
  int timeparanoid;           /* default 1: check the host clock before acquiring */
  double max_offset_seconds;  /* default 0.5 */
  int delete_on_release;      /* default 0: see README, "Mixed fleets" */
  int allow_unsafe_server;    /* default 0: refuse servers with non-atomic findAndModify */
} mongoelector_locker_options;

/* Sets version and defaults. Any thread. */
MONGOELECTOR_API void mongoelector_locker_options_init(mongoelector_locker_options *options);

/* Creates a locker for `key` (non-empty UTF-8, at most 1024 bytes). `options` may be
 * NULL (defaults). Ensures the collection's TTL index (one round trip; a server that
 * rejects TTL indexes is tolerated with a logged warning). *out is owned by the caller:
 * mongoelector_locker_free(). A locker may be used from several threads; calls on it
 * are serialised except mongoelector_locker_cancel(). */
MONGOELECTOR_API mongoelector_status mongoelector_locker_new(mongoelector_client *client,
                                                             const char *key,
                                                             const mongoelector_locker_options *options,
                                                             mongoelector_locker **out);
/* Frees a locker (does NOT release a held lock: it expires at its ttl). NULL ok. */
MONGOELECTOR_API void mongoelector_locker_free(mongoelector_locker *locker);

/* Acquires the lock. blocking=0: one attempt, MONGOELECTOR_ERR_LOCK_EXISTS if held;
 * timeout_seconds must then be < 0 ("none"). blocking=1: retries every step_seconds
 * (finite, > 0) until timeout_seconds (< 0 or +inf: wait forever), then
 * MONGOELECTOR_ERR_TIMEOUT. The wait holds the locker's mutex: other calls on the same
 * locker wait, except fence, uuid and cancel. force=1
 * takes the lock whoever holds it. On success *fence_out (may be NULL) receives the
 * fencing token: strictly greater than every token handed out before for this key. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_acquire(mongoelector_locker *locker,
                                                                 int blocking,
                                                                 double timeout_seconds,
                                                                 double step_seconds, int force,
                                                                 int64_t *fence_out);
/* Makes a blocking acquire running on another thread return MONGOELECTOR_ERR_CANCELLED
 * within about 100 ms. The request stays pending until an acquire consumes it, so a
 * cancel that races just ahead of acquire() is not lost. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_cancel(mongoelector_locker *locker);
/* Releases this locker's lock (any holder's with force=1). Not holding is not an error. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_release(mongoelector_locker *locker,
                                                                 int force);
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

/* The current, unexpired lock document of the key. */
typedef struct mongoelector_lock_info {
  char uuid[64];       /* holder's uuid, NUL-terminated (truncated if longer) */
  char host[256];      /* holder's host, NUL-terminated (truncated if longer) */
  int64_t pid;
  int64_t created_ms;  /* server time */
  int64_t expire_ms;   /* server time */
  int64_t fence;       /* 0 if written by a node without fencing (original schema) */
} mongoelector_lock_info;
/* *found_out = 1 and *out filled when the key is held; *found_out = 0 otherwise. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_current(mongoelector_locker *locker,
                                                                 mongoelector_lock_info *out,
                                                                 int *found_out);

/* ---- Elector ----------------------------------------------------------------------- */

/* Elector callbacks run on the elector's own thread (or the thread calling
 * mongoelector_elector_poll/release/stop), except on_leader_loss at a missed renew
 * deadline, which runs on the library's deadline-timer thread (one per process, shared
 * by every elector: keep it short) so that it fires on time while the elector's thread
 * hangs in I/O. Never while a library lock is held: they may call
 * mongoelector_elector_stop() or _release() on the same elector, but must not free it.
 * allow_unsafe_server is refused for electors (MONGOELECTOR_ERR_INVALID_ARGUMENT): on a
 * server whose findAndModify is not atomic, two nodes could lead with one token.
 * user_data is the options' user_data. */
typedef void (*mongoelector_callback_fn)(void *user_data);

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
MONGOELECTOR_API mongoelector_status mongoelector_elector_new(mongoelector_client *client,
                                                              const char *key,
                                                              const mongoelector_elector_options *options,
                                                              mongoelector_elector **out);
/* Stops the elector (releasing leadership, firing on_leader_loss if it led) and frees
 * it. NULL ok. Must not be called from one of its callbacks. */
MONGOELECTOR_API void mongoelector_elector_free(mongoelector_elector *elector);
/* Starts the election loop on a new native thread (no-op if running). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_start(mongoelector_elector *elector);
/* Ends the loop, waits for its thread (unless called from a callback), releases
 * leadership. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_stop(mongoelector_elector *elector);
/* Runs one poll cycle on the calling thread. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_poll(mongoelector_elector *elector);
/* Gives up leadership now (on_leader_loss fires if it led). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_release(mongoelector_elector *elector);
/* Leader now: false the moment the renew deadline passes, even if a renewal hangs. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_is_leader(mongoelector_elector *elector,
                                                                    int *out);
MONGOELECTOR_API mongoelector_status mongoelector_elector_leader_exists(mongoelector_elector *elector,
                                                                        int *out);
MONGOELECTOR_API mongoelector_status mongoelector_elector_running(mongoelector_elector *elector,
                                                                  int *out);
/* Seconds between polls: ttl/2 as leader, ttl as follower (the loop may wake earlier). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_poll_wait(mongoelector_elector *elector,
                                                                    double *out);
/* Fencing token of the current leadership, 0 when not leader. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_fence(mongoelector_elector *elector,
                                                                int64_t *out);
/* This node's uuid (owned by the elector). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_uuid(mongoelector_elector *elector,
                                                              const char **out);
/* Node status / cluster detail as a JSON object in MongoDB's relaxed Extended JSON v2,
 * written by libbson: dates as {"$date": "2026-11-23T17:38:28.123Z"} ({"$date":
 * {"$numberLong": "<ms>"}} outside years 1970..9999), NaN and infinities as
 * {"$numberDouble": "NaN"}, other numbers plain. *json_out is owned by the caller:
 * mongoelector_free(). Node status reads local state (no round trip); cluster detail
 * reads the status collection (one round trip). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_node_status(mongoelector_elector *elector,
                                                                      char **json_out);
MONGOELECTOR_API mongoelector_status mongoelector_elector_cluster_detail(mongoelector_elector *elector,
                                                                         char **json_out);

/* ---- Keep-alive lease -------------------------------------------------------------- */

/* A lease holds a locker's lock and keeps it alive on the library's renewer thread (ONE
 * thread per process renews every lease; threads do not grow with leases) until
 * mongoelector_lease_free(). It renews about every ttl/3, retries a failed renewal every
 * min(ttl/20, 250 ms), and declares the lease LOST on this host's monotonic clock at the
 * renew deadline (lease end minus a margin, as the elector does: see README, "Keep-alive
 * leases"), whether or not a renewal call is still hanging, so that the holder stops
 * before anyone else can take the lock. Loss is final: a renewal that succeeds after it
 * does not bring the lease back (that hold is released instead, fenced). A renewal that
 * finds the lock taken by another declares the loss at once. */
typedef struct mongoelector_lease mongoelector_lease;
/* on_lost: runs once, on the library's deadline-timer thread, at the moment the lease is
 * declared lost (its renew deadline passed without a successful renewal, or a renewal
 * found the lock taken). Keep it short; it may call mongoelector_lease_lost/fence but not free. */
typedef void (*mongoelector_lease_lost_fn)(void *user_data);

#define MONGOELECTOR_LEASE_OPTIONS_VERSION 1
typedef struct mongoelector_lease_options {
  uint32_t version;                 /* MONGOELECTOR_LEASE_OPTIONS_VERSION */
  int blocking;                     /* default 1: wait for the lock */
  double timeout_seconds;           /* default -1 (none); blocking only */
  double step_seconds;              /* default 0.25: retry interval while waiting */
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
MONGOELECTOR_API mongoelector_status mongoelector_lease_acquire(mongoelector_locker *locker,
                                                                const mongoelector_lease_options *options,
                                                                mongoelector_lease **out);
/* The fencing token of the lease's hold (unchanged by renewals; still readable after
 * loss). Local, any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_fence(mongoelector_lease *lease, int64_t *out);
/* *out = 1 once the lease is lost (never goes back to 0). Local, any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_lost(mongoelector_lease *lease, int *out);
/* Waits until the lease is lost or timeout_seconds pass (< 0: forever); *lost_out = 1 if lost.
 * Any thread; several threads may wait at once. Must not be called from on_lost. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_wait_lost(mongoelector_lease *lease,
                                                                  double timeout_seconds,
                                                                  int *lost_out);
/* Stops keeping it alive and releases the lock (fenced; a lost lease is not released). NULL ok.
 * Waits for a renewal or on_lost call of this lease that is running on another thread;
 * must not be called from on_lost nor while another thread is inside a call on it. */
MONGOELECTOR_API void mongoelector_lease_free(mongoelector_lease *lease);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_H */
