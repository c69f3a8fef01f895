/*
 * mongoelector/log.h: logging: levels, log handlers and structured log records.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_LOG_H
#define MONGOELECTOR_LOG_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Logging ----------------------------------------------------------------------- */

typedef enum mongoelector_log_level {
  MONGOELECTOR_LOG_DEBUG = 10,
  MONGOELECTOR_LOG_INFO = 20,
  MONGOELECTOR_LOG_WARNING = 30,
  MONGOELECTOR_LOG_ERROR = 40
} mongoelector_log_level;

/* A log callback: level, NUL-terminated text valid only during the call, user_data.
 * Installed with mongoelector_set_log_handler (or the 1.0 mongoelector_set_log_callback). */
typedef void (*mongoelector_log_fn)(mongoelector_log_level level, const char *message,
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
  MONGOELECTOR_EVENT_NONE = 0,           /* free text (driver messages, configuration) */
  MONGOELECTOR_EVENT_LEADER_ELECTED = 1, /* this node became leader (INFO) */
  MONGOELECTOR_EVENT_LEADER_LOST = 2,    /* this node's leadership ended (INFO/WARNING) */
  MONGOELECTOR_EVENT_STEP_DOWN = 3,      /* a leader stepped down before its lease expired */
  MONGOELECTOR_EVENT_RENEW_FAILED = 4,   /* a renewal failed; kept until its deadline */
  MONGOELECTOR_EVENT_LEASE_LOST = 5,     /* a keep-alive lease was declared lost */
  MONGOELECTOR_EVENT_CLOCK_JUMP = 6,     /* the server's clock stepped */
  MONGOELECTOR_EVENT_UNSAFE_SERVER = 7,  /* the server's findAndModify is not atomic */
  MONGOELECTOR_EVENT_RELEASE_FAILED = 8, /* a release could not be confirmed */
  MONGOELECTOR_EVENT_CALLBACK_FAILED = 9 /* a user callback failed (bindings) */
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
  const char *key;  /* the lock or election key the record is about */
  int64_t fence;    /* the hold's fencing token, 0 when none */
  const char *uuid; /* the locker's / node's uuid */
  const char *host;
} mongoelector_log_record;
typedef void (*mongoelector_log_record_fn)(const mongoelector_log_record *record, void *user_data);

/* Since 1.1. As mongoelector_set_log_handler, for a handler that receives whole records
 * (level, event code, message and the structured fields). Replaces any handler set by
 * either function; the same hand-over rule applies to `release`. */
MONGOELECTOR_API mongoelector_status
mongoelector_set_log_record_handler(mongoelector_log_level min_level, mongoelector_log_record_fn fn,
                                    void *user_data, mongoelector_release_fn release);
/* A static name for an event ("leader_elected"), "unknown" otherwise. */
MONGOELECTOR_API const char *mongoelector_log_event_name(mongoelector_log_event event);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_LOG_H */
