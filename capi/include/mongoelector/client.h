/*
 * mongoelector/client.h: clients: connections to a server or an embedded backend.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_CLIENT_H
#define MONGOELECTOR_CLIENT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * after fork() the child opens its own on first use. The server info names "SQLite". */
MONGOELECTOR_API mongoelector_status mongoelector_client_new(const char *uri, const char *database,
                                                             mongoelector_client **out);
/* Since 1.1. Opens a client as mongoelector_client_new() does, for READING who holds
 * what (mongoelector_client_read_lock, mongoelector_client_cluster_detail,
 * mongoelector_client_server_info_copy): it writes nothing, so it needs no write
 * permission. On SQLite the file is opened read-only (no journal-mode change, no tables
 * created; the file need not be writable) and is not created if absent: a missing file
 * reads as "nothing held"; a locker or elector made from such a client fails at its first
 * write with MONGOELECTOR_ERR_SERVER. MongoDB clients are the same as
 * mongoelector_client_new()'s (the reading functions above send no write). */
MONGOELECTOR_API mongoelector_status mongoelector_client_new_read_only(const char *uri,
                                                                       const char *database,
                                                                       mongoelector_client **out);
/* Since 1.1. What a fair queue holds: the waiters of a plain lock (fair lockers), of a
 * semaphore or of a read-write lock (fair ones), read without a holder, for tools that
 * may only read (`mongoelector status`). */
typedef enum mongoelector_queue_of {
  MONGOELECTOR_QUEUE_LOCK = 1,      /* a plain lock's queue (beside the lock) */
  MONGOELECTOR_QUEUE_SEMAPHORE = 2, /* a semaphore's */
  MONGOELECTOR_QUEUE_RWLOCK = 3     /* a read-write lock's */
} mongoelector_queue_of;
/* Since 1.1. Who waits for `key` in its fair queue (`of` says whose; `collection` is the
 * lock's, semaphore's or read-write lock's collection, NULL for the default of its kind:
 * "mongolocker", "mongosemaphore", "mongorwlock"), as one JSON object (*json_out, owned
 * by the caller: mongoelector_free()):
 *   {"server_time_ms": N, "waiting": [{"uuid": "...", "ticket": N, "expire_ms": N}]}
 * "waiting" lists the entries still live at the earliest the server's clock can read
 * (server_time_ms; what claimants judge by), in arrival (ticket) order; empty when
 * nobody waits or the key has no document. It only reads (one find plus a server-clock
 * sample). INVALID_ARGUMENT: NULL client, key or json_out, an unknown `of`, an invalid key
 * or collection. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_client_read_queue(mongoelector_client *client,
                                                                    mongoelector_queue_of of,
                                                                    const char *collection,
                                                                    const char *key,
                                                                    char **json_out);
/* Frees a client. NULL ok. Lockers/electors made from it keep its connections open
 * until the last of them is freed. */
MONGOELECTOR_API void mongoelector_client_free(mongoelector_client *client);
/* Since 1.1. Asks the server what it is: name ("MongoDB", "FerretDB",
 * "mongo-java-server", "SQLite") and version. One round trip the first time; the answer
 * is remembered by the client. *name_out and *version_out are copies owned by the caller
 * (mongoelector_free()). Any thread, concurrently. */
MONGOELECTOR_API mongoelector_status mongoelector_client_server_info_copy(
    mongoelector_client *client, char **name_out, char **version_out);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_CLIENT_H */
