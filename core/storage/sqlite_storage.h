// The embedded backend: locks in one SQLite file, for processes on ONE host (cron jobs,
// shell scripts, tests, demos; no server to run). URI: sqlite:///absolute/path/locks.db
//
// Semantics are those of the MongoDB backend (storage.h), operation by operation, and
// the same storage conformance suite checks both (tests/storage):
//  - claim() is ONE `BEGIN IMMEDIATE` transaction: read the row, decide (absent,
//    released or expired at claim.now_ms -- the negation of LockDoc::held_at -- or
//    forced), write, commit. BEGIN IMMEDIATE takes the database's write lock before
//    the read, so two processes can never both decide "free" (invariant 1: atomic
//    acquire). renew/release/set_fence/bump_epoch are read-decide-write transactions
//    of the same kind; every write that assumes a hold names it (uuid AND fence).
//  - Fencing (invariant 2): the lock row's `fence` is incremented by every claim, as
//    MongoDB's $inc; deleting the row (release with delete, as an original node does)
//    restarts it, so Locker::anchor_epoch moves the hold to a fresh epoch kept in the
//    "<collection>.fences" rows, which nothing but bump_epoch ever writes and nothing
//    deletes: that collection is the per-key high-water mark that survives deletion.
//    (We implement bump_epoch/set_fence faithfully rather than inventing tokens >= 2^32
//    here, so the one conformance suite holds for both backends unchanged.)
//  - Time base: server_time_ms() is this host's wall clock. Every process using the file
//    runs on this host, so all of them compare expiries on one clock; intervals (the
//    lease, the renew deadline) are measured on the monotonic clock by the Locker and
//    Elector as with MongoDB. A file on a network file system shared by several hosts
//    is NOT supported (their clocks differ, and SQLite's locking is unreliable there).
//  - No TTL deletion of lock rows (not needed: claim takes over expired rows, and keeping
//    the row keeps its fence). Status rows older than the ttl given to
//    ensure_status_indexes are deleted by put_status, like MongoDB's TTL monitor.
//
// Many processes, one file: WAL journal mode (readers never block the writer), a busy
// timeout on every call, short transactions (no I/O but SQLite's own inside them).
// synchronous=FULL: a process killed with -9 mid-transaction loses nothing with NORMAL
// either (the transaction rolls back, committed ones stay); but after a POWER LOSS,
// NORMAL may drop the last commits, and a dropped claim would let its fence token be
// handed out twice (invariant 2). FULL syncs the WAL at every commit; lock traffic is a
// few commits per ttl per key, so its cost does not matter here.
//
// Threads: one SQLite connection per SqliteClient (per URI in the C API and Python),
// opened SQLITE_OPEN_NOMUTEX and serialised by the client's own timed mutex. One
// connection per client, not per storage, keeps file descriptors constant in the number
// of keys; our mutex (rather than SQLITE_OPEN_FULLMUTEX) lets a call give up within its
// budget when another thread's call is waiting for the write lock.
//
// Errors: bad URI or unusable file at open() (missing directory, read-only file or
// directory, not a SQLite database, a database of another application) ->
// InvalidArgument; a database written by a newer schema version -> StorageError; the
// write lock not obtained within the busy timeout -> StorageUnavailable, except for the
// claims (claim, create_semaphore, claim_semaphore), which wrote nothing then and answer
// "not taken" as for a held lock, so an acquire retries until its own timeout; any
// other SQLite failure -> StorageError(message, SQLite's extended result code). Opening
// retries the journal-mode switch and the schema for up to 5 s (processes creating one
// new file at once).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "client.h"
#include "storage.h"

namespace mongoelector {

class SqliteClient final : public StorageClient, public std::enable_shared_from_this<SqliteClient> {
 public:
  // Schema of the file (table `meta`, row schema_version). A file with a larger version
  // was written by a newer mongoelector: refused with a StorageError.
  static constexpr int kSchemaVersion = 1;

  // sqlite:///absolute/path (percent-escapes decoded; no query options). Opens the
  // file, creating it and its tables when absent. Throws as described above.
  // ReadOnly: opens an existing file without writing to it (no journal-mode change, no
  // schema; the file need not be writable) and refuses writes; a file that does not exist
  // reads as empty and is not created.
  static std::shared_ptr<SqliteClient> open(const std::string& uri,
                                            ClientAccess access = ClientAccess::ReadWrite);
  // The path a sqlite:// URI names (InvalidArgument if it is not one).
  static std::string path_from_uri(const std::string& uri);
  ~SqliteClient() override;
  SqliteClient(const SqliteClient&) = delete;
  SqliteClient& operator=(const SqliteClient&) = delete;

  // A SqliteStorage whose calls wait at most op_timeout_ms/2 for this client's
  // connection and op_timeout_ms/2 for the database's write lock.
  std::shared_ptr<Storage> open_storage(std::int64_t op_timeout_ms) override;
  const char* backend() const override { return "sqlite"; }
  const std::string& uri() const override { return uri_; }
  const std::string& database() const override { return database_; }  // always ""
  const std::string& path() const { return path_; }

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  SqliteClient() = default;
  std::string uri_, path_, database_;
  std::unique_ptr<Impl> impl_;
};

class SqliteStorage final : public Storage {
 public:
  // Margin of call_bound_ms over the two waits: the transaction itself (a few page
  // reads and writes and one WAL fsync on a healthy disk).
  static constexpr std::int64_t kCallMarginMs = 50;

  SqliteStorage(std::shared_ptr<SqliteClient> client, std::int64_t op_timeout_ms);
  ~SqliteStorage() override;

  // Calls made so far (one transaction or statement each), like MongoStorage's commands.
  std::int64_t round_trips() const { return round_trips_.load(); }
  // Writes a document as it is (tests and tools: a document in the original's schema,
  // odd field types). Replaces the one with the same _id.
  void put_document(const std::string& collection, const Document& doc);

  // op_timeout_ms (connection wait + busy timeout) + kCallMarginMs.
  std::int64_t call_bound_ms() const override;
  ServerInfo server_info() override;       // {"SQLite", sqlite3_libversion(), atomic}
  std::int64_t server_time_ms() override;  // the host's wall clock (see above)
  void ensure_lock_indexes(const std::string& collection) override;  // nothing to do
  std::optional<LockDoc> claim(const std::string& collection, const LockClaim& claim,
                               bool force) override;
  // claim() restricted to an absent row: the same transaction, nothing written when the
  // row exists.
  std::optional<LockDoc> insert_claim(const std::string& collection,
                                      const LockClaim& claim) override;
  std::int64_t bump_epoch(const std::string& collection, const std::string& key) override;
  bool set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                 std::int64_t old_fence, std::int64_t created_ms, std::int64_t new_fence) override;
  bool renew(const std::string& collection, const std::string& key, const std::string& uuid,
             std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) override;
  // ONE `BEGIN IMMEDIATE` transaction: renew()'s read-decide-write for each request.
  std::vector<bool> renew_many(const std::string& collection,
                               const std::vector<RenewRequest>& requests,
                               std::int64_t now_ms) override;
  bool set_expiry(const std::string& collection, const std::string& key, const std::string& uuid,
                  std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms,
                  std::int64_t created_ms) override;
  // Shared by every storage of the same SqliteClient (one connection).
  const void* batch_domain() const override;
  std::shared_ptr<ClockSampleBoard> clock_sample_board() override;
  bool release(const std::string& collection, const std::string& key,
               const std::optional<std::string>& uuid, std::int64_t fence, std::int64_t now_ms,
               bool delete_document) override;
  std::optional<LockDoc> read(const std::string& collection, const std::string& key) override;
  std::vector<std::optional<LockDoc>> read_many(const std::string& collection,
                                                const std::vector<std::string>& keys) override;
  // Semaphores (storage.h): each operation is ONE `BEGIN IMMEDIATE` transaction, read -
  // decide - write, as claim(). The document is a row of `documents` in the flat form of
  // semaphore_doc.h ({_id, limit, fence, "slots.<i>.<field>"...}).
  std::optional<SemaphoreDoc> read_semaphore(const std::string& collection,
                                             const std::string& key) override;
  bool create_semaphore(const std::string& collection, const SemaphoreClaim& claim) override;
  bool claim_semaphore(const std::string& collection, const SemaphoreClaim& claim) override;
  std::vector<bool> renew_semaphores(const std::string& collection,
                                     const std::vector<SemaphoreRenewRequest>& requests,
                                     std::int64_t now_ms) override;
  bool renew_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                       const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                       std::int64_t expire_ms) override;
  bool release_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                         const std::string& uuid, std::int64_t fence) override;
  bool renew_queue_entry(const std::string& collection, const std::string& key, std::int64_t index,
                         const std::string& uuid, std::int64_t ticket, std::int64_t now_ms,
                         std::int64_t expire_ms) override;
  bool leave_queue(const std::string& collection, const std::string& key, const std::string& uuid,
                   std::int64_t ticket) override;
  // Remembers ttl_s for the collection: put_status then deletes older status rows.
  void ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) override;
  void put_status(const std::string& collection, const Document& doc) override;
  std::vector<Document> list_status(const std::string& collection, const std::string& key) override;

 private:
  template <class F>
  auto call(const char* op, F&& body);
  // claim (free: absent, released or expired; force: any) and insert_claim (absent).
  enum class Claim : std::uint8_t { free, force, absent };
  std::optional<LockDoc> claim_row(const std::string& collection, const LockClaim& c, Claim mode);
  // renew() (monotonic) or, `exact`, set_expiry(): one transaction.
  bool write_expiry(const char* op, const std::string& collection, const RenewRequest& r,
                    std::int64_t now_ms, bool exact);
  // One transaction: loads the semaphore document of `key`, applies `edit`, stores it
  // when `edit` says it matched.
  bool edit_semaphore(const char* op, const std::string& collection, const std::string& key,
                      const std::function<bool(SemaphoreDoc&)>& edit);

  std::shared_ptr<SqliteClient> client_;
  std::int64_t op_timeout_ms_;
  std::atomic<std::int64_t> round_trips_{0};
  std::mutex ttl_mu_;
  std::map<std::string, std::int64_t> status_ttl_s_;  // by collection

 public:
  // Graceful handover (Storage::hand_over): one `BEGIN IMMEDIATE` read-decide-write.
  bool hand_over(const std::string& collection, const HandOver& h) override;
  // The leader's payload (Storage::set_payload): one conditional update.
  bool set_payload(const std::string& collection, const PayloadWrite& w) override;
};

}  // namespace mongoelector
