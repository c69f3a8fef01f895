// The libmongoc side of MongoStorage (internal, not installed): process-wide libmongoc
// set-up, the pools a MongoClient owns, error mapping, and the few generic commands the
// storage operations are made of. MongoStorage keeps the filters, updates and protocol.
//
// - Every call is bounded (see MongoPool): unless the URI sets them, socketTimeoutMS,
//   connectTimeoutMS and serverSelectionTimeoutMS are the pool's timeout class, a free
//   connection is waited for at most half of it, maxTimeMS is sent where the
//   command takes it, and libmongoc's automatic retries are off (retryWrites/retryReads
//   false unless the URI sets them) because a retry would double the bound; the caller
//   retries on its own schedule. Worst case for one call (call_bound_ms()): slot wait +
//   serverSelectionTimeoutMS + connectTimeoutMS + socketTimeoutMS.
// - Lock, fence and release writes use write concern {w: "majority", wtimeout}: an
//   acknowledged hold or epoch survives a primary failover (a w:1 write can be rolled
//   back and hand the key or a token out twice).
// - round_trips() counts libmongoc APM command-started events of ONE MongoConnection
//   (one storage), although the pool is shared: the event fires on the thread that
//   runs the command, which a Session marks with its connection's counter. Handshakes
//   and server monitoring are not reported by APM, so they do not count.
// - A server that failed is found again within ~0.5 s of coming back (pooled client
//   with a background monitor).
// - Errors (throw_error): cannot reach / timed out / no free connection in time ->
//   StorageUnavailable; libmongoc's argument checks -> InvalidArgument; any other ->
//   StorageError(message, server code).
#pragma once

#include <mongoc/mongoc.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
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

// A client URI, checked, with the client-wide defaults set (libmongoc retries off
// unless the URI turns them on, appname "mongoelector").
struct ClientUri {
  std::unique_ptr<mongoc_uri_t, void (*)(mongoc_uri_t*)> uri{nullptr, mongoc_uri_destroy};
  std::string database;  // database_for (uri.h): given, else the URI's
  int pool_size = 0;     // maxPoolSize, else the default given
};
// InvalidArgument for a malformed URI or database name. Does not connect.
ClientUri parse_client_uri(const std::string& uri, const std::string& database,
                           int default_pool_size);

// One libmongoc pool of a MongoClient, for one timeout class (mongo_client.h).
class MongoPool {
 public:
  // `uri` already carries the client's options; the pool adds its timeouts unless the
  // URI sets them. Does not connect.
  MongoPool(const mongoc_uri_t* uri, std::string database, std::int64_t timeout_class_ms,
            int max_size);
  ~MongoPool();
  MongoPool(const MongoPool&) = delete;
  MongoPool& operator=(const MongoPool&) = delete;

  const std::string& database() const { return database_; }
  std::int64_t op_timeout_ms() const { return timeout_ms_; }
  // 0 when the URI turns a timeout off: no bound is known.
  std::int64_t call_bound_ms() const { return call_bound_ms_; }
  int max_size() const { return max_size_; }
  // Whether the pool was made in another process (we are a fork's child).
  bool forked() const;

  // A client for one call: waits at most slot_wait_ms for a free one, then throws
  // StorageUnavailable; throws InvalidArgument in a fork's child.
  mongoc_client_t* pop();
  void push(mongoc_client_t* client);

 private:
  static void on_command_started(const mongoc_apm_command_started_t* event);

  std::string database_;
  std::int64_t timeout_ms_ = 0;
  std::int64_t slot_wait_ms_ = 0;
  std::int64_t call_bound_ms_ = 0;
  int max_size_ = 1;
  long pid_ = 0;
  mongoc_client_pool_t* pool_ = nullptr;
  std::mutex mu_;
  std::condition_variable slot_freed_;
  int in_use_ = 0;
};

// What one storage uses: a pool of its client, and its own round-trip count.
class MongoConnection {
 public:
  explicit MongoConnection(std::shared_ptr<MongoPool> pool) : pool_(std::move(pool)) {}
  MongoConnection(const MongoConnection&) = delete;  // sessions point at the counter
  MongoConnection& operator=(const MongoConnection&) = delete;

  const std::string& database() const { return pool_->database(); }
  std::int64_t op_timeout_ms() const { return pool_->op_timeout_ms(); }
  std::int64_t round_trips() const { return commands_.load(std::memory_order_relaxed); }
  std::int64_t call_bound_ms() const { return pool_->call_bound_ms(); }

  class Session;
  // Borrows a client of the pool for a few commands (see Session).
  Session session();

 private:
  std::shared_ptr<MongoPool> pool_;
  std::atomic<std::int64_t> commands_{0};  // APM command-started events of our sessions
};

// A client borrowed from the pool while it lives, so an operation of several commands
// (a fall-back, an index retry) runs on one connection. Collection names are relative to the
// connection's database and checked before anything is sent. Methods that take `what`
// throw (throw_error) on failure; those that take `error` return false and leave the
// decision to the caller.
class MongoConnection::Session {
 public:
  explicit Session(MongoConnection& c);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // {name: 1} on admin; throws on failure.
  void admin_command(const char* name, bson_t* reply);
  bool try_admin_command(const char* name, bson_t* reply, bson_error_t* error);

  // findAndModify with upsert and new: true; `after` is the document written, if any.
  bool find_and_modify(const std::string& collection, const bson_t* query, const bson_t* update,
                       std::optional<Document>* after, bson_error_t* error);
  // Whether a document matched / was deleted.
  bool update_one(const std::string& collection, const bson_t* filter, const bson_t* update,
                  const std::string& what);
  // One `update` command, one statement with multi: true; how many documents matched.
  std::int64_t update_many(const std::string& collection, const bson_t* filter,
                           const bson_t* update, const std::string& what);
  // ONE `update` command carrying one single-document statement per (filter, update),
  // unordered (a statement that matches nothing does not stop the others); its counts
  // are not returned (they cannot say which statements matched).
  void update_bulk(const std::string& collection,
                   const std::vector<std::pair<const bson_t*, const bson_t*>>& statements,
                   const std::string& what);
  bool delete_one(const std::string& collection, const bson_t* filter, const std::string& what);
  void replace_one(const std::string& collection, const bson_t* filter, const bson_t* replacement,
                   const bson_t* opts, const std::string& what);
  // At most `max_docs` documents of find(filter, opts + maxTimeMS).
  std::vector<Document> find(const std::string& collection, const bson_t* filter, bson_t* opts,
                             const std::string& what, std::size_t max_docs = SIZE_MAX);

  // Each (raw, nested fields included) of at most `max_docs` documents of find(filter,
  // opts + maxTimeMS), in the order the server sends them.
  void find_each(const std::string& collection, const bson_t* filter, bson_t* opts,
                 const std::string& what, std::size_t max_docs,
                 const std::function<void(const bson_t*)>& each);

  // The first document of find(filter, {limit: 1, singleBatch: true, maxTimeMS}) copied
  // whole (nested fields included) into `out` (initialised by the callee); false when
  // none. For the semaphore documents, whose slots to_document() would skip.
  bool find_one_raw(const std::string& collection, const bson_t* filter, bson_t* out,
                    const std::string& what);
  // insert with {w: "majority"}; false with `error` set on failure (E11000 included).
  bool insert_one(const std::string& collection, const bson_t* doc, bson_error_t* error);

  // Index {field: 1} named field_1 (pymongo's default, as the original), a TTL index
  // when expire_after_s is set.
  bool create_index(const std::string& collection, const std::string& field,
                    std::optional<std::int64_t> expire_after_s, bson_error_t* error);
  void drop_indexes(const std::string& collection);  // all of them; throws on failure

 private:
  using CollectionPtr = std::unique_ptr<mongoc_collection_t, void (*)(mongoc_collection_t*)>;
  CollectionPtr collection(const std::string& name);
  bool write_command(bson_t* cmd, bson_error_t* error);  // on the database, + maxTimeMS
  // {writeConcern: {w: "majority", wtimeout}} appended to `opts`.
  void append_majority(bson_t* opts) const;

  MongoConnection& c_;
  mongoc_client_t* client_;
  std::atomic<std::int64_t>* outer_counter_;  // restored when the session ends
};

inline MongoConnection::Session MongoConnection::session() { return Session(*this); }

}  // namespace mongoelector
