// The libmongoc side of MongoStorage (internal, not installed): process-wide libmongoc
// set-up, one bounded client, error mapping, and the few generic commands the storage
// operations are made of. MongoStorage keeps the filters, updates and protocol.
//
// - Every call is bounded: unless the URI sets them, socketTimeoutMS, connectTimeoutMS
//   and serverSelectionTimeoutMS are op_timeout_ms, maxTimeMS is sent where the command
//   takes it, and libmongoc's automatic retries are off (retryWrites/retryReads false
//   unless the URI sets them) because a retry would double the bound; the caller
//   retries on its own schedule. Worst case for one call (call_bound_ms()): selection,
//   then connect + handshake of a new connection, then the reply:
//   serverSelectionTimeoutMS + connectTimeoutMS + socketTimeoutMS.
// - round_trips() counts libmongoc APM command-started events: every command sent
//   (getMore, dropIndexes and fall-backs included); the handshake and server monitoring
//   are not reported by APM, so they do not count.
// - A server that failed is found again within ~0.5 s of coming back (pooled client
//   with a background monitor, see MongoConnection::pool_).
// - Errors (throw_error): cannot reach / timed out -> StorageUnavailable; libmongoc's
//   argument checks -> InvalidArgument; any other -> StorageError(message, server code).
#pragma once

#include <mongoc/mongoc.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../value.h"

namespace mongoelector {

// Could not reach the server or get an answer in time (transient, not a wrong request).
bool is_unavailable(const bson_error_t& e);
// The server answered with error `code`.
bool is_server_error(const bson_error_t& e, std::uint32_t code);
// Throws the exception for `e` (see the header comment), its message prefixed by `what`.
[[noreturn]] void throw_error(const std::string& what, const bson_error_t& e);

class MongoConnection {
 public:
  // Throws InvalidArgument for a malformed URI, database name or op_timeout_ms; an empty
  // `database` means the URI's. Does not connect.
  MongoConnection(const std::string& uri, const std::string& database,
                  std::int64_t op_timeout_ms);
  ~MongoConnection();
  MongoConnection(const MongoConnection&) = delete;  // the APM callback holds `this`
  MongoConnection& operator=(const MongoConnection&) = delete;

  const std::string& database() const { return database_; }
  std::int64_t round_trips() const { return commands_.load(std::memory_order_relaxed); }
  // 0 when the URI turns a timeout off: no bound is known.
  std::int64_t call_bound_ms() const { return call_bound_ms_; }

  class Session;
  // Waits for, then holds, the one client (see Session).
  Session session();

 private:
  static void on_command_started(const mongoc_apm_command_started_t* event);
  mongoc_client_t* client();  // callers hold mu_

  std::string database_;
  std::int64_t op_timeout_ms_ = 0;
  std::int64_t call_bound_ms_ = 0;        // fixed at construction
  std::atomic<std::int64_t> commands_{0};  // APM command-started events
  std::mutex mu_;  // mongoc_client_t is not thread-safe: every use holds mu_
  // A pool of one: libmongoc's multi-threaded mode, whose background monitor re-checks
  // a failed server within minHeartbeatFrequencyMS (500 ms). A single-threaded client
  // instead skips a server that failed a check for a 5 s "cooldown", so one network
  // blip made every call fail for 5 s. We pop one client, lazily (the constructor does
  // not connect), and use it under mu_.
  mongoc_client_pool_t* pool_ = nullptr;
  mongoc_client_t* client_ = nullptr;
};

// Exclusive use of the client while it lives, so an operation of several commands (a
// fall-back, an index retry) runs as one. Collection names are relative to the
// connection's database and checked before anything is sent. Methods that take `what`
// throw (throw_error) on failure; those that take `error` return false and leave the
// decision to the caller.
class MongoConnection::Session {
 public:
  explicit Session(MongoConnection& c) : c_(c), lock_(c.mu_) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // {name: 1} on admin; throws on failure.
  void admin_command(const char* name, bson_t* reply);
  bool try_admin_command(const char* name, bson_t* reply, bson_error_t* error);

  // findAndModify with upsert and new: true; `after` is the document written, if any.
  bool find_and_modify(const std::string& collection, const bson_t* query,
                       const bson_t* update, std::optional<Document>* after,
                       bson_error_t* error);
  // Whether a document matched / was deleted.
  bool update_one(const std::string& collection, const bson_t* filter, const bson_t* update,
                  const std::string& what);
  bool delete_one(const std::string& collection, const bson_t* filter, const std::string& what);
  void replace_one(const std::string& collection, const bson_t* filter,
                   const bson_t* replacement, const bson_t* opts, const std::string& what);
  // At most `max_docs` documents of find(filter, opts + maxTimeMS).
  std::vector<Document> find(const std::string& collection, const bson_t* filter, bson_t* opts,
                             const std::string& what, std::size_t max_docs = SIZE_MAX);

  // Index {field: 1} named field_1 (pymongo's default, as the original), a TTL index
  // when expire_after_s is set.
  bool create_index(const std::string& collection, const std::string& field,
                    std::optional<std::int64_t> expire_after_s, bson_error_t* error);
  void drop_indexes(const std::string& collection);  // all of them; throws on failure

 private:
  using CollectionPtr = std::unique_ptr<mongoc_collection_t, void (*)(mongoc_collection_t*)>;
  CollectionPtr collection(const std::string& name);
  bool write_command(bson_t* cmd, bson_error_t* error);  // on the database, + maxTimeMS

  MongoConnection& c_;
  std::unique_lock<std::mutex> lock_;
};

inline MongoConnection::Session MongoConnection::session() { return Session(*this); }

}  // namespace mongoelector
