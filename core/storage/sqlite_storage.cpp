// See sqlite_storage.h for the semantics and the choices (WAL, synchronous=FULL, one
// connection per client). Library: Debian's system libsqlite3 (find_package(SQLite3)),
// not the amalgamation: security fixes then arrive with the distribution's updates
// instead of a rebuild of ours; the wheel work of issue #9 can vendor the amalgamation
// later (the code uses only the stable C API of SQLite >= 3.22).
//
// Schema (version 1):
//   meta(name PRIMARY KEY, value)      application = mongoelector, schema_version = 1
//   documents(coll, id, doc, key, ts)  one row per document of a "collection":
//       id   the _id as Extended JSON (document_json.h)
//       doc  the whole document as Extended JSON, field order kept
//       key, ts  status documents only: their `key` and `timestamp` (list_status)
//   Lock documents live in coll = <lock collection>, epochs in "<lock collection>.fences",
//   status documents in the status collection, exactly as in MongoDB.
#include "sqlite_storage.h"

#include "../metrics.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <thread>

#include "../exceptions.h"
#include "../server_clock.h"
#include "../utf8.h"
#include "document_json.h"
#include "semaphore_doc.h"
#include "uri.h"

namespace mongoelector {

namespace {

// Budget of the one-off work at open (journal mode, schema): other processes may be
// writing, or creating the same new file at this moment.
constexpr int kOpenBusyTimeoutMs = 5000;

// The write lock was not ours within the busy timeout (another process is writing, or
// this process's connection was busy with another call) BEFORE anything was written: a
// claim that meets it is "not taken this time", as when the lock is held.
class WriteLockBusy : public StorageUnavailable {
 public:
  using StorageUnavailable::StorageUnavailable;
};

// ------------------------------------------------------------------ errors ------

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what) {
  const int ext = db ? sqlite3_extended_errcode(db) : rc;
  const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string file =
      db ? std::string(sqlite3_db_filename(db, "main") ? sqlite3_db_filename(db, "main") : "") : "";
  const std::string where = what + " on " + file + ": " + msg;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw StorageUnavailable("SQLite " + where +
                                   " (another process held the database's write lock past this "
                                   "call's busy timeout)",
                               ServerErrorDetail{ext, {}, {}});
    case SQLITE_READONLY:
      throw StorageError("SQLite " + where +
                             " (the database is read-only to this client: it was opened "
                             "read-only, or the file's permissions changed)",
                         ext);
    default:
      throw StorageError("SQLite " + where, ext);
  }
}

// ------------------------------------------------------------------ statements --

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, std::string what) : db_(db), what_(std::move(what)) {
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
    if (rc != SQLITE_OK) throw_sqlite(db, rc, what_);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& s) {
    check(sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Stmt& bind_null(int i) {
    check(sqlite3_bind_null(stmt_, i));
    return *this;
  }
  // True: a row is available; false: done.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, rc, what_);
  }
  std::string text(int col) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  std::int64_t int64(int col) { return sqlite3_column_int64(stmt_, col); }
  bool is_null(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, what_);
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string what_;
};

void exec(sqlite3* db, const char* sql, const std::string& what) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, what);
}

// BEGIN IMMEDIATE ... COMMIT; rolled back if not committed (an exception, a "no").
class Txn {
 public:
  Txn(sqlite3* db, const std::string& what) : db_(db), what_(what) {
    try {
      exec(db_, "BEGIN IMMEDIATE", what_ + " (BEGIN IMMEDIATE)");
    } catch (const StorageUnavailable& e) {
      throw WriteLockBusy(e.what(), e.detail());  // nothing written
    }
    open_ = true;
  }
  ~Txn() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  void commit() {
    exec(db_, "COMMIT", what_ + " (COMMIT)");
    open_ = false;
  }

 private:
  sqlite3* db_;
  std::string what_;
  bool open_ = false;
};

// ------------------------------------------------------------------ documents ---

void check_collection_name(const std::string& name) {
  // The MongoDB backend's rules, so a name that works here works there.
  if (name.empty()) throw InvalidArgument("empty collection name");
  if (name.find('\0') != std::string::npos)
    throw InvalidArgument("collection name cannot contain NUL characters");
  if (name.find('$') != std::string::npos)
    throw InvalidArgument("collection name contains '$': " + name);
  if (!is_valid_utf8(name)) throw InvalidArgument("collection name is not valid UTF-8");
}

std::string id_of_key(const std::string& key) {
  if (!is_valid_utf8(key)) throw InvalidArgument("key is not valid UTF-8");
  return document_json::encode_value(Value{key});
}

std::optional<Document> load(sqlite3* db, const std::string& coll, const std::string& id,
                             const std::string& what) {
  Stmt q(db, "SELECT doc FROM documents WHERE coll = ?1 AND id = ?2", what);
  q.bind(1, coll).bind(2, id);
  if (!q.step()) return std::nullopt;
  return document_json::decode(q.text(0), what);
}

void store(sqlite3* db, const std::string& coll, const std::string& id, const Document& doc,
           const std::string& what) {
  const std::string text = document_json::encode(doc);
  Stmt w(db,
         "INSERT INTO documents (coll, id, doc, key, ts) VALUES (?1, ?2, ?3, ?4, ?5) "
         "ON CONFLICT (coll, id) DO UPDATE SET doc = excluded.doc, key = excluded.key, "
         "ts = excluded.ts",
         what);
  w.bind(1, coll).bind(2, id).bind(3, text);
  if (auto k = doc.get_string("key"))
    w.bind(4, *k);
  else
    w.bind_null(4);
  if (auto t = doc.get_date("timestamp"))
    w.bind(5, t->ms);
  else
    w.bind_null(5);
  w.step();
}

void remove(sqlite3* db, const std::string& coll, const std::string& id, const std::string& what) {
  Stmt d(db, "DELETE FROM documents WHERE coll = ?1 AND id = ?2", what);
  d.bind(1, coll).bind(2, id);
  d.step();
}

// The numeric value of a field for an equality filter ({fence: n} in MongoDB matches an
// int64 or a double of the same value).
std::optional<std::int64_t> numeric(const Document& doc, const std::string& name) {
  const Value* v = doc.get(name);
  if (v == nullptr) return std::nullopt;
  if (const auto* i = std::get_if<std::int64_t>(v)) return *i;
  if (const auto* d = std::get_if<double>(v)) {
    if (std::isfinite(*d) && std::floor(*d) == *d && std::fabs(*d) < 9.2e18)
      return static_cast<std::int64_t>(*d);
  }
  return std::nullopt;
}

bool string_equals(const Document& doc, const std::string& name, const std::string& want) {
  auto s = doc.get_string(name);
  return s && *s == want;
}

// ------------------------------------------------------------------ opening -----

void close_quietly(sqlite3* db) {
  if (db) sqlite3_close_v2(db);
}

// One connection (its own mutex off: the client serialises it), with extended result
// codes; InvalidArgument("<failure>: <SQLite's reason>") if SQLite cannot open it.
sqlite3* open_connection(const std::string& name, int flags, const std::string& failure) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(name.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    close_quietly(db);
    throw InvalidArgument(failure + ": " + msg);
  }
  sqlite3_extended_result_codes(db, 1);
  return db;
}

// The tables of schema version 1 (see the top of this file).
constexpr const char* kSchemaSql =
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "INSERT OR IGNORE INTO meta VALUES ('application', 'mongoelector');"
    "INSERT OR IGNORE INTO meta VALUES ('schema_version', '1');"
    "CREATE TABLE IF NOT EXISTS documents ("
    "  coll TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL,"
    "  key TEXT, ts INTEGER, PRIMARY KEY (coll, id)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS documents_key ON documents (coll, key, ts) "
    "  WHERE key IS NOT NULL;";

// Refuses a database that is not ours (another application's tables) or that a newer
// mongoelector wrote. False: the file has no tables yet.
bool check_ours(sqlite3* db, const std::string& path) {
  // A SQLite database of someone else: refuse to add our tables to it.
  bool has_tables = false, has_meta = false;
  {
    Stmt q(db, "SELECT name FROM sqlite_master WHERE type = 'table'", "schema");
    while (q.step()) {
      has_tables = true;
      if (q.text(0) == "meta") has_meta = true;
    }
  }
  if (has_tables && !has_meta) {
    throw InvalidArgument("SQLite database " + path +
                          " belongs to another application (it has tables but no "
                          "mongoelector `meta` table); use a file of its own for locks");
  }
  if (has_meta) {
    std::string app;
    std::optional<std::string> version;
    Stmt q(db, "SELECT name, value FROM meta", "schema");
    while (q.step()) {
      if (q.text(0) == "application") app = q.text(1);
      if (q.text(0) == "schema_version") version = q.text(1);
    }
    if (app != "mongoelector" || !version) {
      throw InvalidArgument("SQLite database " + path +
                            " belongs to another application (its meta table does not "
                            "name mongoelector); use a file of its own for locks");
    }
    char* end = nullptr;
    const long v = std::strtol(version->c_str(), &end, 10);
    if (end == version->c_str() || *end != '\0' || v < 1) {
      throw StorageError("SQLite database " + path + " has an unreadable schema version '" +
                         *version + "'");
    }
    if (v > SqliteClient::kSchemaVersion) {
      throw StorageError("SQLite database " + path +
                         " was written by a newer mongoelector "
                         "(schema version " +
                         *version + "; this version reads up to " +
                         std::to_string(SqliteClient::kSchemaVersion) +
                         "): upgrade mongoelector, or use another file");
    }
  }
  return has_meta;
}

// Our tables, in one transaction; refuses a database of another application or of a
// newer schema version.
void ensure_schema(sqlite3* db, const std::string& path) {
  Txn txn(db, "schema");
  check_ours(db, path);
  exec(db, kSchemaSql, "schema");
  txn.commit();
}

// Opens the file and makes sure it is ours: journal mode, schema.
sqlite3* open_database(const std::string& path) {
  // Clear errors for the usual mistakes before SQLite's terse "unable to open".
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw InvalidArgument("cannot open SQLite database " + path + ": directory " + dir +
                          " does not exist (" + std::strerror(errno) + "); create it first");
  }
  if (!S_ISDIR(st.st_mode))
    throw InvalidArgument("cannot open SQLite database " + path + ": " + dir +
                          " is not a directory");
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    throw InvalidArgument("cannot open SQLite database " + path + ": it is a directory");
  if (exists && !S_ISREG(st.st_mode))
    throw InvalidArgument("cannot open SQLite database " + path + ": not a regular file");
  if (exists && ::access(path.c_str(), R_OK | W_OK) != 0) {
    throw InvalidArgument("cannot open SQLite database " + path +
                          ": the file is not readable and writable by this user (" +
                          std::strerror(errno) + "); locks need write access");
  }
  if (!exists && ::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw InvalidArgument("cannot create SQLite database " + path + ": directory " + dir +
                          " is not writable (" + std::strerror(errno) + ")");
  }

  sqlite3* db = open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                "cannot open SQLite database " + path);
  try {
    if (sqlite3_db_readonly(db, "main") == 1) {
      throw InvalidArgument("SQLite database " + path +
                            " opened read-only (file or directory permissions); locks need "
                            "write access to the file and its directory");
    }
    sqlite3_busy_timeout(db, kOpenBusyTimeoutMs);
    auto fail_open = [&](const Error& e, int code) -> void {
      const int primary = code & 0xff;
      if (primary == SQLITE_NOTADB)
        throw InvalidArgument(path + " is not a SQLite database (or is encrypted): " + e.what());
      if (primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || primary == SQLITE_PERM ||
          primary == SQLITE_AUTH)
        throw InvalidArgument("cannot write SQLite database " + path +
                              " or create its -wal/-shm "
                              "files next to it (check permissions of the file and of " +
                              dir + "): " + e.what());
      if (primary == SQLITE_CORRUPT)
        throw InvalidArgument("SQLite database " + path + " is corrupt: " + e.what());
    };
    // Processes that open a new file at the same moment meet each other here: switching
    // the journal mode takes an exclusive lock that SQLite does not wait for (busy at
    // once, or the old mode returned unchanged), and the schema waits for the write
    // lock. Each is retried until kOpenBusyTimeoutMs has passed.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kOpenBusyTimeoutMs);
    const auto retry = [&](int attempt) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt % 20));
      return true;
    };
    try {
      // WAL: readers never block the writer, and a commit is one append to the WAL.
      // (A database on a network file system cannot use WAL: refused here, as it should.)
      for (int attempt = 0;; ++attempt) {
        std::string mode;
        try {
          Stmt wal(db, "PRAGMA journal_mode = WAL", "PRAGMA journal_mode");
          mode = wal.step() ? wal.text(0) : "";
        } catch (const StorageUnavailable&) {
          if (retry(attempt)) continue;
          throw;
        }
        if (mode == "wal") break;
        if (retry(attempt)) continue;
        throw InvalidArgument("SQLite database " + path + " cannot use WAL journal mode (got '" +
                              mode + "'); is it on a network file system?");
      }
      exec(db, "PRAGMA synchronous = FULL", "PRAGMA synchronous");
      for (int attempt = 0;; ++attempt) {
        try {
          ensure_schema(db, path);
          break;
        } catch (const StorageUnavailable&) {
          if (!retry(attempt)) throw;
        }
      }
    } catch (const StorageError& e) {
      fail_open(e, e.code());
      throw;
    } catch (const StorageUnavailable& e) {
      throw StorageUnavailable(std::string("opening SQLite database ") + path + ": " + e.what(),
                               e.detail());
    }
  } catch (...) {
    close_quietly(db);
    throw;
  }
  return db;
}

// A database with our tables and no rows that refuses writes: what a read-only client
// reads when the file does not exist yet (nothing was ever locked there).
sqlite3* open_empty_database() {
  sqlite3* db = open_connection(":memory:", SQLITE_OPEN_READWRITE,
                                "cannot open an empty in-memory SQLite database");
  try {
    exec(db, kSchemaSql, "schema");
    exec(db, "PRAGMA query_only = ON", "PRAGMA query_only");
  } catch (...) {
    close_quietly(db);
    throw;
  }
  return db;
}

// Opens the file for reading only (`status`): no journal-mode change, no schema written,
// so it needs no write permission on the file. A file that does not exist (in a
// directory that does), or exists with no tables yet, reads as empty. Another
// application's database and a newer schema are refused as by open_database. (Reading a
// WAL file needs its -shm file, or a directory where SQLite may create it: SQLite's rule
// for read-only WAL readers.)
sqlite3* open_database_read_only(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    // A missing file in an existing directory: nothing was locked there yet. A missing
    // directory is more likely a mistyped path: said as such, as for read-write.
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
    struct stat dst {};
    if (err == ENOENT && ::stat(dir.c_str(), &dst) == 0 && S_ISDIR(dst.st_mode))
      return open_empty_database();
    if (err == ENOENT)
      throw InvalidArgument("cannot open SQLite database " + path + ": directory " + dir +
                            " does not exist");
    throw InvalidArgument("cannot open SQLite database " + path + ": " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode))
    throw InvalidArgument("cannot open SQLite database " + path + ": it is a directory");
  if (!S_ISREG(st.st_mode))
    throw InvalidArgument("cannot open SQLite database " + path + ": not a regular file");
  if (::access(path.c_str(), R_OK) != 0) {
    throw InvalidArgument("cannot read SQLite database " + path + " (" + std::strerror(errno) +
                          ")");
  }
  sqlite3* db = open_connection(path, SQLITE_OPEN_READONLY,
                                "cannot open SQLite database " + path + " for reading");
  try {
    sqlite3_busy_timeout(db, kOpenBusyTimeoutMs);
    bool ours = false;
    try {
      ours = check_ours(db, path);
    } catch (const StorageError& e) {
      const int primary = e.code() & 0xff;
      if (primary == SQLITE_NOTADB)
        throw InvalidArgument(path + " is not a SQLite database (or is encrypted): " + e.what());
      if (primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY)
        throw InvalidArgument("cannot read SQLite database " + path +
                              ": its -shm file is missing and " +
                              "SQLite may not create it next to the file (read access to a "
                              "database in WAL mode needs one of them): " +
                              e.what());
      throw;
    }
    if (!ours) {  // a new, empty file: nothing was ever locked in it
      close_quietly(db);
      db = nullptr;
      return open_empty_database();
    }
  } catch (...) {
    close_quietly(db);
    throw;
  }
  return db;
}

sqlite3* open_database(const std::string& path, bool read_only) {
  return read_only ? open_database_read_only(path) : open_database(path);
}
}  // namespace

// ------------------------------------------------------------------ client ------

struct SqliteClient::Impl {
  std::string path;
  std::timed_mutex mu;    // serialises the connection
  sqlite3* db = nullptr;  // guarded by mu
  long pid = 0;           // process that opened db
  bool read_only = false;
  // Server-time samples of every storage of this client (storage.h).
  std::shared_ptr<ClockSampleBoard> board = std::make_shared<ClockSampleBoard>();

  // The connection of this process (mu held). A fork's child must not use the parent's
  // connection (SQLite: "do not carry an open database across fork"): it opens its own
  // and leaves the parent's alone (closing it here could disturb the parent's locks).
  sqlite3* connection() {
    const long now = static_cast<long>(::getpid());
    if (now != pid) {
      db = open_database(path, read_only);
      pid = now;
    }
    return db;
  }
  ~Impl() {
    if (db != nullptr && pid == static_cast<long>(::getpid())) sqlite3_close_v2(db);
  }
};

std::string SqliteClient::path_from_uri(const std::string& uri) {
  const StorageUri parsed = parse_storage_uri(uri);
  if (parsed.backend != UriBackend::Sqlite)
    throw InvalidArgument("not a sqlite:// URI: " + redact_uri(uri));
  return parsed.path;
}

std::shared_ptr<SqliteClient> SqliteClient::open(const std::string& uri, ClientAccess access) {
  std::shared_ptr<SqliteClient> client(new SqliteClient());
  client->uri_ = uri;
  client->path_ = path_from_uri(uri);
  client->impl_ = std::make_unique<Impl>();
  client->impl_->path = client->path_;
  client->impl_->read_only = access == ClientAccess::ReadOnly;
  client->impl_->db = open_database(client->path_, client->impl_->read_only);
  client->impl_->pid = static_cast<long>(::getpid());
  return client;
}

SqliteClient::~SqliteClient() = default;

std::shared_ptr<Storage> SqliteClient::open_storage(std::int64_t op_timeout_ms) {
  return std::make_shared<SqliteStorage>(shared_from_this(), op_timeout_ms);
}

// ------------------------------------------------------------------ storage -----

SqliteStorage::SqliteStorage(std::shared_ptr<SqliteClient> client, std::int64_t op_timeout_ms)
    : client_(std::move(client)), op_timeout_ms_(op_timeout_ms) {
  if (!client_) throw InvalidArgument("client must not be null");
  if (op_timeout_ms < 2 || op_timeout_ms > (std::int64_t{1} << 30)) {
    throw InvalidArgument("op_timeout_ms must be between 2 and 2^30, got " +
                          std::to_string(op_timeout_ms));
  }
}

SqliteStorage::~SqliteStorage() = default;

std::int64_t SqliteStorage::call_bound_ms() const { return op_timeout_ms_ + kCallMarginMs; }

// One call: the client's connection within half the budget, then `body(db)` with a busy
// timeout of the other half.
template <class F>
auto SqliteStorage::call(const char* op, F&& body) {
  ++round_trips_;
  metrics::record_round_trip();
  auto& impl = client_->impl();
  const std::int64_t half = std::max<std::int64_t>(1, op_timeout_ms_ / 2);
  std::unique_lock<std::timed_mutex> lock(impl.mu, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::milliseconds(half))) {
    throw WriteLockBusy(std::string("SQLite ") + op + " on " + client_->path() +
                        ": the connection stayed busy with another call for " +
                        std::to_string(half) + " ms");
  }
  sqlite3* db = impl.connection();
  sqlite3_busy_timeout(db, static_cast<int>(op_timeout_ms_ - half));
  return body(db);
}

ServerInfo SqliteStorage::server_info() {
  ++round_trips_;
  metrics::record_round_trip();
  return ServerInfo{"SQLite", sqlite3_libversion(), true};
}

std::int64_t SqliteStorage::server_time_ms() {
  ++round_trips_;
  metrics::record_round_trip();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SqliteStorage::ensure_lock_indexes(const std::string& collection) {
  check_collection_name(collection);
  ++round_trips_;
  metrics::record_round_trip();
}

void SqliteStorage::ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) {
  check_collection_name(collection);
  if (ttl_s < 0) throw InvalidArgument("status TTL must not be negative");
  ++round_trips_;
  metrics::record_round_trip();
  std::lock_guard<std::mutex> g(ttl_mu_);
  status_ttl_s_[collection] = ttl_s;
}

std::optional<LockDoc> SqliteStorage::claim(const std::string& collection, const LockClaim& c,
                                            bool force) {
  return claim_row(collection, c, force ? Claim::force : Claim::free);
}

std::optional<LockDoc> SqliteStorage::insert_claim(const std::string& collection,
                                                   const LockClaim& c) {
  return claim_row(collection, c, Claim::absent);
}

std::optional<LockDoc> SqliteStorage::claim_row(const std::string& collection, const LockClaim& c,
                                                Claim mode) {
  check_collection_name(collection);
  const std::string id = id_of_key(c.key);
  for (const auto* s : {&c.uuid, &c.host}) {
    if (!is_valid_utf8(*s)) throw InvalidArgument("claim field is not valid UTF-8");
  }
  // Not taken this time when another writer kept the database past the busy timeout
  // (nothing was written): a blocking acquire tries again, as when the lock is held.
  try {
    return call("claim", [&](sqlite3* db) -> std::optional<LockDoc> {
      const std::string what = "claim " + c.key;
      Txn txn(db, what);
      std::optional<Document> cur = load(db, collection, id, what);
      std::int64_t fence = 0;
      if (cur) {
        if (mode == Claim::absent) return std::nullopt;  // insert_claim: the duplicate key
        // Not held: the negation of LockDoc::held_at, as the MongoDB filter.
        if (mode == Claim::free && LockDoc::from_document(*cur).held_at(c.now_ms))
          return std::nullopt;
        if (const Value* f = cur->get("fence")) {
          auto n = numeric(*cur, "fence");
          if (!n) {
            // MongoDB: "Cannot apply $inc to a value of non-numeric type" (TypeMismatch).
            (void)f;
            throw StorageError("claim " + c.key + ": cannot increment a fence that is not a number",
                               14);
          }
          fence = *n;
        }
      }
      if (fence == std::numeric_limits<std::int64_t>::max())
        throw StorageError("claim: increment of fence would overflow a 64-bit integer");
      Document doc = cur ? *cur : Document{{"_id", c.key}};
      c.apply_to(doc, fence + 1);
      store(db, collection, id, doc, what);
      txn.commit();
      return LockDoc::from_document(doc);
    });
  } catch (const WriteLockBusy&) {
    return std::nullopt;
  }
}

std::int64_t SqliteStorage::bump_epoch(const std::string& collection, const std::string& key) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  const std::string fences = collection + ".fences";
  return call("bump_epoch", [&](sqlite3* db) {
    const std::string what = "epoch of " + key;
    Txn txn(db, what);
    std::optional<Document> cur = load(db, fences, id, what);
    std::int64_t epoch = 0;
    if (cur && cur->has("epoch")) {
      auto n = numeric(*cur, "epoch");
      if (!n) throw StorageError(what + ": stored epoch is not a number", 14);
      epoch = *n;
    }
    if (epoch == std::numeric_limits<std::int64_t>::max())
      throw StorageError(what + ": increment would overflow a 64-bit integer");
    Document doc = cur ? *cur : Document{{"_id", key}};
    doc.set("epoch", epoch + 1);
    store(db, fences, id, doc, what);
    txn.commit();
    return epoch + 1;
  });
}

bool SqliteStorage::set_fence(const std::string& collection, const std::string& key,
                              const std::string& uuid, std::int64_t old_fence,
                              std::int64_t created_ms, std::int64_t new_fence) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  return call("set_fence", [&](sqlite3* db) {
    const std::string what = "set_fence " + key;
    Txn txn(db, what);
    std::optional<Document> cur = load(db, collection, id, what);
    if (!cur || !set_fence_on(*cur, uuid, old_fence, created_ms, new_fence)) return false;
    store(db, collection, id, *cur, what);
    txn.commit();
    return true;
  });
}

namespace {
// One renewal inside an open transaction: RenewRequest::apply_to (renew()'s filter, then
// the monotonic write, or set_expiry's exact one), stored only when it changed
// something. True if it matched.
bool renew_in_txn(sqlite3* db, const std::string& collection, const std::string& id,
                  const RenewRequest& r, std::int64_t now_ms, const std::string& what,
                  bool exact = false) {
  std::optional<Document> cur = load(db, collection, id, what);
  if (!cur) return false;
  const Document before = *cur;
  if (!r.apply_to(*cur, now_ms, exact)) return false;
  if (!(*cur == before)) store(db, collection, id, *cur, what);
  return true;
}
}  // namespace

bool SqliteStorage::renew(const std::string& collection, const std::string& key,
                          const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                          std::int64_t expire_ms) {
  return write_expiry("renew", collection, RenewRequest{key, uuid, fence, expire_ms}, now_ms,
                      /*exact=*/false);
}

bool SqliteStorage::set_expiry(const std::string& collection, const std::string& key,
                               const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                               std::int64_t expire_ms, std::int64_t created_ms) {
  return write_expiry("set_expiry", collection,
                      RenewRequest{key, uuid, fence, expire_ms, created_ms}, now_ms,
                      /*exact=*/true);
}

bool SqliteStorage::write_expiry(const char* op, const std::string& collection,
                                 const RenewRequest& r, std::int64_t now_ms, bool exact) {
  check_collection_name(collection);
  const std::string id = id_of_key(r.key);
  return call(op, [&](sqlite3* db) {
    const std::string what = std::string(op) + " " + r.key;
    Txn txn(db, what);
    if (!renew_in_txn(db, collection, id, r, now_ms, what, exact)) return false;
    txn.commit();
    return true;
  });
}

std::vector<bool> SqliteStorage::renew_many(const std::string& collection,
                                            const std::vector<RenewRequest>& requests,
                                            std::int64_t now_ms) {
  check_collection_name(collection);
  std::vector<std::string> ids;  // InvalidArgument before the call
  ids.reserve(requests.size());
  for (const RenewRequest& r : requests) ids.push_back(id_of_key(r.key));
  if (requests.empty()) return {};
  return call("renew_many", [&](sqlite3* db) {
    const std::string what = "renew_many";
    Txn txn(db, what);
    std::vector<bool> renewed;
    renewed.reserve(requests.size());
    bool any = false;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      renewed.push_back(renew_in_txn(db, collection, ids[i], requests[i], now_ms, what));
      any = any || renewed.back();
    }
    // Nothing written: the rollback of the destructor ends it without a WAL commit.
    if (any) txn.commit();
    return renewed;
  });
}

const void* SqliteStorage::batch_domain() const { return client_.get(); }

std::shared_ptr<ClockSampleBoard> SqliteStorage::clock_sample_board() {
  return client_->impl().board;
}

bool SqliteStorage::release(const std::string& collection, const std::string& key,
                            const std::optional<std::string>& uuid, std::int64_t fence,
                            std::int64_t now_ms, bool delete_document) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  return call("release", [&](sqlite3* db) {
    const std::string what = "release " + key;
    Txn txn(db, what);
    std::optional<Document> cur = load(db, collection, id, what);
    if (!cur) return false;
    if (uuid) {
      // Names the hold (uuid AND fence): a late release cannot free a newer hold.
      if (!string_equals(*cur, "uuid", *uuid)) return false;
      if (fence != 0 && numeric(*cur, "fence") != fence) return false;
    }
    if (delete_document) {
      remove(db, collection, id, what);  // "<collection>.fences" is left alone
    } else {
      cur->set("locked", false);
      cur->set("ts_expire", DateTime{now_ms});
      store(db, collection, id, *cur, what);
    }
    txn.commit();
    return true;
  });
}

std::optional<LockDoc> SqliteStorage::read(const std::string& collection, const std::string& key) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  return call("read", [&](sqlite3* db) -> std::optional<LockDoc> {
    // One statement: a consistent snapshot without taking the write lock.
    auto doc = load(db, collection, id, "read " + key);
    if (!doc) return std::nullopt;
    return LockDoc::from_document(*doc);
  });
}

std::vector<std::optional<LockDoc>> SqliteStorage::read_many(const std::string& collection,
                                                             const std::vector<std::string>& keys) {
  check_collection_name(collection);
  std::vector<std::string> ids;  // InvalidArgument before the call
  ids.reserve(keys.size());
  for (const std::string& k : keys) ids.push_back(id_of_key(k));
  if (keys.empty()) return {};
  return call("read_many", [&](sqlite3* db) {
    // One read transaction: one consistent snapshot of every key, no write lock.
    exec(db, "BEGIN DEFERRED", "read_many (BEGIN)");
    std::vector<std::optional<LockDoc>> docs;
    try {
      docs.reserve(keys.size());
      for (std::size_t i = 0; i < ids.size(); ++i) {
        auto doc = load(db, collection, ids[i], "read " + keys[i]);
        docs.push_back(doc ? std::optional<LockDoc>(LockDoc::from_document(*doc)) : std::nullopt);
      }
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    exec(db, "COMMIT", "read_many (COMMIT)");
    return docs;
  });
}

void SqliteStorage::put_document(const std::string& collection, const Document& doc) {
  check_collection_name(collection);
  const Value* idv = doc.get("_id");
  if (idv == nullptr) throw InvalidArgument("document has no _id");
  const std::string id = document_json::encode_value(*idv);
  (void)document_json::encode(doc);  // InvalidArgument before the call
  call("put_document", [&](sqlite3* db) {
    Txn txn(db, "put_document");
    store(db, collection, id, doc, "put_document");
    txn.commit();
    return true;
  });
}

void SqliteStorage::put_status(const std::string& collection, const Document& doc) {
  check_collection_name(collection);
  const Value* idv = doc.get("_id");
  if (idv == nullptr) throw InvalidArgument("status document has no _id");
  const std::string id = document_json::encode_value(*idv);
  (void)document_json::encode(doc);  // InvalidArgument before the call
  std::optional<std::int64_t> ttl_s;
  {
    std::lock_guard<std::mutex> g(ttl_mu_);
    auto it = status_ttl_s_.find(collection);
    if (it != status_ttl_s_.end()) ttl_s = it->second;
  }
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  call("put_status", [&](sqlite3* db) {
    Txn txn(db, "put_status");
    store(db, collection, id, doc, "put_status");
    if (ttl_s && *ttl_s < (std::int64_t{1} << 40)) {
      // What MongoDB's TTL monitor would have removed by now (expireAfterSeconds).
      Stmt d(db, "DELETE FROM documents WHERE coll = ?1 AND ts IS NOT NULL AND ts < ?2",
             "put_status (expired status)");
      d.bind(1, collection).bind(2, now - *ttl_s * 1000);
      d.step();
    }
    txn.commit();
    return true;
  });
}

std::vector<Document> SqliteStorage::list_status(const std::string& collection,
                                                 const std::string& key) {
  check_collection_name(collection);
  if (!is_valid_utf8(key)) throw InvalidArgument("key is not valid UTF-8");
  return call("list_status", [&](sqlite3* db) {
    // Newest first; documents without a date timestamp last (as MongoDB sorts them).
    Stmt q(db, "SELECT doc FROM documents WHERE coll = ?1 AND key = ?2 ORDER BY ts DESC, id",
           "list_status " + key);
    q.bind(1, collection).bind(2, key);
    std::vector<Document> out;
    while (q.step()) out.push_back(document_json::decode(q.text(0), "status document"));
    return out;
  });
}

// ------------------------------------------------------------------ semaphores --

namespace {
void check_semaphore_strings(const SemaphoreClaim& c) {
  for (const auto* s : {&c.uuid, &c.host}) {
    if (!is_valid_utf8(*s)) throw InvalidArgument("semaphore claim field is not valid UTF-8");
  }
}
}  // namespace

std::optional<SemaphoreDoc> SqliteStorage::read_semaphore(const std::string& collection,
                                                          const std::string& key) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  return call("read_semaphore", [&](sqlite3* db) -> std::optional<SemaphoreDoc> {
    auto doc = load(db, collection, id, "read_semaphore " + key);  // one statement
    if (!doc) return std::nullopt;
    return semaphore_doc::from_flat(*doc);
  });
}

bool SqliteStorage::create_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  check_collection_name(collection);
  const std::string id = id_of_key(c.key);
  check_semaphore_strings(c);
  const Document flat = semaphore_doc::to_flat(semaphore_doc::created_doc(c));
  try {  // busy: not created this time, as claim()
    return call("create_semaphore", [&](sqlite3* db) {
      const std::string what = "create_semaphore " + c.key;
      Txn txn(db, what);
      if (load(db, collection, id, what)) return false;  // MongoDB: E11000
      store(db, collection, id, flat, what);
      txn.commit();
      return true;
    });
  } catch (const WriteLockBusy&) {
    return false;
  }
}

bool SqliteStorage::claim_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  check_collection_name(collection);
  const std::string id = id_of_key(c.key);
  check_semaphore_strings(c);
  try {  // busy: not taken this time, as claim()
    return call("claim_semaphore", [&](sqlite3* db) {
      const std::string what = "claim_semaphore " + c.key;
      Txn txn(db, what);
      std::optional<Document> cur = load(db, collection, id, what);
      if (!cur) return false;
      // {_id, limit, fence: old_fence, "slots.<i>.ts_expire": {$not: {$gt: now}}}
      if (numeric(*cur, "limit") != c.limit || numeric(*cur, "fence") != c.old_fence) return false;
      SemaphoreDoc doc = semaphore_doc::from_flat(*cur);
      doc.key = c.key;
      doc.limit = c.limit;  // as compared numerically above
      doc.fence = c.old_fence;
      if (!semaphore_doc::apply_claim(doc, c)) return false;  // the slots' part of the filter
      store(db, collection, id, semaphore_doc::to_flat(doc), what);
      txn.commit();
      return true;
    });
  } catch (const WriteLockBusy&) {
    return false;
  }
}

bool SqliteStorage::renew_semaphore(const std::string& collection, const std::string& key,
                                    std::int64_t slot, const std::string& uuid, std::int64_t fence,
                                    std::int64_t now_ms, std::int64_t expire_ms) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  return call("renew_semaphore", [&](sqlite3* db) {
    const std::string what = "renew_semaphore " + key;
    Txn txn(db, what);
    std::optional<Document> cur = load(db, collection, id, what);
    if (!cur) return false;
    SemaphoreDoc doc = semaphore_doc::from_flat(*cur);
    doc.key = key;
    if (!semaphore_doc::renew_slot(doc, slot, uuid, fence, now_ms, expire_ms)) return false;
    store(db, collection, id, semaphore_doc::to_flat(doc), what);
    txn.commit();
    return true;
  });
}

// One transaction for the whole batch; each document loaded and stored once.
std::vector<bool> SqliteStorage::renew_semaphores(
    const std::string& collection, const std::vector<SemaphoreRenewRequest>& requests,
    std::int64_t now_ms) {
  check_collection_name(collection);
  std::vector<std::string> ids;  // InvalidArgument before the call
  ids.reserve(requests.size());
  for (const SemaphoreRenewRequest& r : requests) ids.push_back(id_of_key(r.key));
  if (requests.empty()) return {};
  return call("renew_semaphores", [&](sqlite3* db) {
    const std::string what = "renew_semaphores";
    Txn txn(db, what);
    std::vector<bool> renewed(requests.size(), false);
    std::map<std::string, std::optional<SemaphoreDoc>> docs;  // by id, as loaded
    std::map<std::string, bool> changed;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const SemaphoreRenewRequest& r = requests[i];
      auto it = docs.find(ids[i]);
      if (it == docs.end()) {
        std::optional<SemaphoreDoc> doc;
        if (std::optional<Document> cur = load(db, collection, ids[i], what)) {
          doc = semaphore_doc::from_flat(*cur);
          doc->key = r.key;
        }
        it = docs.emplace(ids[i], std::move(doc)).first;
      }
      if (!it->second) continue;
      renewed[i] =
          semaphore_doc::renew_slot(*it->second, r.slot, r.uuid, r.fence, now_ms, r.expire_ms);
      if (renewed[i]) changed[ids[i]] = true;
    }
    // Nothing written: the rollback of the destructor ends it without a WAL commit.
    if (changed.empty()) return renewed;
    for (const auto& [id, yes] : changed)
      store(db, collection, id, semaphore_doc::to_flat(*docs[id]), what);
    txn.commit();
    return renewed;
  });
}

bool SqliteStorage::release_semaphore(const std::string& collection, const std::string& key,
                                      std::int64_t slot, const std::string& uuid,
                                      std::int64_t fence) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  return call("release_semaphore", [&](sqlite3* db) {
    const std::string what = "release_semaphore " + key;
    Txn txn(db, what);
    std::optional<Document> cur = load(db, collection, id, what);
    if (!cur) return false;
    SemaphoreDoc doc = semaphore_doc::from_flat(*cur);
    doc.key = key;
    if (slot < 0 || slot >= static_cast<std::int64_t>(doc.slots.size())) return false;
    auto& s = doc.slots[static_cast<std::size_t>(slot)];
    if (s.uuid != uuid || s.fence != fence) return false;
    s = semaphore_doc::empty_slot();
    store(db, collection, id, semaphore_doc::to_flat(doc), what);
    txn.commit();
    return true;
  });
}

}  // namespace mongoelector

namespace mongoelector {

// Graceful handover: renew()'s read-decide-write, then the lock changes hands.
bool SqliteStorage::hand_over(const std::string& collection, const HandOver& h) {
  check_collection_name(collection);
  const std::string id = id_of_key(h.key);
  if (!is_valid_utf8(h.to_uuid) || !is_valid_utf8(h.to_host))
    throw InvalidArgument("hand-over target is not valid UTF-8");
  return call("hand_over", [&](sqlite3* db) {
    const std::string what = "hand over " + h.key;
    Txn txn(db, what);
    std::optional<Document> doc = load(db, collection, id, what);
    if (!doc || !h.apply_to(*doc)) return false;
    store(db, collection, id, *doc, what);
    txn.commit();
    return true;
  });
}

}  // namespace mongoelector

namespace mongoelector {

bool SqliteStorage::set_payload(const std::string& collection, const PayloadWrite& w) {
  check_collection_name(collection);
  const std::string id = id_of_key(w.key);
  if (w.json && !is_valid_utf8(*w.json)) throw InvalidArgument("payload is not valid UTF-8");
  return call("set_payload", [&](sqlite3* db) {
    const std::string what = "payload of " + w.key;
    Txn txn(db, what);
    std::optional<Document> doc = load(db, collection, id, what);
    if (!doc || !w.apply_to(*doc)) return false;
    store(db, collection, id, *doc, what);
    txn.commit();
    return true;
  });
}

bool SqliteStorage::edit_semaphore(const char* op, const std::string& collection,
                                   const std::string& key,
                                   const std::function<bool(SemaphoreDoc&)>& edit) {
  check_collection_name(collection);
  const std::string id = id_of_key(key);
  return call(op, [&](sqlite3* db) {
    const std::string what = std::string(op) + " " + key;
    Txn txn(db, what);
    std::optional<Document> cur = load(db, collection, id, what);
    if (!cur) return false;
    SemaphoreDoc doc = semaphore_doc::from_flat(*cur);
    doc.key = key;
    if (!edit(doc)) return false;
    store(db, collection, id, semaphore_doc::to_flat(doc), what);
    txn.commit();
    return true;
  });
}

bool SqliteStorage::renew_queue_entry(const std::string& collection, const std::string& key,
                                      std::int64_t index, const std::string& uuid,
                                      std::int64_t ticket, std::int64_t now_ms,
                                      std::int64_t expire_ms) {
  return edit_semaphore("renew_queue_entry", collection, key, [&](SemaphoreDoc& doc) {
    return semaphore_doc::renew_queue_entry(doc, index, uuid, ticket, now_ms, expire_ms);
  });
}

bool SqliteStorage::leave_queue(const std::string& collection, const std::string& key,
                                const std::string& uuid, std::int64_t ticket) {
  return edit_semaphore("leave_queue", collection, key, [&](SemaphoreDoc& doc) {
    return semaphore_doc::leave_queue(doc, uuid, ticket);
  });
}

}  // namespace mongoelector
