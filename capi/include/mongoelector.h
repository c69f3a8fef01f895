/*
 * mongoelector: distributed locks and leader election over MongoDB.
 *
 * The stable C ABI of libmongoelector (SONAME libmongoelector.so.1).
 *
 * One include for the whole API (testing kit apart):
 *
 *     #include <mongoelector.h>
 *
 * which includes the topic headers of mongoelector/:
 *   common.h      version, visibility, status codes, errors, mongoelector_free
 *   log.h         log levels, handlers and structured records
 *   metrics.h     process-wide metrics
 *   cancel.h      cancel tokens
 *   client.h      clients (MongoDB, SQLite, memory:// backends)
 *   locker.h      locks
 *   lease.h       keep-alive leases
 *   elector.h     leader election, graceful handover
 *   observer.h    leader observers
 *   semaphore.h   semaphores and their leases
 *   rwlock.h      read-write locks (many readers or one writer) and their leases
 *   partitioner.h the fenced partitioner: a group's partitions over its live members
 *   deprecated.h  the frozen 1.0 forms that have 1.1 successors (left out when
 *                 MONGOELECTOR_NO_DEPRECATED is defined)
 * Include <mongoelector.h>, not a topic header alone. The testing kit (a fake clock and
 * levers on the memory:// backend) is opt-in and NOT included here:
 *
 *     #include <mongoelector/testing.h>
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
 *    object that runs them (mongoelector_elector_free, mongoelector_observer_free and
 *    mongoelector_partitioner_free are the exceptions: they are safe from the object's
 *    own callbacks, see there).
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

#include "mongoelector/cancel.h"
#include "mongoelector/client.h"
#include "mongoelector/common.h"
#include "mongoelector/elector.h"
#include "mongoelector/lease.h"
#include "mongoelector/locker.h"
#include "mongoelector/log.h"
#include "mongoelector/metrics.h"
#include "mongoelector/observer.h"
#include "mongoelector/partitioner.h"
#include "mongoelector/rwlock.h"
#include "mongoelector/semaphore.h"
#ifndef MONGOELECTOR_NO_DEPRECATED
#include "mongoelector/deprecated.h"
#endif

#endif /* MONGOELECTOR_H */
