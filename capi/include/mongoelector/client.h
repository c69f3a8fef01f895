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
