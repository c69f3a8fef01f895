// Storage over MongoDB (or a server speaking its protocol) through libmongoc.
//
// What this file guarantees (see storage.h for the semantics of each operation):
// - One call is one command on the wire (claim, renew, release, read, set_fence,
//   bump_epoch, put_status, server_time_ms on a server that knows `hello`), so the
//   lock protocol's round-trip budget holds. round_trips() counts commands through
//   libmongoc's APM command-started events: every command we send (including getMore,
//   dropIndexes, and the isMaster/serverStatus fall-backs) counts; the connection
//   handshake and server monitoring are NOT reported by libmongoc's APM, so they do not.
// - Every call is bounded: unless the URI sets them, socketTimeoutMS, connectTimeoutMS
//   and serverSelectionTimeoutMS are op_timeout_ms, maxTimeMS is sent where the command
//   takes it, and libmongoc's automatic retries are off (retryWrites/retryReads false
//   unless the URI sets them) because a retry would double the bound; the caller
//   retries on its own schedule. Worst case for one call (call_bound_ms()): selection,
//   then connect + handshake of a new connection, then the reply:
//   serverSelectionTimeoutMS + connectTimeoutMS + socketTimeoutMS.
// - A server that failed is found again within ~0.5 s of coming back (pooled client
//   with a background monitor, see Impl::pool).
// - Errors: cannot reach / timed out -> StorageUnavailable; duplicate key in claim() ->
//   nullopt ("held"); any other server answer -> StorageError(message, server code).
#include "mongo_storage.h"

#include <mongoc/mongoc.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <mutex>
#include <utility>

#include "../errors.h"
#include "../log.h"
#include "mongo_bson.h"

namespace mongoelector {

using mongo_bson::Bson;

namespace {

// --------------------------------------------------------------- process-wide --

std::once_flag g_mongoc_once;
std::atomic<bool> g_ttl_warned{false};

// libmongoc's own log lines go to the process-wide mongoelector sink instead of
// stdout/stderr, so the C API callback / Python logging see them.
void forward_mongoc_log(mongoc_log_level_t level, const char* domain, const char* message,
                        void* /*user_data*/) {
  std::string text = std::string("libmongoc ") + (domain ? domain : "") + ": " +
                     (message ? message : "");
  switch (level) {
    case MONGOC_LOG_LEVEL_ERROR:
    case MONGOC_LOG_LEVEL_CRITICAL:
      log(LogLevel::Error, text);
      break;
    case MONGOC_LOG_LEVEL_WARNING:
      // Servers without sessions (mongo-java-server) reject the endSessions a client
      // sends when destroyed: harmless, so not a warning.
      log(std::strstr(text.c_str(), "endSessions") ? LogLevel::Debug : LogLevel::Warning,
          text);
      break;
    case MONGOC_LOG_LEVEL_MESSAGE:
      log(LogLevel::Info, text);
      break;
    case MONGOC_LOG_LEVEL_INFO:
      log(LogLevel::Debug, text);
      break;
    default:
      break;  // debug/trace: too chatty to forward
  }
}

void init_mongoc_once() {
  std::call_once(g_mongoc_once, [] {
    mongoc_init();  // never paired with mongoc_cleanup: other instances may live on
    mongoc_log_set_handler(forward_mongoc_log, nullptr);
  });
}

// ----------------------------------------------------------------- errors ------

// Server error codes that mean "could not get an answer in time / from a primary",
// i.e. transient unavailability rather than a wrong request.
bool is_unavailable_server_code(std::uint32_t code) {
  switch (code) {
    case 6:      // HostUnreachable
    case 7:      // HostNotFound
    case 50:     // MaxTimeMSExpired
    case 89:     // NetworkTimeout
    case 91:     // ShutdownInProgress
    case 189:    // PrimarySteppedDown
    case 262:    // ExceededTimeLimit
    case 9001:   // SocketException
    case 10107:  // NotWritablePrimary
    case 11600:  // InterruptedAtShutdown
    case 11602:  // InterruptedDueToReplStateChange
    case 13435:  // NotPrimaryNoSecondaryOk
    case 13436:  // NotPrimaryOrSecondary
      return true;
    default:
      return false;
  }
}

bool is_server_domain(std::uint32_t domain) {
  return domain == MONGOC_ERROR_SERVER || domain == MONGOC_ERROR_QUERY ||
         domain == MONGOC_ERROR_WRITE_CONCERN || domain == MONGOC_ERROR_COLLECTION;
}

bool is_unavailable(const bson_error_t& e) {
  if (e.domain == MONGOC_ERROR_STREAM || e.domain == MONGOC_ERROR_SERVER_SELECTION) return true;
  // A connection opened for a command (not by a server scan) whose handshake fails or
  // times out is reported in the CLIENT domain with a STREAM code.
  if (e.domain == MONGOC_ERROR_CLIENT &&
      (e.code == MONGOC_ERROR_STREAM_NAME_RESOLUTION || e.code == MONGOC_ERROR_STREAM_SOCKET ||
       e.code == MONGOC_ERROR_STREAM_CONNECT || e.code == MONGOC_ERROR_STREAM_NOT_ESTABLISHED)) {
    return true;
  }
  return is_server_domain(e.domain) && is_unavailable_server_code(e.code);
}

bool is_server_error(const bson_error_t& e, std::uint32_t code) {
  return is_server_domain(e.domain) && e.code == code;
}

[[noreturn]] void raise(const std::string& what, const bson_error_t& e) {
  std::string msg = what + ": " + e.message + " [libmongoc domain " + std::to_string(e.domain) + " code " + std::to_string(e.code) + "]";
  if (is_unavailable(e)) throw StorageUnavailable(msg);
  // libmongoc's client-side argument checks (e.g. a '$' field in a replacement).
  if (e.domain == MONGOC_ERROR_COMMAND && e.code == MONGOC_ERROR_COMMAND_INVALID_ARG) {
    throw InvalidArgument(msg);
  }
  // Only server codes are passed on: libmongoc's own codes overlap with them.
  throw StorageError(msg, is_server_domain(e.domain) ? static_cast<int>(e.code) : 0);
}

// ------------------------------------------------------------- validation ------

void check_no_nul(const std::string& s, const char* what) {
  if (s.find('\0') != std::string::npos) {
    throw InvalidArgument(std::string(what) + " cannot contain NUL characters");
  }
}

void check_database_name(const std::string& name) {
  if (name.empty()) throw InvalidArgument("no database name (neither given nor in the URI)");
  if (name.size() >= 64) throw InvalidArgument("database name is 64 bytes or longer: " + name);
  check_no_nul(name, "database name");
  if (name.find_first_of("/\\. \"$") != std::string::npos) {
    throw InvalidArgument("database name contains one of /\\. \"$: " + name);
  }
  mongo_bson::check_utf8(name, "database name");
}

void check_collection_name(const std::string& name) {
  if (name.empty()) throw InvalidArgument("empty collection name");
  check_no_nul(name, "collection name");
  if (name.find('$') != std::string::npos) {
    throw InvalidArgument("collection name contains '$': " + name);
  }
  mongo_bson::check_utf8(name, "collection name");
}

// ----------------------------------------------------------------- helpers -----

struct CollectionDeleter {
  void operator()(mongoc_collection_t* c) const { mongoc_collection_destroy(c); }
};
using CollectionPtr = std::unique_ptr<mongoc_collection_t, CollectionDeleter>;

struct CursorDeleter {
  void operator()(mongoc_cursor_t* c) const { mongoc_cursor_destroy(c); }
};
using CursorPtr = std::unique_ptr<mongoc_cursor_t, CursorDeleter>;

struct FamOptsDeleter {
  void operator()(mongoc_find_and_modify_opts_t* o) const { mongoc_find_and_modify_opts_destroy(o); }
};
using FamOptsPtr = std::unique_ptr<mongoc_find_and_modify_opts_t, FamOptsDeleter>;

struct UriDeleter {
  void operator()(mongoc_uri_t* u) const { mongoc_uri_destroy(u); }
};
using UriPtr = std::unique_ptr<mongoc_uri_t, UriDeleter>;

void append_key(bson_t* b, const std::string& key) { mongo_bson::append_utf8(b, "_id", key); }

// The field `name` of `reply` as int64 (any numeric type), or `fallback`.
std::int64_t reply_int(const bson_t* reply, const char* name, std::int64_t fallback = 0) {
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply, name) && BSON_ITER_HOLDS_NUMBER(&it)) {
    return bson_iter_as_int64(&it);
  }
  return fallback;
}

// `localTime` of a hello/isMaster/serverStatus reply.
std::optional<std::int64_t> local_time(const bson_t* reply) {
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply, "localTime") && BSON_ITER_HOLDS_DATE_TIME(&it)) {
    return bson_iter_date_time(&it);
  }
  return std::nullopt;
}

std::optional<std::string> reply_string(const bson_t* reply, const char* name) {
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply, name) && BSON_ITER_HOLDS_UTF8(&it)) {
    std::uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    return std::string(s, len);
  }
  return std::nullopt;
}

// The `value` document of a findAndModify reply, or nullopt when it is null/absent.
std::optional<Document> fam_value(const bson_t* reply) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, reply, "value") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
    return std::nullopt;
  }
  std::uint32_t len = 0;
  const std::uint8_t* data = nullptr;
  bson_iter_document(&it, &len, &data);
  bson_t value;
  if (!bson_init_static(&value, data, len)) return std::nullopt;
  return mongo_bson::to_document(&value);
}

// A TTL index is a clean-up aid only; servers that refuse the option are tolerated.
bool is_ttl_rejection(const bson_error_t& e) {
  return is_server_error(e, 238)     // NotImplemented (FerretDB)
         || is_server_error(e, 197)  // InvalidIndexSpecificationOption
         || is_server_error(e, 115);  // CommandNotSupported
}

bool is_index_conflict(const bson_error_t& e) {
  return is_server_error(e, 85)      // IndexOptionsConflict
         || is_server_error(e, 86);  // IndexKeySpecsConflict
}

struct IndexSpec {
  std::string field;
  std::optional<std::int64_t> expire_after_s;  // set: a TTL index
};

}  // namespace

// ====================================================================== Impl ====

struct MongoStorage::Impl {
  std::string database;
  std::int64_t op_timeout_ms = 0;
  std::mutex mu;  // mongoc_client_t is not thread-safe: every use holds mu
  // A pool of one: libmongoc's multi-threaded mode, whose background monitor re-checks
  // a failed server within minHeartbeatFrequencyMS (500 ms). A single-threaded client
  // instead skips a server that failed a check for a 5 s "cooldown", so one network
  // blip made every call fail for 5 s. We pop one client, lazily (the constructor does
  // not connect), and use it under `mu`.
  mongoc_client_pool_t* pool = nullptr;
  mongoc_client_t* client_ = nullptr;

  std::atomic<std::int64_t> commands{0};  // APM command-started events
  std::int64_t call_bound_ms = 0;  // fixed at construction, see MongoStorage::call_bound_ms
  bool hello_unsupported = false;  // guarded by mu; mongo-java-server knows only isMaster

  // Callers hold mu. The pool's monitor starts with the first pop.
  mongoc_client_t* client() {
    if (client_ == nullptr) client_ = mongoc_client_pool_pop(pool);
    return client_;
  }

  ~Impl() {
    if (client_ != nullptr) mongoc_client_pool_push(pool, client_);
    if (pool != nullptr) mongoc_client_pool_destroy(pool);
  }

  static void on_command_started(const mongoc_apm_command_started_t* event) {
    auto* self = static_cast<Impl*>(mongoc_apm_command_started_get_context(event));
    self->commands.fetch_add(1, std::memory_order_relaxed);
  }

  CollectionPtr collection(const std::string& name) {
    check_collection_name(name);
    return CollectionPtr(mongoc_client_get_collection(client(), database.c_str(), name.c_str()));
  }

  // Runs a read-only command on `db`. Returns false with `error` set on failure.
  bool command(const char* db, const bson_t* cmd, bson_t* reply, bson_error_t* error) {
    return mongoc_client_command_simple(client(), db, cmd, nullptr, reply, error);
  }

  // Runs {name: 1} on admin; throws on failure.
  void admin_command(const char* name, bson_t* reply) {
    Bson cmd;
    BSON_APPEND_INT32(cmd.get(), name, 1);
    bson_error_t error;
    if (!command("admin", cmd.get(), reply, &error)) raise(name, error);
  }

  // One findAndModify with upsert and new:true; returns false with `error` set on failure.
  bool find_and_modify(mongoc_collection_t* coll, const bson_t* query, const bson_t* update,
                       bson_t* reply, bson_error_t* error) {
    FamOptsPtr opts(mongoc_find_and_modify_opts_new());
    mongoc_find_and_modify_opts_set_update(opts.get(), update);
    mongoc_find_and_modify_opts_set_flags(
        opts.get(), static_cast<mongoc_find_and_modify_flags_t>(MONGOC_FIND_AND_MODIFY_UPSERT |
                                                                MONGOC_FIND_AND_MODIFY_RETURN_NEW));
    mongoc_find_and_modify_opts_set_max_time_ms(opts.get(),
                                                static_cast<std::uint32_t>(op_timeout_ms));
    return mongoc_collection_find_and_modify_with_opts(coll, query, opts.get(), reply, error);
  }

  // update_one; returns whether a document matched.
  bool update_one(const std::string& collection_name, const bson_t* filter, const bson_t* update,
                  const char* what) {
    auto coll = collection(collection_name);
    Bson reply;
    bson_error_t error;
    if (!mongoc_collection_update_one(coll.get(), filter, update, nullptr, reply.get(), &error)) {
      raise(what, error);
    }
    return reply_int(reply.get(), "matchedCount") > 0;
  }

  void find_opts(bson_t* opts) {
    BSON_APPEND_INT64(opts, "maxTimeMS", op_timeout_ms);
  }

  // Creates each index; on an index-spec conflict drops the collection's indexes and
  // starts over once (as the original does); tolerates servers refusing TTL options.
  void ensure_indexes(const std::string& collection_name, const std::vector<IndexSpec>& specs) {
    check_collection_name(collection_name);
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool conflict = false;
      for (const auto& spec : specs) {
        bson_error_t error;
        if (create_index(collection_name, spec, &error)) continue;
        if (is_unavailable(error)) raise("createIndexes", error);
        if (spec.expire_after_s && is_ttl_rejection(error)) {
          if (!g_ttl_warned.exchange(true)) {
            log(LogLevel::Warning,
                "the server refused the TTL index on " + database + "." +
                    collection_name + "." + spec.field + " (" + error.message +
                    "); expired documents will stay until overwritten (the lock protocol "
                    "does not depend on the TTL index). Logged once per process.");
          }
          continue;
        }
        if (is_index_conflict(error) && attempt == 0) {
          log(LogLevel::Info, "index conflict on " + database + "." +
                                  collection_name + " (" + error.message +
                                  "); dropping its indexes and creating them again");
          drop_indexes(collection_name);
          conflict = true;
          break;
        }
        raise("createIndexes on " + collection_name, error);
      }
      if (!conflict) return;
    }
  }

  bool create_index(const std::string& collection_name, const IndexSpec& spec,
                    bson_error_t* error) {
    Bson cmd;
    BSON_APPEND_UTF8(cmd.get(), "createIndexes", collection_name.c_str());
    bson_t indexes, index, key;
    BSON_APPEND_ARRAY_BEGIN(cmd.get(), "indexes", &indexes);
    BSON_APPEND_DOCUMENT_BEGIN(&indexes, "0", &index);
    BSON_APPEND_DOCUMENT_BEGIN(&index, "key", &key);
    BSON_APPEND_INT32(&key, spec.field.c_str(), 1);
    bson_append_document_end(&index, &key);
    const std::string name = spec.field + "_1";  // pymongo's default name, as the original
    BSON_APPEND_UTF8(&index, "name", name.c_str());
    if (spec.expire_after_s) BSON_APPEND_INT64(&index, "expireAfterSeconds", *spec.expire_after_s);
    bson_append_document_end(&indexes, &index);
    bson_append_array_end(cmd.get(), &indexes);
    BSON_APPEND_INT64(cmd.get(), "maxTimeMS", op_timeout_ms);
    Bson reply;
    mongoc_database_t* db = mongoc_client_get_database(client(), database.c_str());
    bool ok = mongoc_database_write_command_with_opts(db, cmd.get(), nullptr, reply.get(), error);
    mongoc_database_destroy(db);
    return ok;
  }

  void drop_indexes(const std::string& collection_name) {
    Bson cmd;
    BSON_APPEND_UTF8(cmd.get(), "dropIndexes", collection_name.c_str());
    BSON_APPEND_UTF8(cmd.get(), "index", "*");
    BSON_APPEND_INT64(cmd.get(), "maxTimeMS", op_timeout_ms);
    Bson reply;
    bson_error_t error;
    mongoc_database_t* db = mongoc_client_get_database(client(), database.c_str());
    bool ok = mongoc_database_write_command_with_opts(db, cmd.get(), nullptr, reply.get(), &error);
    mongoc_database_destroy(db);
    if (!ok) raise("dropIndexes on " + collection_name, error);
  }
};

// ================================================================ MongoStorage ===

MongoStorage::MongoStorage(MongoStorageOptions options) : impl_(std::make_unique<Impl>()) {
  init_mongoc_once();
  if (options.op_timeout_ms <= 0 || options.op_timeout_ms > INT32_MAX) {
    throw InvalidArgument("op_timeout_ms must be between 1 and 2^31-1, got " +
                          std::to_string(options.op_timeout_ms));
  }
  check_no_nul(options.uri, "MongoDB URI");
  bson_error_t error;
  UriPtr uri(mongoc_uri_new_with_error(options.uri.c_str(), &error));
  if (!uri) throw InvalidArgument(std::string("invalid MongoDB URI: ") + error.message);

  std::string database = options.database;
  if (database.empty() && mongoc_uri_get_database(uri.get()) != nullptr) {
    database = mongoc_uri_get_database(uri.get());
  }
  check_database_name(database);

  const auto timeout = static_cast<std::int32_t>(options.op_timeout_ms);
  for (const char* opt : {MONGOC_URI_SOCKETTIMEOUTMS, MONGOC_URI_CONNECTTIMEOUTMS,
                          MONGOC_URI_SERVERSELECTIONTIMEOUTMS}) {
    if (!mongoc_uri_has_option(uri.get(), opt)) {
      mongoc_uri_set_option_as_int32(uri.get(), opt, timeout);
    }
  }
  for (const char* opt : {MONGOC_URI_RETRYWRITES, MONGOC_URI_RETRYREADS}) {
    if (!mongoc_uri_has_option(uri.get(), opt)) mongoc_uri_set_option_as_bool(uri.get(), opt, false);
  }
  if (mongoc_uri_get_appname(uri.get()) == nullptr) {
    mongoc_uri_set_appname(uri.get(), "mongoelector");
  }

  // How long one call can take at worst, from the effective (URI or default) values: a
  // server selection that starts a blocking scan just before its deadline runs on for
  // up to connectTimeoutMS (the scan also does the handshake), then the command waits
  // up to socketTimeoutMS for its reply. libmongoc's retries, if the URI turns them on,
  // repeat all of it once. A 0 (or negative) timeout means "none": no bound is known.
  {
    const std::int64_t sst = mongoc_uri_get_option_as_int32(
        uri.get(), MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 0);
    const std::int64_t cto = mongoc_uri_get_option_as_int32(uri.get(), MONGOC_URI_CONNECTTIMEOUTMS, 0);
    const std::int64_t sto = mongoc_uri_get_option_as_int32(uri.get(), MONGOC_URI_SOCKETTIMEOUTMS, 0);
    const bool retries =
        mongoc_uri_get_option_as_bool(uri.get(), MONGOC_URI_RETRYWRITES, false) ||
        mongoc_uri_get_option_as_bool(uri.get(), MONGOC_URI_RETRYREADS, false);
    if (sst > 0 && cto > 0 && sto > 0) impl_->call_bound_ms = (sst + cto + sto) * (retries ? 2 : 1);
  }

  mongoc_client_pool_t* pool = mongoc_client_pool_new_with_error(uri.get(), &error);
  if (pool == nullptr) {
    throw InvalidArgument(std::string("cannot use MongoDB URI: ") + error.message);
  }
  impl_->pool = pool;
  impl_->database = database;
  impl_->op_timeout_ms = options.op_timeout_ms;
  mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2);
  mongoc_client_pool_max_size(pool, 1);

  mongoc_apm_callbacks_t* callbacks = mongoc_apm_callbacks_new();
  mongoc_apm_set_command_started_cb(callbacks, &Impl::on_command_started);
  mongoc_client_pool_set_apm_callbacks(pool, callbacks, impl_.get());
  mongoc_apm_callbacks_destroy(callbacks);  // the pool keeps its own copy
}

MongoStorage::~MongoStorage() = default;

std::int64_t MongoStorage::round_trips() const {
  return impl_->commands.load(std::memory_order_relaxed);
}

std::int64_t MongoStorage::call_bound_ms() const { return impl_->call_bound_ms; }

ServerInfo MongoStorage::server_info() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Bson build;
  impl_->admin_command("buildInfo", build.get());
  ServerInfo info;
  info.version = reply_string(build.get(), "version").value_or("");

  bson_iter_t it;
  if (auto v = reply_string(build.get(), "ferretdbVersion")) {
    info.name = "FerretDB";
    info.version = *v;
    info.atomic_find_and_modify = false;  // read-then-write by _id (see protocol notes)
    return info;
  }
  if (bson_iter_init_find(&it, build.get(), "ferretdb")) {  // later FerretDB versions
    bson_iter_t sub;
    if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
        bson_iter_find(&sub, "version") && BSON_ITER_HOLDS_UTF8(&sub)) {
      info.version = bson_iter_utf8(&sub, nullptr);
    }
    info.name = "FerretDB";
    info.atomic_find_and_modify = false;
    return info;
  }
  if (bson_iter_init_find(&it, build.get(), "gitVersion")) {  // every mongod/mongos has it
    info.name = "MongoDB";
    info.atomic_find_and_modify = true;
    return info;
  }
  // mongo-java-server's buildInfo is only {version, versionArray, maxBsonObjectSize};
  // its serverStatus says process "java". Its collection operations are synchronized.
  Bson status;
  bson_error_t error;
  Bson cmd;
  BSON_APPEND_INT32(cmd.get(), "serverStatus", 1);
  if (!impl_->command("admin", cmd.get(), status.get(), &error)) {
    if (is_unavailable(error)) raise("serverStatus", error);
  } else if (reply_string(status.get(), "process").value_or("") == "java") {
    info.name = "mongo-java-server";
    info.atomic_find_and_modify = true;
    return info;
  }
  // Unknown emulation: not assumed atomic, so the Locker's safety check applies.
  info.name = "unknown MongoDB-compatible server";
  info.atomic_find_and_modify = false;
  return info;
}

std::int64_t MongoStorage::server_time_ms() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  bson_error_t error;
  if (!impl_->hello_unsupported) {
    Bson cmd, reply;
    BSON_APPEND_INT32(cmd.get(), "hello", 1);
    if (impl_->command("admin", cmd.get(), reply.get(), &error)) {
      if (auto t = local_time(reply.get())) return *t;
    } else if (is_unavailable(error)) {
      raise("hello", error);
    } else {
      impl_->hello_unsupported = true;  // remembered: one round trip from now on
    }
  }
  if (impl_->hello_unsupported) {
    Bson cmd, reply;
    BSON_APPEND_INT32(cmd.get(), "isMaster", 1);
    if (!impl_->command("admin", cmd.get(), reply.get(), &error)) raise("isMaster", error);
    if (auto t = local_time(reply.get())) return *t;
  }
  Bson status;
  impl_->admin_command("serverStatus", status.get());
  if (auto t = local_time(status.get())) return *t;
  throw StorageError("the server reports no localTime in hello/isMaster or serverStatus");
}

void MongoStorage::ensure_lock_indexes(const std::string& collection) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ensure_indexes(collection, {IndexSpec{"ts_expire", 0}});
}

std::optional<LockDoc> MongoStorage::claim(const std::string& collection, const LockClaim& claim,
                                           bool force) {
  Bson query, update;
  append_key(query.get(), claim.key);
  if (!force) {
    // Not held: NOT (locked == true AND ts_expire > now), the negation of
    // LockDoc::held_at. For the documents we and original nodes write this is "released
    // or expired"; a document with an odd-typed or missing locked/ts_expire cannot block
    // the key forever. When held, the upsert becomes an insert of the same _id, which
    // fails with E11000: that is how "held" is reported atomically.
    bson_t any, not_locked, ne, not_live, negated, gt;
    BSON_APPEND_ARRAY_BEGIN(query.get(), "$or", &any);
    BSON_APPEND_DOCUMENT_BEGIN(&any, "0", &not_locked);
    BSON_APPEND_DOCUMENT_BEGIN(&not_locked, "locked", &ne);
    BSON_APPEND_BOOL(&ne, "$ne", true);
    bson_append_document_end(&not_locked, &ne);
    bson_append_document_end(&any, &not_locked);
    BSON_APPEND_DOCUMENT_BEGIN(&any, "1", &not_live);
    BSON_APPEND_DOCUMENT_BEGIN(&not_live, "ts_expire", &negated);
    BSON_APPEND_DOCUMENT_BEGIN(&negated, "$not", &gt);
    BSON_APPEND_DATE_TIME(&gt, "$gt", claim.now_ms);
    bson_append_document_end(&negated, &gt);
    bson_append_document_end(&not_live, &negated);
    bson_append_document_end(&any, &not_live);
    bson_append_array_end(query.get(), &any);
  }
  bson_t set, inc;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_BOOL(&set, "locked", true);
  mongo_bson::append_utf8(&set, "host", claim.host);
  mongo_bson::append_utf8(&set, "uuid", claim.uuid);
  BSON_APPEND_INT64(&set, "pid", claim.pid);
  BSON_APPEND_DATE_TIME(&set, "ts_created", claim.now_ms);
  BSON_APPEND_DATE_TIME(&set, "ts_expire", claim.expire_ms);
  bson_append_document_end(update.get(), &set);
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$inc", &inc);
  BSON_APPEND_INT64(&inc, "fence", 1);
  bson_append_document_end(update.get(), &inc);

  std::lock_guard<std::mutex> lock(impl_->mu);
  auto coll = impl_->collection(collection);
  Bson reply;
  bson_error_t error;
  if (!impl_->find_and_modify(coll.get(), query.get(), update.get(), reply.get(), &error)) {
    if (is_server_error(error, 11000)) return std::nullopt;  // held by someone else
    raise("findAndModify (claim " + claim.key + ")", error);
  }
  auto value = fam_value(reply.get());
  if (!value) throw StorageError("findAndModify (claim " + claim.key + ") returned no document");
  LockDoc doc = LockDoc::from_document(*value);
  if (doc.key != claim.key || doc.uuid != claim.uuid || !doc.locked || doc.fence < 1) {
    throw StorageError("findAndModify (claim " + claim.key +
                       ") returned a document that is not the claim just written");
  }
  return doc;
}

std::int64_t MongoStorage::bump_epoch(const std::string& collection, const std::string& key) {
  Bson query, update;
  append_key(query.get(), key);
  bson_t inc;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$inc", &inc);
  BSON_APPEND_INT64(&inc, "epoch", 1);
  bson_append_document_end(update.get(), &inc);

  std::lock_guard<std::mutex> lock(impl_->mu);
  auto coll = impl_->collection(collection + ".fences");
  for (int attempt = 0;; ++attempt) {
    Bson reply;
    bson_error_t error;
    if (impl_->find_and_modify(coll.get(), query.get(), update.get(), reply.get(), &error)) {
      auto value = fam_value(reply.get());
      auto epoch = value ? value->get_int("epoch") : std::nullopt;
      if (!epoch || *epoch < 1) {
        throw StorageError("findAndModify (epoch of " + key + ") returned no valid epoch");
      }
      return *epoch;
    }
    // Two first upserts can race; the loser's retry finds the document and increments
    // it (MongoDB retries this itself; emulations may not).
    if (attempt == 0 && is_server_error(error, 11000)) continue;
    raise("findAndModify (epoch of " + key + ")", error);
  }
}

bool MongoStorage::set_fence(const std::string& collection, const std::string& key,
                             const std::string& uuid, std::int64_t old_fence,
                             std::int64_t new_fence) {
  Bson filter, update;
  append_key(filter.get(), key);
  mongo_bson::append_utf8(filter.get(), "uuid", uuid);
  BSON_APPEND_INT64(filter.get(), "fence", old_fence);
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_INT64(&set, "fence", new_fence);
  bson_append_document_end(update.get(), &set);

  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->update_one(collection, filter.get(), update.get(), "update (set_fence)");
}

bool MongoStorage::renew(const std::string& collection, const std::string& key,
                         const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                         std::int64_t expire_ms) {
  Bson filter, update;
  append_key(filter.get(), key);
  BSON_APPEND_BOOL(filter.get(), "locked", true);
  mongo_bson::append_utf8(filter.get(), "uuid", uuid);
  bson_t gt;
  BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "ts_expire", &gt);
  BSON_APPEND_DATE_TIME(&gt, "$gt", now_ms);
  bson_append_document_end(filter.get(), &gt);
  if (fence != 0) BSON_APPEND_INT64(filter.get(), "fence", fence);
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_DATE_TIME(&set, "ts_expire", expire_ms);
  bson_append_document_end(update.get(), &set);

  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->update_one(collection, filter.get(), update.get(), "update (renew)");
}

bool MongoStorage::release(const std::string& collection, const std::string& key,
                           const std::optional<std::string>& uuid, std::int64_t now_ms,
                           bool delete_document) {
  Bson filter;
  append_key(filter.get(), key);
  if (uuid) mongo_bson::append_utf8(filter.get(), "uuid", *uuid);

  std::lock_guard<std::mutex> lock(impl_->mu);
  if (delete_document) {
    auto coll = impl_->collection(collection);
    Bson reply;
    bson_error_t error;
    if (!mongoc_collection_delete_one(coll.get(), filter.get(), nullptr, reply.get(), &error)) {
      raise("delete (release)", error);
    }
    return reply_int(reply.get(), "deletedCount") > 0;
  }
  Bson update;
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_BOOL(&set, "locked", false);
  BSON_APPEND_DATE_TIME(&set, "ts_expire", now_ms);
  bson_append_document_end(update.get(), &set);
  return impl_->update_one(collection, filter.get(), update.get(), "update (release)");
}

std::optional<LockDoc> MongoStorage::read(const std::string& collection, const std::string& key) {
  Bson filter, opts;
  append_key(filter.get(), key);
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  BSON_APPEND_BOOL(opts.get(), "singleBatch", true);  // no cursor left open: one round trip

  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->find_opts(opts.get());
  auto coll = impl_->collection(collection);
  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), filter.get(), opts.get(), nullptr));
  const bson_t* doc = nullptr;
  std::optional<LockDoc> result;
  if (mongoc_cursor_next(cursor.get(), &doc)) {
    result = LockDoc::from_document(mongo_bson::to_document(doc));
  }
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error)) raise("find (read " + key + ")", error);
  return result;
}

void MongoStorage::ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) {
  if (ttl_s < 0) throw InvalidArgument("status TTL must not be negative");
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ensure_indexes(collection, {IndexSpec{"timestamp", ttl_s}, IndexSpec{"key", std::nullopt}});
}

void MongoStorage::put_status(const std::string& collection, const Document& doc) {
  const Value* id = doc.get("_id");
  if (id == nullptr) throw InvalidArgument("status document has no _id");
  Bson filter, replacement, opts;
  mongo_bson::append_value(filter.get(), "_id", *id);
  mongo_bson::append_document(replacement.get(), doc);
  BSON_APPEND_BOOL(opts.get(), "upsert", true);

  std::lock_guard<std::mutex> lock(impl_->mu);
  auto coll = impl_->collection(collection);
  Bson reply;
  bson_error_t error;
  if (!mongoc_collection_replace_one(coll.get(), filter.get(), replacement.get(), opts.get(),
                                     reply.get(), &error)) {
    raise("replace (status)", error);
  }
}

std::vector<Document> MongoStorage::list_status(const std::string& collection,
                                                const std::string& key) {
  Bson filter, opts;
  mongo_bson::append_utf8(filter.get(), "key", key);
  bson_t sort;
  BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "sort", &sort);
  BSON_APPEND_INT32(&sort, "timestamp", -1);
  bson_append_document_end(opts.get(), &sort);

  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->find_opts(opts.get());
  auto coll = impl_->collection(collection);
  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), filter.get(), opts.get(), nullptr));
  std::vector<Document> result;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cursor.get(), &doc)) result.push_back(mongo_bson::to_document(doc));
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error)) raise("find (status of " + key + ")", error);
  return result;
}

std::int64_t op_timeout_ms_for_ttl(double ttl_s) {
  if (!(ttl_s > 0)) return 100;
  double ms = ttl_s * 100.0;  // ttl / 10
  if (ms < 100) return 100;
  if (ms > 5000) return 5000;
  return static_cast<std::int64_t>(ms);
}

}  // namespace mongoelector
