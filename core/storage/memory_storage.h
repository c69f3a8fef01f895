// In-memory storage with the same semantics as MongoDB (atomic per document): unit tests
// and single-process use. Thread-safe. Counts its calls like round trips.
//
// Fault injection for the fake-clock tests (no sleeps): a hook runs before and after
// every call, outside the storage's mutex, so it may advance a FakeClock (a slow call),
// block (a hung call) or throw (a lost request or a lost reply); stall_next() keeps one
// call back and lets the test land it later (a request that runs late at the server).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client.h"
#include "storage.h"

namespace mongoelector {

class MemoryStorage final : public Storage {
 public:
  // op: "server_info", "server_time_ms", "claim", "insert_claim", "bump_epoch", "set_fence", "renew",
  // "renew_many", "set_expiry", "release", "read", "read_many", "put_status", "list_status",
  // "ensure_indexes", "read_semaphore", "create_semaphore", "claim_semaphore",
  // "renew_semaphore", "renew_semaphores", "release_semaphore", "renew_queue_entry",
  // "leave_queue", "hand_over".
  // applied: false before the call reaches the "server", true after it was applied.
  using FaultHook = std::function<void(const std::string& op, bool applied)>;

  std::int64_t round_trips() const;
  // Test hooks: the server's clock, and failure injection.
  void set_server_time(std::int64_t ms) {
    std::lock_guard<std::mutex> g(mu_);
    server_time_ = ms;
  }
  void set_server_time_source(std::function<std::int64_t()> fn) {
    std::lock_guard<std::mutex> g(mu_);
    server_time_source_ = std::move(fn);
  }
  void set_unavailable(bool down) {
    std::lock_guard<std::mutex> g(mu_);
    down_ = down;
  }
  void set_fault_hook(FaultHook hook) {
    std::lock_guard<std::mutex> g(mu_);
    hook_ = std::move(hook);
  }
  // The next call of `op` is not applied: it fails at the caller (StorageUnavailable, as
  // a client-side timeout) and is applied when land_stalled() runs.
  void stall_next(const std::string& op) {
    std::lock_guard<std::mutex> g(mu_);
    stall_op_ = op;
  }
  // Applies the stalled calls now, in order. Returns how many.
  int land_stalled();
  // Memory calls cannot hang, so a small bound is honest; tests set larger ones.
  void set_call_bound_ms(std::int64_t ms) {
    std::lock_guard<std::mutex> g(mu_);
    call_bound_ = ms;
  }
  std::int64_t call_bound_ms() const override {
    std::lock_guard<std::mutex> g(mu_);
    return call_bound_;
  }
  // Shared server-time samples (server_clock.h): none unless a test sets a board.
  void set_clock_sample_board(std::shared_ptr<ClockSampleBoard> b) { board_ = std::move(b); }
  std::shared_ptr<ClockSampleBoard> clock_sample_board() override { return board_; }
  // The clock its lockers, electors and leases run on by default, whose wall time is also
  // the server's clock (memory://: the system clock, or a testing kit's ManualClock).
  void set_clock(std::shared_ptr<Clock> clock);
  std::shared_ptr<Clock> clock() override;
  // Deletes a lock document behind the library's back (TTL monitor, original node).
  void delete_lock(const std::string& collection, const std::string& key);
  // Makes a held lock expire now (ts_expire = server time), as if its holder had stopped
  // renewing; true if there was one. Its holder's next renewal finds it lost.
  bool expire_lock(const std::string& collection, const std::string& key);
  // Writes a raw lock document (e.g. in the original's schema).
  void put_lock(const std::string& collection, const Document& doc);
  // Semaphore documents behind the library's back (a user deleting or editing them).
  void delete_semaphore(const std::string& collection, const std::string& key);
  void put_semaphore(const std::string& collection, const SemaphoreDoc& doc);

  ServerInfo server_info() override;
  std::int64_t server_time_ms() override;
  void ensure_lock_indexes(const std::string& collection) override;
  std::optional<LockDoc> claim(const std::string& collection, const LockClaim& claim,
                               bool force) override;
  std::optional<LockDoc> insert_claim(const std::string& collection,
                                      const LockClaim& claim) override;
  std::int64_t bump_epoch(const std::string& collection, const std::string& key) override;
  bool set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                 std::int64_t old_fence, std::int64_t created_ms, std::int64_t new_fence) override;
  bool renew(const std::string& collection, const std::string& key, const std::string& uuid,
             std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) override;
  std::vector<bool> renew_many(const std::string& collection,
                               const std::vector<RenewRequest>& requests,
                               std::int64_t now_ms) override;
  bool set_expiry(const std::string& collection, const std::string& key, const std::string& uuid,
                  std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms,
                  std::int64_t created_ms) override;
  bool release(const std::string& collection, const std::string& key,
               const std::optional<std::string>& uuid, std::int64_t fence, std::int64_t now_ms,
               bool delete_document) override;
  std::optional<LockDoc> read(const std::string& collection, const std::string& key) override;
  std::vector<std::optional<LockDoc>> read_many(const std::string& collection,
                                                const std::vector<std::string>& keys) override;
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
  void ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) override;
  void put_status(const std::string& collection, const Document& doc) override;
  std::vector<Document> list_status(const std::string& collection, const std::string& key) override;

 private:
  std::shared_ptr<ClockSampleBoard> board_;
  std::shared_ptr<Clock> clock_;
  bool renew_locked(const std::string& collection, const RenewRequest& r, std::int64_t now_ms);
  // One round trip: hook, then `apply` under the mutex (or stalled), then hook.
  template <class F>
  auto call(const std::string& op, F apply) -> decltype(apply());
  Document* find_lock(const std::string& collection, const std::string& key);  // mu_ held

  mutable std::mutex mu_;
  std::int64_t round_trips_ = 0;
  std::int64_t server_time_ = 0;
  std::function<std::int64_t()> server_time_source_;
  bool down_ = false;
  std::int64_t call_bound_ = 50;
  FaultHook hook_;
  std::string stall_op_;
  std::vector<std::function<void()>> stalled_;
  std::map<std::string, std::map<std::string, Document>> locks_;  // coll -> key -> doc
  std::map<std::string, std::map<std::string, std::int64_t>> epochs_;
  std::map<std::string, std::map<std::string, Document>> status_;          // coll -> _id -> doc
  std::map<std::string, std::map<std::string, SemaphoreDoc>> semaphores_;  // coll -> key

 public:
  // Graceful handover (Storage::hand_over), appended here to keep the class's order.
  bool hand_over(const std::string& collection, const HandOver& h) override;
  // The leader's payload (Storage::set_payload): one conditional update.
  bool set_payload(const std::string& collection, const PayloadWrite& w) override;
};

// memory://NAME: an in-process backend with the same semantics, for users' tests and
// single-process programs (tooz's zake://). Every client of one NAME in this process
// shares one MemoryStorage (and so its locks), which lives while any client or storage
// of it does; different names are independent. Server time is this host's wall clock.
// Nothing is shared between processes: `mongoelector run` refuses it.
class MemoryClient final : public StorageClient {
 public:
  // With `clock`: NAME runs on that clock (a ManualClock); InvalidArgument if NAME is
  // already in use on another one. Without: whatever clock NAME has (the system clock for
  // a new NAME).
  static std::shared_ptr<MemoryClient> open(const std::string& uri,
                                            std::shared_ptr<Clock> clock = nullptr);
  std::shared_ptr<Storage> open_storage(std::int64_t op_timeout_ms) override;
  const char* backend() const override { return "memory"; }
  const std::string& uri() const override { return uri_; }
  const std::string& database() const override { return database_; }  // always ""
  // The shared storage (test helpers: force-expire, steal, freeze).
  const std::shared_ptr<MemoryStorage>& storage() const { return storage_; }

 private:
  std::string uri_, database_;
  std::shared_ptr<MemoryStorage> storage_;
};

bool is_memory_uri(const std::string& uri);

}  // namespace mongoelector
