// See mongo_connection.h for what this guarantees (bounds, round trips, errors).
#include "mongo_connection.h"

#include "../metrics.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <utility>

#include "../exceptions.h"
#include "../log.h"
#include "mongo_bson.h"
#include "uri.h"

namespace mongoelector {

using mongo_bson::Bson;

namespace {

// --------------------------------------------------------------- process-wide --

std::once_flag g_mongoc_once;

// libmongoc's own log lines go to the process-wide mongoelector sink instead of
// stdout/stderr, so the C API callback / Python logging see them.
void forward_mongoc_log(mongoc_log_level_t level, const char* domain, const char* message,
                        void* /*user_data*/) {
  std::string text =
      std::string("libmongoc ") + (domain ? domain : "") + ": " + (message ? message : "");
  switch (level) {
    case MONGOC_LOG_LEVEL_ERROR:
    case MONGOC_LOG_LEVEL_CRITICAL:
      log(LogLevel::Error, text);
      break;
    case MONGOC_LOG_LEVEL_WARNING:
      // Servers without sessions (mongo-java-server) reject the endSessions a client
      // sends when destroyed: harmless, so not a warning.
      log(std::strstr(text.c_str(), "endSessions") ? LogLevel::Debug : LogLevel::Warning, text);
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

struct CursorDeleter {
  void operator()(mongoc_cursor_t* c) const { mongoc_cursor_destroy(c); }
};
using CursorPtr = std::unique_ptr<mongoc_cursor_t, CursorDeleter>;

struct FamOptsDeleter {
  void operator()(mongoc_find_and_modify_opts_t* o) const {
    mongoc_find_and_modify_opts_destroy(o);
  }
};
using FamOptsPtr = std::unique_ptr<mongoc_find_and_modify_opts_t, FamOptsDeleter>;

struct UriDeleter {
  void operator()(mongoc_uri_t* u) const { mongoc_uri_destroy(u); }
};
using UriPtr = std::unique_ptr<mongoc_uri_t, UriDeleter>;

// The field `name` of `reply` as int64 (any numeric type), or 0.
std::int64_t reply_int(const bson_t* reply, const char* name) {
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply, name) && BSON_ITER_HOLDS_NUMBER(&it)) {
    return bson_iter_as_int64(&it);
  }
  return 0;
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

}  // namespace

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

namespace {
// The codeName and errorLabels of the reply of the last command that failed on this
// thread (bson_error_t carries only code and message). Noted where the reply is at hand,
// consumed by the throw_error() that follows on the same thread.
thread_local ServerErrorDetail t_failed_reply;

void note_failed_reply(const bson_t* reply) {
  t_failed_reply = ServerErrorDetail{};
  if (reply == nullptr) return;
  t_failed_reply.code = static_cast<int>(reply_int(reply, "code"));
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply, "codeName") && BSON_ITER_HOLDS_UTF8(&it)) {
    t_failed_reply.code_name = bson_iter_utf8(&it, nullptr);
  }
  bson_iter_t labels;
  if (bson_iter_init_find(&it, reply, "errorLabels") && BSON_ITER_HOLDS_ARRAY(&it) &&
      bson_iter_recurse(&it, &labels)) {
    while (bson_iter_next(&labels)) {
      if (BSON_ITER_HOLDS_UTF8(&labels)) {
        t_failed_reply.labels.emplace_back(bson_iter_utf8(&labels, nullptr));
      }
    }
  }
}
}  // namespace

void throw_error(const std::string& what, const bson_error_t& e) {
  std::string msg = what + ": " + e.message + " [libmongoc domain " + std::to_string(e.domain) +
                    " code " + std::to_string(e.code) + "]";
  // Only server codes are passed on: libmongoc's own codes overlap with them.
  ServerErrorDetail detail;
  if (is_server_domain(e.domain)) {
    detail.code = static_cast<int>(e.code);
    // The noted reply belongs to this error only if it names the same code.
    if (t_failed_reply.code == detail.code) {
      detail.code_name = std::move(t_failed_reply.code_name);
      detail.labels = std::move(t_failed_reply.labels);
    }
  }
  t_failed_reply = ServerErrorDetail{};
  if (is_unavailable(e)) throw StorageUnavailable(msg, std::move(detail));
  // libmongoc's client-side argument checks (e.g. a '$' field in a replacement).
  if (e.domain == MONGOC_ERROR_COMMAND && e.code == MONGOC_ERROR_COMMAND_INVALID_ARG) {
    throw InvalidArgument(msg);
  }
  throw StorageError(msg, std::move(detail));
}

// ================================================================ client URI ===

ClientUri parse_client_uri(const std::string& uri_string, const std::string& database,
                           int default_pool_size) {
  init_mongoc_once();
  check_no_nul(uri_string, "MongoDB URI");
  bson_error_t error;
  ClientUri parsed;
  parsed.uri.reset(mongoc_uri_new_with_error(uri_string.c_str(), &error));
  if (!parsed.uri) throw InvalidArgument(std::string("invalid MongoDB URI: ") + error.message);
  mongoc_uri_t* uri = parsed.uri.get();

  // The database by the rule every entry point shares (uri.h): given, else the URI's.
  parsed.database = database_for(parse_storage_uri(uri_string), database);
  check_database_name(parsed.database);

  for (const char* opt : {MONGOC_URI_RETRYWRITES, MONGOC_URI_RETRYREADS}) {
    if (!mongoc_uri_has_option(uri, opt)) mongoc_uri_set_option_as_bool(uri, opt, false);
  }
  if (mongoc_uri_get_appname(uri) == nullptr) mongoc_uri_set_appname(uri, "mongoelector");
  parsed.pool_size = default_pool_size;
  if (mongoc_uri_has_option(uri, MONGOC_URI_MAXPOOLSIZE)) {
    const std::int32_t n = mongoc_uri_get_option_as_int32(uri, MONGOC_URI_MAXPOOLSIZE, 0);
    if (n < 1) throw InvalidArgument("maxPoolSize must be at least 1, got " + std::to_string(n));
    parsed.pool_size = n;
  }
  return parsed;
}

// ================================================================= MongoPool ===

namespace {
// The counter of the MongoConnection whose Session runs on this thread (APM events fire
// on the thread that sends the command).
thread_local std::atomic<std::int64_t>* t_command_counter = nullptr;
}  // namespace

MongoPool::MongoPool(const mongoc_uri_t* base, std::string database, std::int64_t timeout_class_ms,
                     int max_size)
    : database_(std::move(database)),
      timeout_ms_(timeout_class_ms),
      max_size_(max_size),
      pid_(static_cast<long>(getpid())) {
  init_mongoc_once();
  if (timeout_class_ms <= 0 || timeout_class_ms > INT32_MAX / 2) {
    throw InvalidArgument("op_timeout_ms must be between 1 and 2^30, got " +
                          std::to_string(timeout_class_ms));
  }
  UriPtr uri(mongoc_uri_copy(base));
  const auto timeout = static_cast<std::int32_t>(timeout_class_ms);
  for (const char* opt : {MONGOC_URI_SOCKETTIMEOUTMS, MONGOC_URI_CONNECTTIMEOUTMS,
                          MONGOC_URI_SERVERSELECTIONTIMEOUTMS}) {
    if (!mongoc_uri_has_option(uri.get(), opt))
      mongoc_uri_set_option_as_int32(uri.get(), opt, timeout);
  }
  // The wait for a free connection: half a class. (Selection keeps a whole one: the
  // first call on a new pool waits for the monitor's first handshake, which a loaded
  // host can take well over 100 ms to finish.)
  slot_wait_ms_ = std::max<std::int64_t>(1, timeout_class_ms / 2);

  // How long one call can take at worst, from the effective (URI or default) values:
  // the wait for a free connection, then a server selection that starts a blocking scan
  // just before its deadline runs on for up to connectTimeoutMS (the scan also does the
  // handshake), then the command waits up to socketTimeoutMS for its reply. libmongoc's
  // retries, if the URI turns them on, repeat all but the slot wait once. A 0 (or
  // negative) timeout means "none": no bound is known.
  {
    const std::int64_t sst =
        mongoc_uri_get_option_as_int32(uri.get(), MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 0);
    const std::int64_t cto =
        mongoc_uri_get_option_as_int32(uri.get(), MONGOC_URI_CONNECTTIMEOUTMS, 0);
    const std::int64_t sto =
        mongoc_uri_get_option_as_int32(uri.get(), MONGOC_URI_SOCKETTIMEOUTMS, 0);
    const bool retries = mongoc_uri_get_option_as_bool(uri.get(), MONGOC_URI_RETRYWRITES, false) ||
                         mongoc_uri_get_option_as_bool(uri.get(), MONGOC_URI_RETRYREADS, false);
    if (sst > 0 && cto > 0 && sto > 0) {
      call_bound_ms_ = slot_wait_ms_ + (sst + cto + sto) * (retries ? 2 : 1);
    }
  }

  bson_error_t error;
  mongoc_client_pool_t* pool = mongoc_client_pool_new_with_error(uri.get(), &error);
  if (pool == nullptr) {
    throw InvalidArgument(std::string("cannot use MongoDB URI: ") + error.message);
  }
  pool_ = pool;
  mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2);
  mongoc_client_pool_max_size(pool, static_cast<std::uint32_t>(max_size_));

  mongoc_apm_callbacks_t* callbacks = mongoc_apm_callbacks_new();
  mongoc_apm_set_command_started_cb(callbacks, &MongoPool::on_command_started);
  mongoc_client_pool_set_apm_callbacks(pool, callbacks, nullptr);
  mongoc_apm_callbacks_destroy(callbacks);  // the pool keeps its own copy
}

MongoPool::~MongoPool() {
  // In a fork's child the pool's threads and sockets are the parent's: leave them.
  if (pool_ != nullptr && !forked()) mongoc_client_pool_destroy(pool_);
}

bool MongoPool::forked() const { return static_cast<long>(getpid()) != pid_; }

void MongoPool::on_command_started(const mongoc_apm_command_started_t* /*event*/) {
  if (t_command_counter != nullptr) t_command_counter->fetch_add(1, std::memory_order_relaxed);
  metrics::record_round_trip();
}

mongoc_client_t* MongoPool::pop() {
  if (forked()) {
    throw InvalidArgument(
        "this object was made in process " + std::to_string(pid_) +
        " and is used after fork() in process " + std::to_string(getpid()) +
        "; connections (and lock ownership) cannot be shared with the parent: make a new "
        "locker or elector in the child");
  }
  {
    // Our own count of slots, so that the wait is bounded (mongoc_client_pool_pop
    // would block for as long as all clients are out).
    std::unique_lock<std::mutex> lk(mu_);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(slot_wait_ms_);
    if (!slot_freed_.wait_until(lk, until, [this] { return in_use_ < max_size_; })) {
      throw StorageUnavailable("no free connection in the pool (" + std::to_string(max_size_) +
                               " in use) within " + std::to_string(slot_wait_ms_) +
                               " ms; raise maxPoolSize in the URI");
    }
    ++in_use_;
  }
  // The pool's monitor starts with the first pop. A slot is ours, so this cannot block.
  mongoc_client_t* client = mongoc_client_pool_pop(pool_);
  if (client == nullptr) {
    push(nullptr);
    throw StorageError("libmongoc returned no client from its pool");
  }
  return client;
}

void MongoPool::push(mongoc_client_t* client) {
  if (client != nullptr) mongoc_client_pool_push(pool_, client);
  {
    std::lock_guard<std::mutex> g(mu_);
    --in_use_;
  }
  slot_freed_.notify_one();
}

// ==================================================================== Session ===

MongoConnection::Session::Session(MongoConnection& c)
    : c_(c), client_(c.pool_->pop()), outer_counter_(t_command_counter) {
  t_command_counter = &c_.commands_;
}

MongoConnection::Session::~Session() {
  t_command_counter = outer_counter_;
  c_.pool_->push(client_);
}

void MongoConnection::Session::append_majority(bson_t* opts) const {
  bson_t wc;
  BSON_APPEND_DOCUMENT_BEGIN(opts, "writeConcern", &wc);
  BSON_APPEND_UTF8(&wc, "w", "majority");
  BSON_APPEND_INT64(&wc, "wtimeout", c_.op_timeout_ms());
  bson_append_document_end(opts, &wc);
}

MongoConnection::Session::CollectionPtr MongoConnection::Session::collection(
    const std::string& name) {
  check_collection_name(name);
  return CollectionPtr(mongoc_client_get_collection(client_, c_.database().c_str(), name.c_str()),
                       mongoc_collection_destroy);
}

bool MongoConnection::Session::try_admin_command(const char* name, bson_t* reply,
                                                 bson_error_t* error) {
  Bson cmd;
  BSON_APPEND_INT32(cmd.get(), name, 1);
  const bool ok = mongoc_client_command_simple(client_, "admin", cmd.get(), nullptr, reply, error);
  if (!ok) note_failed_reply(reply);
  return ok;
}

void MongoConnection::Session::admin_command(const char* name, bson_t* reply) {
  bson_error_t error;
  if (!try_admin_command(name, reply, &error)) throw_error(name, error);
}

bool MongoConnection::Session::find_and_modify(const std::string& collection_name,
                                               const bson_t* query, const bson_t* update,
                                               std::optional<Document>* after,
                                               bson_error_t* error) {
  auto coll = collection(collection_name);
  FamOptsPtr opts(mongoc_find_and_modify_opts_new());
  mongoc_find_and_modify_opts_set_update(opts.get(), update);
  mongoc_find_and_modify_opts_set_flags(
      opts.get(), static_cast<mongoc_find_and_modify_flags_t>(MONGOC_FIND_AND_MODIFY_UPSERT |
                                                              MONGOC_FIND_AND_MODIFY_RETURN_NEW));
  mongoc_find_and_modify_opts_set_max_time_ms(opts.get(),
                                              static_cast<std::uint32_t>(c_.op_timeout_ms()));
  Bson extra;
  append_majority(extra.get());
  mongoc_find_and_modify_opts_append(opts.get(), extra.get());
  Bson reply;
  if (!mongoc_collection_find_and_modify_with_opts(coll.get(), query, opts.get(), reply.get(),
                                                   error)) {
    note_failed_reply(reply.get());
    return false;
  }
  *after = fam_value(reply.get());
  return true;
}

bool MongoConnection::Session::update_one(const std::string& collection_name, const bson_t* filter,
                                          const bson_t* update, const std::string& what) {
  auto coll = collection(collection_name);
  Bson reply, opts;
  append_majority(opts.get());
  bson_error_t error;
  if (!mongoc_collection_update_one(coll.get(), filter, update, opts.get(), reply.get(), &error)) {
    note_failed_reply(reply.get());
    throw_error(what, error);
  }
  return reply_int(reply.get(), "matchedCount") > 0;
}

std::int64_t MongoConnection::Session::update_many(const std::string& collection_name,
                                                   const bson_t* filter, const bson_t* update,
                                                   const std::string& what) {
  auto coll = collection(collection_name);
  Bson reply, opts;
  append_majority(opts.get());
  bson_error_t error;
  if (!mongoc_collection_update_many(coll.get(), filter, update, opts.get(), reply.get(), &error)) {
    note_failed_reply(reply.get());
    throw_error(what, error);
  }
  return reply_int(reply.get(), "matchedCount");
}

void MongoConnection::Session::update_bulk(
    const std::string& collection_name,
    const std::vector<std::pair<const bson_t*, const bson_t*>>& statements,
    const std::string& what) {
  if (statements.empty()) return;
  auto coll = collection(collection_name);
  Bson opts, reply;
  BSON_APPEND_BOOL(opts.get(), "ordered", false);
  append_majority(opts.get());
  using BulkPtr = std::unique_ptr<mongoc_bulk_operation_t, void (*)(mongoc_bulk_operation_t*)>;
  BulkPtr bulk(mongoc_collection_create_bulk_operation_with_opts(coll.get(), opts.get()),
               mongoc_bulk_operation_destroy);
  bson_error_t error;
  for (const auto& [filter, update] : statements) {
    if (!mongoc_bulk_operation_update_one_with_opts(bulk.get(), filter, update, nullptr, &error))
      throw InvalidArgument(what + ": " + error.message);
  }
  if (!mongoc_bulk_operation_execute(bulk.get(), reply.get(), &error)) {
    note_failed_reply(reply.get());
    throw_error(what, error);
  }
}

bool MongoConnection::Session::delete_one(const std::string& collection_name, const bson_t* filter,
                                          const std::string& what) {
  auto coll = collection(collection_name);
  Bson reply, opts;
  append_majority(opts.get());
  bson_error_t error;
  if (!mongoc_collection_delete_one(coll.get(), filter, opts.get(), reply.get(), &error)) {
    note_failed_reply(reply.get());
    throw_error(what, error);
  }
  return reply_int(reply.get(), "deletedCount") > 0;
}

void MongoConnection::Session::replace_one(const std::string& collection_name, const bson_t* filter,
                                           const bson_t* replacement, const bson_t* opts,
                                           const std::string& what) {
  auto coll = collection(collection_name);
  Bson reply;
  bson_error_t error;
  if (!mongoc_collection_replace_one(coll.get(), filter, replacement, opts, reply.get(), &error)) {
    note_failed_reply(reply.get());
    throw_error(what, error);
  }
}

std::vector<Document> MongoConnection::Session::find(const std::string& collection_name,
                                                     const bson_t* filter, bson_t* opts,
                                                     const std::string& what,
                                                     std::size_t max_docs) {
  std::vector<Document> result;
  find_each(collection_name, filter, opts, what, max_docs,
            [&](const bson_t* doc) { result.push_back(mongo_bson::to_document(doc)); });
  return result;
}

void MongoConnection::Session::find_each(const std::string& collection_name, const bson_t* filter,
                                         bson_t* opts, const std::string& what,
                                         std::size_t max_docs,
                                         const std::function<void(const bson_t*)>& each) {
  BSON_APPEND_INT64(opts, "maxTimeMS", c_.op_timeout_ms());
  auto coll = collection(collection_name);
  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), filter, opts, nullptr));
  std::size_t n = 0;
  const bson_t* doc = nullptr;
  while (n < max_docs && mongoc_cursor_next(cursor.get(), &doc)) {
    each(doc);
    ++n;
  }
  bson_error_t error;
  const bson_t* error_doc = nullptr;
  if (mongoc_cursor_error_document(cursor.get(), &error, &error_doc)) {
    note_failed_reply(error_doc);
    throw_error(what, error);
  }
}

bool MongoConnection::Session::find_one_raw(const std::string& collection_name,
                                            const bson_t* filter, bson_t* out,
                                            const std::string& what) {
  Bson opts;
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  BSON_APPEND_BOOL(opts.get(), "singleBatch", true);  // no cursor left open: one round trip
  BSON_APPEND_INT64(opts.get(), "maxTimeMS", c_.op_timeout_ms());
  auto coll = collection(collection_name);
  CursorPtr cursor(mongoc_collection_find_with_opts(coll.get(), filter, opts.get(), nullptr));
  const bson_t* doc = nullptr;
  const bool found = mongoc_cursor_next(cursor.get(), &doc);
  bson_init(out);
  if (found) bson_concat(out, doc);
  bson_error_t error;
  const bson_t* error_doc = nullptr;
  if (mongoc_cursor_error_document(cursor.get(), &error, &error_doc)) {
    note_failed_reply(error_doc);
    throw_error(what, error);
  }
  return found;
}

bool MongoConnection::Session::insert_one(const std::string& collection_name, const bson_t* doc,
                                          bson_error_t* error) {
  auto coll = collection(collection_name);
  Bson reply, opts;
  append_majority(opts.get());
  if (!mongoc_collection_insert_one(coll.get(), doc, opts.get(), reply.get(), error)) {
    note_failed_reply(reply.get());
    return false;
  }
  return true;
}

bool MongoConnection::Session::create_index(const std::string& collection_name,
                                            const std::string& field,
                                            std::optional<std::int64_t> expire_after_s,
                                            bson_error_t* error) {
  check_collection_name(collection_name);
  Bson cmd;
  BSON_APPEND_UTF8(cmd.get(), "createIndexes", collection_name.c_str());
  bson_t indexes, index, key;
  BSON_APPEND_ARRAY_BEGIN(cmd.get(), "indexes", &indexes);
  BSON_APPEND_DOCUMENT_BEGIN(&indexes, "0", &index);
  BSON_APPEND_DOCUMENT_BEGIN(&index, "key", &key);
  BSON_APPEND_INT32(&key, field.c_str(), 1);
  bson_append_document_end(&index, &key);
  const std::string name = field + "_1";
  BSON_APPEND_UTF8(&index, "name", name.c_str());
  if (expire_after_s) BSON_APPEND_INT64(&index, "expireAfterSeconds", *expire_after_s);
  bson_append_document_end(&indexes, &index);
  bson_append_array_end(cmd.get(), &indexes);
  return write_command(cmd.get(), error);
}

void MongoConnection::Session::drop_indexes(const std::string& collection_name) {
  check_collection_name(collection_name);
  Bson cmd;
  BSON_APPEND_UTF8(cmd.get(), "dropIndexes", collection_name.c_str());
  BSON_APPEND_UTF8(cmd.get(), "index", "*");
  bson_error_t error;
  if (!write_command(cmd.get(), &error)) throw_error("dropIndexes on " + collection_name, error);
}

bool MongoConnection::Session::write_command(bson_t* cmd, bson_error_t* error) {
  BSON_APPEND_INT64(cmd, "maxTimeMS", c_.op_timeout_ms());
  Bson reply;
  mongoc_database_t* db = mongoc_client_get_database(client_, c_.database().c_str());
  bool ok = mongoc_database_write_command_with_opts(db, cmd, nullptr, reply.get(), error);
  mongoc_database_destroy(db);
  if (!ok) note_failed_reply(reply.get());
  return ok;
}

}  // namespace mongoelector
