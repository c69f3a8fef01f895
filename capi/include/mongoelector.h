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
 *  - Options structs start with a `version` field. The 1.0 structs
 *    (mongoelector_locker_options, _elector_options, _lease_options) are frozen: their
 *    *_options_init() writes exactly their 1.0 fields. The structs added in 1.1 (*_config,
 *    mongoelector_acquire_options) grow by appending fields; their init takes the
 *    version the caller was compiled with (pass the header's *_VERSION macro), so an old
 *    program's smaller struct is never written past its end. Structs the library FILLS
 *    (mongoelector_error_info, mongoelector_lock_details) also start with a version the
 *    caller sets; the library writes only the fields of that version.
 *  - No C++ exception ever crosses this boundary.
 *
 * Threads and fork() (every handle):
 *  - A client, locker, elector, lease or cancel token may be used from any thread, and
 *    by several threads at once, except where a function says otherwise. No function
 *    may be called on a handle that another thread is freeing.
 *  - Callbacks run on library threads (named in each callback's comment), never while a
 *    library lock is held. They may call into the library, except the *_free of the
 *    object that runs them (mongoelector_elector_free and mongoelector_observer_free are
 *    the exceptions: they are safe from the object's own callbacks, see there).
 *  - fork(): handles made before fork() must not be used in the child, except
 *    mongoelector_client, from which the child makes new lockers and electors (they get
 *    fresh connections). Lockers and electors inherited from the parent answer
 *    MONGOELECTOR_ERR_INVALID_ARGUMENT in the child; their threads do not exist there.
 *    Free inherited handles only in the parent. The library's shared threads (deadline
 *    timer, lease renewer) are re-created in the child on first use.
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
#define MONGOELECTOR_VERSION_MINOR 1
#define MONGOELECTOR_VERSION_PATCH 0
#define MONGOELECTOR_VERSION_STRING "1.1.0"
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
typedef struct mongoelector_cancel_token mongoelector_cancel_token; /* since 1.1 */

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

/* Since 1.1. Called once with the user_data of a log handler that was replaced, when no
 * thread can call that handler any more. */
typedef void (*mongoelector_release_fn)(void *user_data);

/* Since 1.1. Installs `fn` for messages at `min_level` or above; lower levels are
 * dropped before they are formatted. fn NULL restores the default (warnings and errors
 * to stderr; min_level is then ignored). `fn` runs on whichever thread logs (often an
 * elector's thread or the renewer): thread-safe, short, and it must not call
 * mongoelector_set_log_handler/_callback itself.
 * Hand-over point: `release` (may be NULL) is called exactly once with `user_data`
 * after this handler was replaced by a later call AND every call of `fn` in flight has
 * returned: on the replacing thread if none was in flight, else on the thread whose call
 * of `fn` ends last. Free user_data there, never earlier. Process-wide; any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_set_log_handler(mongoelector_log_level min_level,
                                                                  mongoelector_log_fn fn,
                                                                  void *user_data,
                                                                  mongoelector_release_fn release);

/* Since 1.1: structured log records. What a record is about (numbers are stable). */
typedef enum mongoelector_log_event {
  MONGOELECTOR_EVENT_NONE = 0,            /* free text (driver messages, configuration) */
  MONGOELECTOR_EVENT_LEADER_ELECTED = 1,  /* this node became leader (INFO) */
  MONGOELECTOR_EVENT_LEADER_LOST = 2,     /* this node's leadership ended (INFO/WARNING) */
  MONGOELECTOR_EVENT_STEP_DOWN = 3,       /* a leader stepped down before its lease expired */
  MONGOELECTOR_EVENT_RENEW_FAILED = 4,    /* a renewal failed; kept until its deadline */
  MONGOELECTOR_EVENT_LEASE_LOST = 5,      /* a keep-alive lease was declared lost */
  MONGOELECTOR_EVENT_CLOCK_JUMP = 6,      /* the server's clock stepped */
  MONGOELECTOR_EVENT_UNSAFE_SERVER = 7,   /* the server's findAndModify is not atomic */
  MONGOELECTOR_EVENT_RELEASE_FAILED = 8,  /* a release could not be confirmed */
  MONGOELECTOR_EVENT_CALLBACK_FAILED = 9  /* a user callback failed (bindings) */
} mongoelector_log_event;

/* A log record as the library fills it; valid only during the callback. `version` is
 * the library's MONGOELECTOR_LOG_RECORD_VERSION: fields are only ever appended, so a
 * program reads the fields it knows. Strings are never NULL ("" when absent). */
#define MONGOELECTOR_LOG_RECORD_VERSION 1
typedef struct mongoelector_log_record {
  uint32_t version;
  mongoelector_log_level level;
  mongoelector_log_event event;
  const char *message;
  const char *key;   /* the lock or election key the record is about */
  int64_t fence;     /* the hold's fencing token, 0 when none */
  const char *uuid;  /* the locker's / node's uuid */
  const char *host;
} mongoelector_log_record;
typedef void (*mongoelector_log_record_fn)(const mongoelector_log_record *record, void *user_data);

/* Since 1.1. As mongoelector_set_log_handler, for a handler that receives whole records
 * (level, event code, message and the structured fields). Replaces any handler set by
 * either function; the same hand-over rule applies to `release`. */
MONGOELECTOR_API mongoelector_status mongoelector_set_log_record_handler(
    mongoelector_log_level min_level, mongoelector_log_record_fn fn, void *user_data,
    mongoelector_release_fn release);
/* A static name for an event ("leader_elected"), "unknown" otherwise. */
MONGOELECTOR_API const char *mongoelector_log_event_name(mongoelector_log_event event);

/* Since 1.1: process-wide metrics of every locker, elector and lease of the library
 * (counters only grow; the clock gauges follow the last server-time sample). Set
 * out->version = MONGOELECTOR_STATS_VERSION; the fields of that version are written.
 * Lock-free, no I/O; any thread. */
#define MONGOELECTOR_STATS_VERSION 1
#define MONGOELECTOR_STATS_LATENCY_BUCKETS 15
typedef struct mongoelector_stats {
  uint32_t version; /* set by the caller */
  /* Acquire calls by outcome (argument errors are not counted). */
  uint64_t acquires_acquired;
  uint64_t acquires_held;      /* non-blocking, the lock was held */
  uint64_t acquires_timeout;
  uint64_t acquires_cancelled;
  uint64_t acquires_error;     /* the server failed */
  /* Latency of every acquire call: bucket i counts calls of at most bounds[i] seconds
   * (and more than bounds[i-1]); the last bucket those above the last bound. */
  double acquire_latency_bounds[MONGOELECTOR_STATS_LATENCY_BUCKETS - 1];
  uint64_t acquire_latency_buckets[MONGOELECTOR_STATS_LATENCY_BUCKETS];
  uint64_t acquire_latency_count;
  double acquire_latency_sum_seconds;
  uint64_t renewals;           /* renewals of held locks (electors, leases, touch) */
  uint64_t renewal_failures;   /* of which failed, or found the hold gone */
  uint64_t leader_elected;
  uint64_t leader_lost;
  uint64_t step_downs;         /* leaders that stepped down before their lease expired */
  uint64_t clock_samples;
  double clock_offset_seconds;      /* server minus host, at the last sample */
  double clock_uncertainty_seconds; /* half the round trip of the last sample */
  uint64_t round_trips;        /* commands sent to servers (SQLite: transactions) */
} mongoelector_stats;
MONGOELECTOR_API mongoelector_status mongoelector_stats_get(mongoelector_stats *out);

/* Since 1.1. What the last failed call on THIS thread knows about the failure beyond
 * its status: the server's error code, code name and labels, so that a caller can tell
 * an authentication failure (code 18, "AuthenticationFailed") from a transient one
 * (label "RetryableWriteError"). Set out->version = MONGOELECTOR_ERROR_INFO_VERSION
 * first; the fields of that version are written. Strings and the label array are owned
 * by the library, valid until the next call into the library from this thread. */
#define MONGOELECTOR_ERROR_INFO_VERSION 1
typedef struct mongoelector_error_info {
  uint32_t version;            /* set by the caller */
  mongoelector_status status;  /* of the last failed call; MONGOELECTOR_OK if none */
  const char *message;         /* as mongoelector_last_error() */
  /* The backend's error code: a MongoDB server code (11000, 13, 18, 50, ...), an SQLite
   * extended result code; 0 when the failure has none (no answer, a bad argument). */
  int32_t code;
  const char *code_name;       /* MongoDB's codeName ("Unauthorized"), "" if none */
  const char *const *labels;   /* MongoDB's errorLabels, label_count of them */
  size_t label_count;
} mongoelector_error_info;
MONGOELECTOR_API mongoelector_status mongoelector_last_error_info(mongoelector_error_info *out);
/* Since 1.1. 1 if the last failed call on this thread carried the error label `label`
 * (e.g. "RetryableWriteError"), else 0. */
MONGOELECTOR_API int mongoelector_last_error_has_label(const char *label);

/* ---- Cancel token (since 1.1) ------------------------------------------------------ */

/* A one-shot cancellation flag for the calls that take one (mongoelector_acquire_options):
 * once cancelled it stays cancelled, and a call given a cancelled token returns
 * MONGOELECTOR_ERR_CANCELLED at once. Cancelling affects only the calls given this
 * token, so a cancel that comes after the call returned has no effect on later calls:
 * use one token per call (or per context/scope). A waiting call notices within about
 * 100 ms; a round trip already on the wire is not interrupted (it ends within the
 * per-call timeout). *out is owned by the caller: mongoelector_cancel_token_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_cancel_token_new(mongoelector_cancel_token **out);
/* Cancels. Any thread, any number of times, until the token is freed. */
MONGOELECTOR_API mongoelector_status mongoelector_cancel_token_cancel(mongoelector_cancel_token *token);
/* *out = 1 once cancelled. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_cancel_token_is_cancelled(mongoelector_cancel_token *token,
                                                                           int *out);
/* Frees the token. NULL ok. Only after every call given the token has returned and no
 * thread will cancel it any more. */
MONGOELECTOR_API void mongoelector_cancel_token_free(mongoelector_cancel_token *token);

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
/* Since 1.1. As mongoelector_client_server_info (one round trip the first time; the
 * answer is remembered by the client), but *name_out and *version_out are copies owned
 * by the caller (mongoelector_free()). Any thread, concurrently. */
MONGOELECTOR_API mongoelector_status mongoelector_client_server_info_copy(mongoelector_client *client,
                                                                          char **name_out,
                                                                          char **version_out);

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
 * finite number >= 0. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_release_min_hold(mongoelector_locker *locker,
                                                                          double min_hold_seconds,
                                                                          int64_t *frees_at_ms_out);
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

/* Since 1.1: a locker's configuration, grown by appending fields. Defaults (shared by
 * every binding: Go, Rust and the CLI use this struct; see README, "Defaults"):
 * collection "mongolocker", ttl 600 s, timeparanoid on, max offset 0.5 s,
 * delete_on_release off (Python's drop-in MongoLocker turns it on, as the original
 * deletes on release), allow_unsafe_server off, per-call timeout ttl/10 in [0.1 s, 5 s]. */
#define MONGOELECTOR_LOCKER_CONFIG_VERSION 1
typedef struct mongoelector_locker_config {
  uint32_t version;           /* the version passed to mongoelector_locker_config_init */
  const char *collection;     /* NULL: "mongolocker"; copied */
  double ttl_seconds;         /* > 0 and finite */
  int timeparanoid;
  double max_offset_seconds;
  int delete_on_release;      /* see README, "Mixed fleets" */
  int allow_unsafe_server;
  /* Time bound of one round trip (server selection, connect, socket, maxTimeMS).
   * 0: ttl/10 clamped to [0.1 s, 5 s]; else finite, > 0 and at most ttl/2. */
  double op_timeout_seconds;
} mongoelector_locker_config;

/* Sets version and the defaults of the fields that exist in `version` (1 ..
 * MONGOELECTOR_LOCKER_CONFIG_VERSION; pass that macro). INVALID_ARGUMENT for another
 * version or NULL. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_config_init(mongoelector_locker_config *config,
                                                                     uint32_t version);
/* As mongoelector_locker_new, with a 1.1 configuration (NULL: defaults). */
MONGOELECTOR_API mongoelector_status mongoelector_locker_new_with(mongoelector_client *client,
                                                                  const char *key,
                                                                  const mongoelector_locker_config *config,
                                                                  mongoelector_locker **out);

/* Since 1.1: how to acquire, one struct per call, grown by appending fields. */
#define MONGOELECTOR_ACQUIRE_OPTIONS_VERSION 1
typedef struct mongoelector_acquire_options {
  uint32_t version;           /* the version passed to mongoelector_acquire_options_init */
  int blocking;               /* default 1: wait for the lock; 0: one attempt */
  double timeout_seconds;     /* default -1: no limit (blocking only; must be < 0 otherwise) */
  double step_seconds;        /* default 0.25: retry interval while waiting */
  int force;                  /* default 0; 1 takes the lock whoever holds it */
  mongoelector_cancel_token *cancel; /* default NULL; borrowed for the call */
} mongoelector_acquire_options;

/* Sets version and defaults (version: 1 .. MONGOELECTOR_ACQUIRE_OPTIONS_VERSION). */
MONGOELECTOR_API mongoelector_status mongoelector_acquire_options_init(mongoelector_acquire_options *options,
                                                                       uint32_t version);
/* Acquires as mongoelector_locker_acquire, with these differences: options may be NULL
 * (blocking, no timeout); the wait does NOT hold the locker: locked, owned, current,
 * release and touch from other threads answer while it waits; cancellation is per call
 * through options->cancel (MONGOELECTOR_ERR_CANCELLED, also when the token is already
 * cancelled at the call), and mongoelector_locker_cancel() does not affect it. Two
 * acquires on one locker at once are allowed; at most one of them gets the lock. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_acquire_with(mongoelector_locker *locker,
                                                                      const mongoelector_acquire_options *options,
                                                                      int64_t *fence_out);

/* Since 1.1: the current lock document, with strings the caller owns and room to grow.
 * Set version before the call; release the strings with mongoelector_lock_details_clear. */
#define MONGOELECTOR_LOCK_DETAILS_VERSION 1
typedef struct mongoelector_lock_details {
  uint32_t version;    /* set by the caller: MONGOELECTOR_LOCK_DETAILS_VERSION */
  char *uuid;          /* holder's uuid, whole; owned by the struct */
  char *host;          /* holder's host, whole; owned by the struct */
  int64_t pid;
  int64_t created_ms;  /* server time */
  int64_t expire_ms;   /* server time */
  int64_t fence;       /* 0 if written by a node without fencing (original schema) */
} mongoelector_lock_details;
/* *found_out = 1 and *details filled when the key is held (one round trip); 0 otherwise
 * (then uuid and host are NULL). Any strings the struct held before are NOT freed:
 * clear it first when reusing it. */
MONGOELECTOR_API mongoelector_status mongoelector_locker_current_details(mongoelector_locker *locker,
                                                                         mongoelector_lock_details *details,
                                                                         int *found_out);
/* Frees the strings of `details` and sets them to NULL. NULL ok. */
MONGOELECTOR_API void mongoelector_lock_details_clear(mongoelector_lock_details *details);

/* ---- Elector ----------------------------------------------------------------------- */

/* Elector callbacks run on the elector's own thread (or the thread calling
 * mongoelector_elector_poll/release/stop), except on_leader_loss at a missed renew
 * deadline, which runs on one of the library's callback threads (a few per process,
 * shared by every elector and lease: keep it short) so that it fires on time while the
 * elector's thread hangs in I/O; leadership itself (mongoelector_elector_is_leader) ends
 * at the deadline whatever any callback does. Never while a library lock is held: they may call
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
 * it. NULL ok. Any thread. Since 1.1 also from one of the elector's own callbacks: the
 * call returns as soon as no OTHER callback of this elector is running (one that runs
 * on another thread at that moment is waited for); no callback of this elector starts
 * after it, so user_data may be freed once the calling callback returns. The stop,
 * the release of leadership (without on_leader_loss) and the free happen on another
 * library thread shortly after. Not from a callback of ANOTHER elector whose
 * thread this elector's stop would wait for. */
MONGOELECTOR_API void mongoelector_elector_free(mongoelector_elector *elector);
/* Since 1.1: an elector's configuration, grown by appending fields. Defaults (shared by
 * every binding, Python's MongoLeaderElector included): ttl 15 s, report_status on,
 * delete_on_release ON (a leader that stops deletes its lock document, so nodes of the
 * original mongoelector 1.0.2 take over at once during a rolling upgrade; the next
 * leader of ours pays two extra round trips), per-call timeout as for lockers, followers
 * peek every ttl/4 while a leader exists (version 2). Callbacks as in
 * mongoelector_elector_options. Version 1 is the struct up to op_timeout_seconds; a
 * program compiled against it keeps working (the fields it lacks take their defaults). */
#define MONGOELECTOR_ELECTOR_CONFIG_VERSION 2
typedef struct mongoelector_elector_config {
  uint32_t version;                        /* as passed to mongoelector_elector_config_init */
  double ttl_seconds;                      /* > 0 and finite */
  int report_status;
  const char *app_version;                 /* NULL: none; copied */
  mongoelector_callback_fn on_leader;      /* NULL: none */
  mongoelector_callback_fn on_leader_loss; /* NULL: none */
  mongoelector_callback_fn on_loop;        /* NULL: none; after each poll */
  void *user_data;                         /* passed to the three callbacks */
  int delete_on_release;
  double op_timeout_seconds;               /* as in mongoelector_locker_config */
  /* Version 2. While another node leads, a follower reads the lock document every this
   * many seconds (one read, no write), so that a resign or transfer elsewhere is noticed
   * within about that (README, "Graceful handover"). < 0: ttl/4 (the default, -1);
   * 0: off (followers wake only when the leader's lease can expire, about a ttl);
   * else finite and at most 1e9 (INVALID_ARGUMENT otherwise). */
  double handover_poll_seconds;
} mongoelector_elector_config;

/* Sets version and defaults (version: 1 .. MONGOELECTOR_ELECTOR_CONFIG_VERSION). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_config_init(mongoelector_elector_config *config,
                                                                      uint32_t version);
/* As mongoelector_elector_new, with a 1.1 configuration (NULL: defaults). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_new_with(mongoelector_client *client,
                                                                   const char *key,
                                                                   const mongoelector_elector_config *config,
                                                                   mongoelector_elector **out);
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
/* The original's nominal seconds between polls: ttl/2 as leader, ttl as follower (the
 * drop-in value). The loop itself renews every ttl/3 as leader, and as follower looks
 * every ttl/4 while a leader exists (handover_poll_seconds), else every ttl. */
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
 * mongoelector_free(). Node status reads local state, never a round trip (its
 * timestamp is the server-time estimate, or the host's clock before the first
 * sample); cluster detail reads the status collection (one round trip). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_node_status(mongoelector_elector *elector,
                                                                      char **json_out);
MONGOELECTOR_API mongoelector_status mongoelector_elector_cluster_detail(mongoelector_elector *elector,
                                                                         char **json_out);
/* Since 1.1. Graceful handover (README, "Graceful handover"). Both end this node's term
 * locally first (is_leader turns 0, on_leader_loss runs and returns on the calling
 * thread) and only then send the one fenced write that lets another member take over, so
 * two nodes never lead at once. While a leader exists, followers look at the lock every
 * ttl/4, so the next leader is in place within about ttl/4 plus one round trip instead
 * of about a ttl. Any thread, the elector's own callbacks included; blocking (up to two
 * round trips).
 *
 * resign: gives up leadership now (a fenced release) and keeps the loop running, but
 * does not stand for election again for hold_off_seconds (< 0: the elector's ttl), so
 * another member takes over. Not leader: only the hold-off applies. INVALID_ARGUMENT
 * for a hold-off that is NaN or above 1e9; UNAVAILABLE/SERVER when the release could not
 * be confirmed (leadership is given up anyway; the loop releases the lock later). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_resign(mongoelector_elector *elector,
                                                                 double hold_off_seconds);
/* transfer: the leader hands leadership to the member whose uuid is `to_uuid`
 * (mongoelector_elector_uuid of that member); the target takes over at its next look
 * with one renewal of its own, its token one above this term's. INVALID_ARGUMENT when
 * this node is not leader (also when its lease ended before the write: nothing was
 * handed over), when to_uuid is NULL, empty or this node, or, with status reports on,
 * when no status document of that member exists. UNAVAILABLE/SERVER when the write
 * failed: leadership is given up anyway and the outcome is unknown (the loop takes the
 * lock back if it is still this node's). A target that has died costs one ttl, as a
 * crashed leader does. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_transfer(mongoelector_elector *elector,
                                                                   const char *to_uuid);

/* ---- Leader observer (since 1.1) --------------------------------------------------- */

/* Watches an elector key from outside the election (any process, no elector needed) and
 * reports who leads it: every change of leader, and "no leader" (the lock absent,
 * released or expired on the server's clock) as a change of its own, so that a client
 * never keeps talking to a leader that is gone. It polls the key's lock document in
 * "elector.locks" (one read per interval, never a write). A change is a different
 * status or a different (uuid, fence) (the leader's, or a pending hand-over's target's):
 * a hand-over (transfer) always shows; a leader that resigns and wins again between two
 * polls shows as no change. The first poll always reports the current state.
 * A leader is named only while its lease surely runs: its end (expire_ms) is compared
 * with the latest the server's clock can read on the observer's estimate (estimate plus
 * its uncertainty), so the named leader never outlives its lease under any clock error
 * the estimate allows. While reads fail, the state turns MONGOELECTOR_LEADER_UNKNOWN at
 * the instant that lease ends (no read needed). After a transfer the observer reports
 * MONGOELECTOR_LEADER_PENDING (has_leader 0, the target in handover_*) until the target
 * has taken the hand-over with its own renewal (its mongoelector_elector_is_leader turns 1
 * then), and only then the target as leader; a target that never takes it stays pending
 * until the hand-over's expiry, then nobody leads. */
typedef struct mongoelector_observer mongoelector_observer;

/* Who leads a key, as an observer saw it. Filled by the library: in a callback `version`
 * is the library's MONGOELECTOR_LEADER_STATE_VERSION (fields are only ever appended, so
 * a program reads the fields it knows); for mongoelector_observer_read the caller sets
 * it and the fields of that version are written. Strings are never NULL ("" without a
 * leader) and belong to the library (see each function for how long they live). */
#define MONGOELECTOR_LEADER_STATE_VERSION 2
/* Since 1.1 (mongoelector_leader_state version 2): what the observer can tell (the
 * numbers are stable). */
typedef enum mongoelector_leader_status {
  MONGOELECTOR_LEADER_NONE = 0,    /* nobody leads: the lock is absent, released or expired */
  MONGOELECTOR_LEADER_LEADS = 1,   /* `uuid` leads (has_leader 1) */
  /* A hand-over to handover_uuid is written and the target has not taken it yet: nobody
   * leads (the old leader stepped down before writing it). */
  MONGOELECTOR_LEADER_PENDING = 2,
  /* The reads fail and the lease last seen has ended on the observer's estimate of the
   * server's clock: it cannot tell who leads. */
  MONGOELECTOR_LEADER_UNKNOWN = 3
} mongoelector_leader_status;
typedef struct mongoelector_leader_state {
  uint32_t version;
  int has_leader;          /* 1: `uuid` leads; 0: nobody leads (the fields below are 0/"") */
  const char *uuid;        /* the leader's uuid (mongoelector_elector_uuid of that node) */
  const char *host;        /* the leader's host name */
  int64_t pid;             /* the leader's process id on that host */
  int64_t fence;           /* the fencing token of the leader's term */
  int64_t server_time_ms;  /* when it was observed: the server's clock (estimate), ms */
  /* Version 2. */
  int status;              /* a mongoelector_leader_status */
  /* Server time (ms) at which the lease ends unless renewed: LEADS the leader's, PENDING
   * the hand-over's (the lock frees then if the target never takes it), UNKNOWN the one
   * that ended unseen; 0 for NONE. */
  int64_t expire_ms;
  const char *handover_uuid;  /* PENDING: the member the lock is handed to; "" otherwise */
  const char *handover_host;  /* PENDING: its host name; "" otherwise */
  int64_t handover_pid;       /* PENDING: its process id; 0 otherwise */
  int64_t handover_fence;     /* PENDING: the token it will lead with; 0 otherwise */
} mongoelector_leader_state;

/* Called on the observer's own thread (one per observer) with the new state, which is
 * valid only during the call (copy what you keep). Calls of one observer never overlap
 * and come in the order of the changes. The callback may call into the library,
 * mongoelector_observer_free of this observer included; it should return soon: the
 * next poll waits for it. */
typedef void (*mongoelector_leader_change_fn)(const mongoelector_leader_state *state,
                                              void *user_data);

#define MONGOELECTOR_OBSERVER_CONFIG_VERSION 1
typedef struct mongoelector_observer_config {
  uint32_t version;           /* the version passed to mongoelector_observer_config_init */
  double interval_seconds;    /* default 1: between polls; finite, > 0 and at most 1e6 */
  /* Time bound of one read. 0 (default): as for an elector of the default ttl (1.5 s);
   * else finite and > 0. */
  double op_timeout_seconds;
} mongoelector_observer_config;

/* Sets version and defaults (version: 1 .. MONGOELECTOR_OBSERVER_CONFIG_VERSION).
 * INVALID_ARGUMENT for another version or NULL. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_observer_config_init(mongoelector_observer_config *config,
                                                                       uint32_t version);
/* Creates an observer of the elector key `key` over `client`'s connections (config
 * NULL: defaults). With on_change (may be NULL: then only mongoelector_observer_read
 * works) the observer's thread starts now and calls on_change(state, user_data) with the
 * current state at its first poll, then at each change. A poll that fails (server
 * unreachable) is logged as a warning and retried at the next interval; it reports
 * nothing, except MONGOELECTOR_LEADER_UNKNOWN once the lease last seen has ended (a "no
 * leader" comes only from an answer). No round trip here.
 * INVALID_ARGUMENT: NULL client or out, a NULL, empty or invalid key, a bad config.
 * *out is owned by the caller: mongoelector_observer_free(), before or after the
 * client. Any thread. An observer inherited across fork() must not be used nor freed in
 * the child (its thread does not exist there). */
MONGOELECTOR_API mongoelector_status mongoelector_observer_new(mongoelector_client *client,
                                                               const char *key,
                                                               const mongoelector_observer_config *config,
                                                               mongoelector_leader_change_fn on_change,
                                                               void *user_data,
                                                               mongoelector_observer **out);
/* The state now: one read of the lock document (and a server-clock sample when the last
 * one is stale); never MONGOELECTOR_LEADER_UNKNOWN (a failed read is an error). Does not
 * call on_change nor change what it compares with. Set out->version first (1 or 2: the
 * fields of that version are written). The strings written live until the next mongoelector_observer_read
 * on the calling thread (or its exit). UNAVAILABLE/SERVER when the server did not answer.
 * Any thread, concurrently with the observer's thread and with other reads. */
MONGOELECTOR_API mongoelector_status mongoelector_observer_read(mongoelector_observer *observer,
                                                                mongoelector_leader_state *out);
/* Stops the observer's thread and frees it. NULL ok. From any other thread it waits for
 * a running on_change to return: once it returns, on_change is never called again and
 * user_data may be freed. From inside this observer's own on_change it returns at once;
 * no call starts after it (user_data may be freed once the callback returns) and the
 * thread ends on another library thread shortly after. Freeing ANOTHER observer from a
 * callback waits for that one's running callback: two observers must not free each
 * other from their callbacks. */
MONGOELECTOR_API void mongoelector_observer_free(mongoelector_observer *observer);

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
/* Since 1.1. As mongoelector_lease_acquire, with the acquire described by `acquire`
 * (NULL: blocking, no timeout; its cancel token cancels the wait for the lock, not the
 * lease) and on_lost/user_data given directly. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_acquire_with(mongoelector_locker *locker,
                                                                     const mongoelector_acquire_options *acquire,
                                                                     mongoelector_lease_lost_fn on_lost,
                                                                     void *user_data,
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
/* Since 1.1. Stops keeping the lease alive and releases its lock now (fenced; a lost
 * lease is not released), or with min_hold_seconds > 0 keeps the lock taken until that
 * long after it was acquired (mongoelector_locker_release_min_hold). The lease must still
 * be freed; freeing it then releases nothing more. A failed release is logged, not
 * returned (the lock then expires at its ttl). INVALID_ARGUMENT (lease untouched) unless
 * min_hold_seconds is a finite number >= 0. Same thread rules as mongoelector_lease_free. */
MONGOELECTOR_API mongoelector_status mongoelector_lease_release(mongoelector_lease *lease,
                                                                double min_hold_seconds);
/* Stops keeping it alive and releases the lock (fenced; a lost lease is not released). NULL ok.
 * Waits for a renewal or on_lost call of this lease that is running on another thread;
 * must not be called from on_lost nor while another thread is inside a call on it. */
MONGOELECTOR_API void mongoelector_lease_free(mongoelector_lease *lease);

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

#define MONGOELECTOR_SEMAPHORE_CONFIG_VERSION 1
typedef struct mongoelector_semaphore_config {
  uint32_t version;           /* the version passed to mongoelector_semaphore_config_init */
  const char *collection;     /* NULL: "mongosemaphore" (epochs in "<collection>.fences"); copied */
  int64_t limit;              /* 1..1000, default 1; fixed per key when its document is created */
  double ttl_seconds;         /* default 600; > 0 and finite */
  int timeparanoid;           /* default 1: refuse to acquire when the host clock is off */
  double max_offset_seconds;  /* default 0.5 */
  int allow_unsafe_server;    /* default 0 */
  double op_timeout_seconds;  /* default 0: ttl/10 in [0.1 s, 5 s] */
} mongoelector_semaphore_config;

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_config_init(
    mongoelector_semaphore_config *config, uint32_t version);

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
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_acquire(
    mongoelector_semaphore *semaphore, const mongoelector_acquire_options *options,
    int64_t *fence_out);
/* Releases this handle's slot (fenced). Not holding is not an error. */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_release(mongoelector_semaphore *semaphore);
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
  char *uuid;  /* malloc'd */
  char *host;  /* malloc'd */
  int64_t pid;
  int64_t fence;
  int64_t created_ms;  /* server time, ms since the epoch */
  int64_t expire_ms;
} mongoelector_semaphore_holder;

/* The unexpired holders, in slot order (one round trip). *holders_out is a malloc'd
 * array of *count_out entries (NULL when 0): mongoelector_semaphore_holders_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_holders(
    mongoelector_semaphore *semaphore, mongoelector_semaphore_holder **holders_out,
    size_t *count_out);
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
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_fence(
    mongoelector_semaphore_lease *lease, int64_t *out);
/* *out = 1 once lost (never back to 0). Local, any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_lost(
    mongoelector_semaphore_lease *lease, int *out);
/* Waits until lost or timeout_seconds pass (< 0: forever); *lost_out = 1 if lost. Not
 * from on_lost. */
MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_wait_lost(
    mongoelector_semaphore_lease *lease, double timeout_seconds, int *lost_out);
/* Stops keeping the slot alive and releases it (fenced; not if lost). NULL ok. Not from
 * on_lost nor while another thread is inside a call on it. */
MONGOELECTOR_API void mongoelector_semaphore_lease_free(mongoelector_semaphore_lease *lease);

/* ---- Testing kit (since 1.1) ------------------------------------------------------ */

/* A fake clock for the tests of code that uses this library: no server, no sleeps, the
 * same outcome every run. Attach it to a memory:// backend (mongoelector_client_new(
 * "memory://NAME", ""): an in-process backend with the semantics of the MongoDB one,
 * shared by every client of NAME in this process) and every locker, lease, elector,
 * semaphore and observer made on that backend runs on it: leases renew, expire and are
 * declared lost, electors poll, win and step down, observers look, at the instants the
 * fake time says, on the library's own threads.
 *
 * Time moves only through mongoelector_fake_clock_advance(), which walks forward to each
 * pending deadline in turn (a renewal due, a renew deadline, an elector's next poll, a
 * retry) and at each one waits, in REAL time, until every library thread working on this
 * clock has acted and is idle again. Advancing an hour renews a lease of ttl 15 s 720
 * times, as an hour would, in milliseconds; what an election does within a ttl has been
 * done when advance(ttl) returns. The wall clock, which is also the server clock of the
 * attached backends, moves with it.
 *
 * Every wait of the library on an attached backend is in fake time too: a blocking
 * acquire's timeout and retry step, mongoelector_lease_wait_lost()'s timeout. They end
 * when advance() reaches their deadline: call them with a zero timeout, or from another
 * thread than the one that advances.
 *
 * Callbacks run on the library's threads as usual (a lease's on_lost and an elector's
 * on_leader_loss at a missed renew deadline on the clock's own callback threads), and
 * advance() waits for them to return. A
 * callback that blocks on something the advancing thread holds never becomes idle:
 * advance() then fails with MONGOELECTOR_ERR_TIMEOUT after the settle timeout instead of
 * hanging. No callback may call advance() or settle(): from a callback that advance()
 * runs on its own thread, or while another thread advances, the call is refused
 * (INVALID_ARGUMENT); otherwise, from a library thread, it waits for itself and fails
 * with MONGOELECTOR_ERR_TIMEOUT after the settle timeout.
 *
 * A test double: MongoDB and SQLite backends never run on it. */
typedef struct mongoelector_fake_clock mongoelector_fake_clock;

/* A fake clock whose wall time starts at wall_start_ms (ms since the Unix epoch, 0 ..
 * 253402300799999: up to the end of year 9999) and whose monotonic time starts at 0.
 * settle_timeout_ms bounds, in real time, how long each step of advance() and settle()
 * waits for the library's threads (<= 0: 10000; at most 3600000). INVALID_ARGUMENT for a
 * value out of range or a NULL out. *out is owned by the caller:
 * mongoelector_fake_clock_free(). Any thread; not in a child after fork() (the clock's
 * threads do not exist there). */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_new(int64_t wall_start_ms,
                                                                 int64_t settle_timeout_ms,
                                                                 mongoelector_fake_clock **out);
/* Frees the clock and lets go of the backends attached to it. NULL ok. Objects made on
 * those backends keep the backend (and the clock) alive, but time no longer moves for
 * them: a wait of theirs in fake time would never end, so free them first. Not while
 * another thread is inside a call on this clock. From a callback that this clock's own
 * advance() or settle() runs, it is refused (logged as an error; the clock stays). */
MONGOELECTOR_API void mongoelector_fake_clock_free(mongoelector_fake_clock *clock);
/* Runs the memory:// backend `memory_uri` ("memory://NAME") on this clock from now on,
 * and keeps it alive (its locks included) while the clock lives. Attach before anything
 * opens NAME: INVALID_ARGUMENT when NAME is already in use on another clock (a client
 * opened it first: the system clock; or another fake clock), also for a NULL URI or one
 * that is not memory://NAME. Attaching a NAME to the same clock again is OK. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_attach(mongoelector_fake_clock *clock,
                                                                    const char *memory_uri);
/* Moves time forward by ms (>= 0), stopping at every pending deadline on the way, and
 * returns once the library's threads have acted on each (see above). Blocking, in real
 * time, for as long as those threads take. Not from the library's callbacks.
 * MONGOELECTOR_ERR_TIMEOUT: at some step the threads did not become idle within the
 * settle timeout (a callback blocked on the advancing thread, or calling advance() from a
 * library thread); the clock has moved by ms anyway and the library logged how many
 * threads were busy. INVALID_ARGUMENT: ms < 0, a clock that would pass the end of year
 * 9999, a call from a callback this clock's advance() or settle() is running on this
 * thread, or another thread advancing or settling this clock at the same time (one
 * thread drives a clock). */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_advance(mongoelector_fake_clock *clock,
                                                                     int64_t ms);
/* What advance(0) does: waits until the library's threads have acted on the time it is
 * now (an elector just started has run its first poll) and runs the timer tasks already
 * due. Errors and thread rules as for mongoelector_fake_clock_advance. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_settle(mongoelector_fake_clock *clock);
/* *wall_ms_out = the wall clock (ms since the epoch; the attached backends' server
 * clock), *mono_ms_out = the monotonic clock (ms of fake time since the clock was made;
 * jump_wall does not move it). Either may be NULL, not both. Any thread, also while
 * another thread advances, and from callbacks. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_now(mongoelector_fake_clock *clock,
                                                                 int64_t *wall_ms_out,
                                                                 int64_t *mono_ms_out);
/* Steps the wall clock alone by ms (either sign), as NTP would: the attached backends'
 * server clock jumps, intervals measured on the monotonic clock do not change. The
 * library sees it at its next server-time sample (a jump: leases written on the old time
 * base are declared lost), i.e. during a later advance(). INVALID_ARGUMENT when the wall
 * clock would leave 1970 .. year 9999. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_jump_wall(mongoelector_fake_clock *clock,
                                                                       int64_t ms);
/* Blocks, in REAL time, until at least n threads wait on this clock (the library's own,
 * and any blocked in a call that waits in fake time), then sets *waiting_out (may be
 * NULL) to how many do. For a test whose own thread makes a blocking call (an acquire
 * with a timeout, wait_lost): read the count with n = 0 first, start the thread, then
 * wait for count + 1 before advancing past the call's deadline. real_timeout_ms < 0:
 * 10 s. MONGOELECTOR_ERR_TIMEOUT when fewer wait after it. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_wait_for_waiters(mongoelector_fake_clock *clock,
                                                                               size_t n,
                                                                               int64_t real_timeout_ms,
                                                                               size_t *waiting_out);

/* Levers on a memory:// backend (with or without a fake clock), for the situations a
 * holder must survive. (Another node stealing the lock, or releasing it behind the
 * holder's back: a second locker's forced acquire or release.) INVALID_ARGUMENT for a
 * NULL URI or one that is not memory://NAME. Any thread.
 *
 * force_expire: the lock on `key` in `collection` (NULL: "mongolocker"; electors' locks
 * are in "elector.locks") expires now (its expiry set to the server's time), as if its
 * holder had stopped renewing. The holder is not told: its next renewal finds the lock no
 * longer its own (a lease is declared lost, an elector steps down; with no other
 * candidate it wins the free lock back at its next poll), and anyone may claim it
 * meanwhile, so that for a while two nodes believe they hold it: what a test of fencing
 * needs. *was_held_out (may be NULL) = 1 if an unexpired lock was there, else 0
 * (also for a NAME nothing uses). INVALID_ARGUMENT also for a NULL or invalid key or an
 * invalid collection name. */
MONGOELECTOR_API mongoelector_status mongoelector_memory_force_expire(const char *memory_uri,
                                                                      const char *collection,
                                                                      const char *key,
                                                                      int *was_held_out);
/* set_unavailable: unavailable != 0: from now on every call to the backend fails at once
 * with MONGOELECTOR_ERR_UNAVAILABLE, as a server that is down: holders keep their locks
 * until their renew deadline and then report them lost, electors step down, acquires
 * fail. 0: it answers again. Turning it on for a NAME that nothing in this process uses
 * is INVALID_ARGUMENT (the setting would vanish with the unused backend); turning it off
 * is then a no-op. */
MONGOELECTOR_API mongoelector_status mongoelector_memory_set_unavailable(const char *memory_uri,
                                                                         int unavailable);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_H */
