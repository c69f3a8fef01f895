// Storage backend that talks to MongoDB THROUGH the user's pymongo Database (or a
// mongomock database, or any lookalike): whatever the user configured on their
// MongoClient (auth, TLS, replica set, read/write concern, listeners) applies.
//
// Every call takes the GIL for the Python call only (the core releases nothing of its
// own while calling us). Python exceptions (pymongo's) propagate unchanged as
// py::error_already_set: the Python caller gets the same exception object; on the
// elector thread the core logs them.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "storage/commands.h"
#include "storage/storage.h"

namespace mongoelector_py {

namespace py = pybind11;

// What one pymongo client's deployment is, learnt by the first storage that asks and
// shared by every storage made for that client (python/mongoelector/_transport.py keeps
// one per MongoClient): a new locker then does not ask the server again. (Indexes are
// not remembered here: the drop-in ensures them at every construction, as the original
// does, so that a dropped collection or a conflicting index is mended.)
struct ServerFacts {
  std::mutex mu;
  std::optional<mongoelector::ServerInfo> info;
  int time_command = 0;
};

class PyMongoStorage final : public mongoelector::Storage {
 public:
  // op_timeout_s: CSOT budget (pymongo.timeout) for each call when `db` is a real
  // pymongo Database (setup_timeout_ms of it for setup calls); <= 0 disables it. facts:
  // shared with the client's other storages (none: this storage learns alone). Needs
  // the GIL.
  PyMongoStorage(py::object db, double op_timeout_s, std::shared_ptr<ServerFacts> facts = {});
  ~PyMongoStorage() override;

  PyMongoStorage(const PyMongoStorage&) = delete;
  PyMongoStorage& operator=(const PyMongoStorage&) = delete;

  // mongomock (or a lookalike without server commands): the host clock is the server's.
  bool is_mock() const { return mock_.load(); }
  double op_timeout_s() const { return op_timeout_s_; }
  // How each call's client-side timeout is entered: "direct" (pymongo's context
  // variables), "pymongo.timeout", or "none" (no budget, mongomock or a lookalike).
  const char* timeout_scope() const;
  py::object db() const;  // needs the GIL

  // With pymongo.timeout (CSOT) a call fails within op_timeout, server selection and
  // retries included; without it (mongomock, lookalikes) no bound is known.
  std::int64_t call_bound_ms() const override;
  mongoelector::ServerInfo server_info() override;
  std::int64_t server_time_ms() override;
  void ensure_lock_indexes(const std::string& collection) override;
  std::optional<mongoelector::LockDoc> claim(const std::string& collection,
                                             const mongoelector::LockClaim& claim,
                                             bool force) override;
  std::optional<mongoelector::LockDoc> insert_claim(const std::string& collection,
                                                    const mongoelector::LockClaim& claim) override;
  std::int64_t bump_epoch(const std::string& collection, const std::string& key) override;
  bool set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                 std::int64_t old_fence, std::int64_t created_ms, std::int64_t new_fence) override;
  // update_one with {$max: {ts_expire}}: matched (matched_count) is renewed.
  bool renew(const std::string& collection, const std::string& key, const std::string& uuid,
             std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) override;
  // renew()'s filter with {$set: {ts_expire}}.
  bool set_expiry(const std::string& collection, const std::string& key, const std::string& uuid,
                  std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms,
                  std::int64_t created_ms) override;
  // Per chunk of max_renew_batch(): one update_many ($max) per distinct expire_ms and fence rule,
  // filtered by $in lists of keys, uuids and fences (renew_groups, core/storage/lock_storage.h),
  // then one find of the chunk's keys that decides each request (RenewRequest::renewed_by); all under one pymongo.timeout().
  // A collection without update_many (the aio facade) renews one by one.
  std::vector<bool> renew_many(const std::string& collection,
                               const std::vector<mongoelector::RenewRequest>& requests,
                               std::int64_t now_ms) override;
  // Smaller on FerretDB (Storage::renew_batch_for), once the server is known.
  std::size_t max_renew_batch() const override;
  // Shared by every PyMongoStorage on the same client object and database name.
  const void* batch_domain() const override;
  std::shared_ptr<mongoelector::ClockSampleBoard> clock_sample_board() override;
  bool release(const std::string& collection, const std::string& key,
               const std::optional<std::string>& uuid, std::int64_t fence, std::int64_t now_ms,
               bool delete_document) override;
  std::vector<std::optional<mongoelector::LockDoc>> read_many(
      const std::string& collection, const std::vector<std::string>& keys) override;
  std::optional<mongoelector::LockDoc> read(const std::string& collection,
                                            const std::string& key) override;
  // Semaphores (storage.h): find_one, insert_one (DuplicateKeyError -> false), and
  // update_one with a compare-and-set filter on {limit, fence, "slots.<i>.ts_expire"}
  // (claim) or naming {"slots.<i>.uuid", "slots.<i>.fence"} (renew, release): one call
  // each. Slots are addressed by index: mongomock resolves the positional `$` wrongly.
  std::optional<mongoelector::SemaphoreDoc> read_semaphore(const std::string& collection,
                                                           const std::string& key) override;
  bool create_semaphore(const std::string& collection,
                        const mongoelector::SemaphoreClaim& claim) override;
  bool claim_semaphore(const std::string& collection,
                       const mongoelector::SemaphoreClaim& claim) override;
  std::vector<bool> renew_semaphores(
      const std::string& collection,
      const std::vector<mongoelector::SemaphoreRenewRequest>& requests,
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
  void ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) override;
  void put_status(const std::string& collection, const mongoelector::Document& doc) override;
  std::vector<mongoelector::Document> list_status(const std::string& collection,
                                                  const std::string& key) override;

  // For an event loop that does the I/O itself (mongoelector.aio over an AsyncDatabase,
  // the core's operations in parts: Locker::begin_claim...). Need the GIL.
  // Whether `db` is the facade of an AsyncDatabase (whose calls must not run on its loop).
  bool fronts_async_database() const;
  // The coroutine of command `c` on that AsyncDatabase: the call, arguments and write
  // concern the synchronous calls send (find_one_and_update, update_one, delete_one,
  // insert_one, find_one). The caller awaits it within pymongo.timeout(op_timeout).
  py::object start(const mongoelector::commands::Command& c);
  // What a reply means: the lock document of a find_one / find_one_and_update reply
  // (None: nullopt), whether an update_one / delete_one reply matched (deleted).
  static std::optional<mongoelector::LockDoc> lock_doc_of(const py::object& reply);
  // The lock document a claim's findAndModify (an upsert) returned: never None.
  static mongoelector::LockDoc claimed_doc_of(const py::object& reply);
  static bool matched_of(const mongoelector::commands::Command& c, const py::object& reply);

  struct Refs;
  struct Domain;

 private:
  // What bounds a call: the call budget (op_timeout), or for a one-time setup call
  // (index creation, asking what the server is) setup_timeout_ms of it (client.h).
  enum class Bound { call, setup };
  template <class F>
  auto with_python(Bound bound, F&& f);
  template <class F>
  auto with_python(F&& f);  // Bound::call
  // The Collection object of `name`, created once. Needs the GIL.
  py::object collection(const std::string& name);
  py::object with_majority_writes(py::object coll);  // see pymongo_storage.cpp
  // Sends an update_one / delete_one command (storage/commands.h): whether a document
  // matched (was deleted). Needs the GIL.
  bool matched(const mongoelector::commands::Command& c);
  // A duplicate-key error (E11000 and its older codes) as pymongo raises it: the
  // protocol's "held" or "a document is there". Needs the GIL.
  bool duplicate_key(const py::error_already_set& e) const;
  // Sends a find_and_modify command (upsert, the document after); re-raises errors.
  py::object find_one_and_update(const mongoelector::commands::Command& c);
  // Sends an insert_one command (the document is Command::update); re-raises errors.
  void insert_one(const mongoelector::commands::Command& c);
  // The call of one-document command `c` on collection object `coll`: its result (a
  // synchronous collection) or its coroutine (an asynchronous one).
  py::object call_on(const py::object& coll, const mongoelector::commands::Command& c);
  // Sends a find command: the document or None for Command::one (find_one), else a cursor.
  py::object find(const mongoelector::commands::Command& c);
  void ensure_indexes(const std::string& collection,
                      const std::vector<mongoelector::commands::IndexSpec>& specs);
  void ensure_ttl_index(const py::object& coll, const char* field, std::int64_t seconds);
  mongoelector::ServerInfo probe_server_info();

  Refs* refs_;  // Python objects; freed under the GIL (or leaked at interpreter exit)
  double op_timeout_s_;
  bool real_ = false;  // a pymongo Database (not mongomock or a lookalike)
  bool csot_ = false;
  std::atomic<bool> mock_{false};
  std::atomic<bool> ttl_warned_{false};
  std::atomic<int> time_command_{0};  // index of the first command that gave localTime
  std::shared_ptr<ServerFacts> facts_;
  std::shared_ptr<Domain> domain_;  // never null

 public:
  // Graceful handover (Storage::hand_over): one update_one whose filter is renew()'s.
  bool hand_over(const std::string& collection, const HandOver& h) override;
  // The leader's payload (Storage::set_payload): one conditional update.
  bool set_payload(const std::string& collection, const mongoelector::PayloadWrite& w) override;
};

}  // namespace mongoelector_py
