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

#include "../storage.h"

namespace mongoelector {

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
std::shared_ptr<StorageClient> open_client(const std::string& uri, const std::string& database);

bool is_sqlite_uri(const std::string& uri);
// The per-call timeout for a storage that serves a locker or elector with this ttl:
// ttl/10 clamped to [100 ms, 5 s]. A MongoDB call is bounded by three such timeouts
// (pool wait and selection share one, connect, socket): 0.3 ttl; a SQLite call by one
// plus a margin (sqlite_storage.h).
std::int64_t op_timeout_ms_for_ttl(double ttl_s);
bool is_mongodb_uri(const std::string& uri);

}  // namespace mongoelector
