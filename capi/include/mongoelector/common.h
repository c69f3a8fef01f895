/*
 * mongoelector/common.h: version, visibility, status codes, errors and allocation.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_COMMON_H
#define MONGOELECTOR_COMMON_H

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
#define MONGOELECTOR_VERSION_NUMBER                                        \
  (MONGOELECTOR_VERSION_MAJOR * 10000 + MONGOELECTOR_VERSION_MINOR * 100 + \
   MONGOELECTOR_VERSION_PATCH)

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
  /* A blocking acquire was cancelled (its cancel token, or mongoelector_locker_cancel()). */
  MONGOELECTOR_ERR_CANCELLED = 5,
  /* The server could not be reached or did not answer in time. */
  MONGOELECTOR_ERR_UNAVAILABLE = 6,
  /* The server answered with an error, or with a document we cannot use. */
  MONGOELECTOR_ERR_SERVER = 7,
  /* The server cannot run the protocol safely (non-atomic findAndModify, e.g. FerretDB)
   * and allow_unsafe_server was not set. */
  MONGOELECTOR_ERR_UNSAFE_SERVER = 8,
  /* A minimum hold could not be kept: the hold had already ended at the server
   * when its write landed (it expired, or another holder took the lock), or a keep-alive
   * lease was lost before it was released. The hold is gone; nothing is left to retry. */
  MONGOELECTOR_ERR_LOST = 9,
  /* A bug in the library or out of memory; the message says what. */
  MONGOELECTOR_ERR_INTERNAL = 100
} mongoelector_status;

/* Handles shared by several topics (each topic's own handles are declared there). */
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

/* ---- Errors ------------------------------------------------------------------------ */

/* Since 1.1. What the last failed call on THIS thread knows about the failure beyond
 * its status: the server's error code, code name and labels, so that a caller can tell
 * an authentication failure (code 18, "AuthenticationFailed") from a transient one
 * (label "RetryableWriteError"). Set out->version = MONGOELECTOR_ERROR_INFO_VERSION
 * first; the fields of that version are written. Strings and the label array are owned
 * by the library, valid until the next call into the library from this thread. */
#define MONGOELECTOR_ERROR_INFO_VERSION 1
typedef struct mongoelector_error_info {
  uint32_t version;           /* set by the caller */
  mongoelector_status status; /* of the last failed call; MONGOELECTOR_OK if none */
  const char *message;        /* as mongoelector_last_error() */
  /* The backend's error code: a MongoDB server code (11000, 13, 18, 50, ...), an SQLite
   * extended result code; 0 when the failure has none (no answer, a bad argument). */
  int32_t code;
  const char *code_name;     /* MongoDB's codeName ("Unauthorized"), "" if none */
  const char *const *labels; /* MongoDB's errorLabels, label_count of them */
  size_t label_count;
} mongoelector_error_info;
MONGOELECTOR_API mongoelector_status mongoelector_last_error_info(mongoelector_error_info *out);
/* Since 1.1. 1 if the last failed call on this thread carried the error label `label`
 * (e.g. "RetryableWriteError"), else 0. */
MONGOELECTOR_API int mongoelector_last_error_has_label(const char *label);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_COMMON_H */
