// StorageClient: what the C API and the Python URI transport hold for a URI, so they
// pick a backend from the URI without knowing the backends.
//
//   mongodb://... , mongodb+srv://...   MongoClient (mongo_client.h): shared libmongoc
//                                       pools; `database` names the database (empty:
//                                       the URI's: database_for in uri.h).
//   sqlite:///absolute/path/locks.db    SqliteClient (sqlite_storage.h): one SQLite file
//                                       on this host; `database` is ignored (collections
//                                       are namespaced inside the file).
//   memory://NAME                       MemoryClient (memory_storage.h): in this
//                                       process only, for tests; `database` ignored.
//
// A client is shared by every locker, elector and lease made from it (one pool or one
// connection, not one per key: protocol-notes "cost per key"); each storage it opens
// keeps it alive. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "storage.h"

namespace mongoelector {

// ReadOnly: a client for reading who holds what (`status`): it writes nothing, so it
// needs no write permission. SQLite opens the file read-only and refuses writes;
// MongoDB and memory clients are the same as ReadWrite (reading sends no write there).
enum class ClientAccess { ReadWrite, ReadOnly };

class StorageClient {
 public:
  virtual ~StorageClient() = default;

  // A storage for one locker or elector whose calls are bounded by about op_timeout_ms
  // (see each backend's call_bound_ms). InvalidArgument for a timeout out of range.
  virtual std::shared_ptr<Storage> open_storage(std::int64_t op_timeout_ms) = 0;

  // "mongodb", "sqlite" or "memory".
  virtual const char* backend() const = 0;
  virtual const std::string& uri() const = 0;
  // The MongoDB database, or "" for backends without one.
  virtual const std::string& database() const = 0;
};

// Chooses the backend by the URI's scheme (parse_storage_uri, uri.h). InvalidArgument for
// a malformed URI, an unknown scheme or a URI the backend refuses; a MongoDB client does not connect here, a SQLite client opens
// (and if needed creates) its file here, so a bad path fails at once.
std::shared_ptr<StorageClient> open_client(const std::string& uri, const std::string& database,
                                           ClientAccess access = ClientAccess::ReadWrite);

bool is_sqlite_uri(const std::string& uri);
// The per-call timeout for a storage that serves a locker or elector with this ttl:
// ttl/10 clamped to [100 ms, 5 s]. A MongoDB call is bounded by three such timeouts
// (pool wait and selection share one, connect, socket): 0.3 ttl; a SQLite call by one
// plus a margin (sqlite_storage.h).
std::int64_t op_timeout_ms_for_ttl(double ttl_s);
// The bound of a storage's one-time setup calls (index creation, asking what the server
// is), made before any claim, where the transport can bound them apart from the others:
// the larger of op_timeout_ms and the lesser of kSetupTimeoutMs and the client's own
// server-selection timeout (a user who asked a client to give up on an unreachable
// server within 200 ms gets that, not 5 s). Setup calls are not part of a hold's timing,
// and on a loaded host a first call (connection, handshake, createIndexes) can take well
// over the 100 ms a short ttl gives a claim or a renewal, whose bounds stay as they are.
// Used by the Python transport over a user's pymongo Database (and AsyncDatabase), whose
// client-side timeout is set per call. MongoStorage (libmongoc) cannot: its timeouts are
// its pool's (mongo_client.h), so its setup calls keep that pool's bound, in which
// server selection and the connection each get a whole timeout class.
constexpr std::int64_t kSetupTimeoutMs = 5000;
std::int64_t setup_timeout_ms(std::int64_t op_timeout_ms,
                              std::int64_t selection_timeout_ms = kSetupTimeoutMs);
bool is_mongodb_uri(const std::string& uri);

}  // namespace mongoelector
