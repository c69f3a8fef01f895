// Storage over a MongoDB server through libmongoc: one per locker or elector, borrowing
// connections from a shared MongoClient (mongo_client.h). Used by the C API and by the
// Python URI transport.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "mongo_client.h"
#include "storage.h"

namespace mongoelector {

struct MongoStorageOptions {
  std::string uri;  // mongodb://...
  std::string database;
  // Upper bound for one call (socketTimeoutMS, serverSelectionTimeoutMS,
  // connectTimeoutMS, maxTimeMS) unless the URI sets them. Lockers and electors pass a
  // value well below their renew deadline so a hung call cannot outlive the lease.
  std::int64_t op_timeout_ms = 5000;
};

// op_timeout_ms_for_ttl(): see client.h.

class MongoStorage final : public Storage {
 public:
  // On its own client (tests, one-off tools). Throws InvalidArgument for a malformed
  // URI or database name. Does not connect.
  explicit MongoStorage(MongoStorageOptions options);
  // On a shared client: calls use its pool of the timeout class of op_timeout_ms.
  MongoStorage(std::shared_ptr<MongoClient> client, std::int64_t op_timeout_ms);
  ~MongoStorage() override;

  // Commands sent so far (libmongoc APM command-started events, handshakes excluded).
  std::int64_t round_trips() const;

  // Wait for a pooled connection + serverSelectionTimeoutMS + connectTimeoutMS +
  // socketTimeoutMS (the last three doubled when the URI turns retries on): a call has
  // failed by then.
  std::int64_t call_bound_ms() const override;
  ServerInfo server_info() override;  // asked once per client (MongoClient caches it)
  std::int64_t server_time_ms() override;
  void ensure_lock_indexes(const std::string& collection) override;
  std::optional<LockDoc> claim(const std::string& collection, const LockClaim& claim,
                               bool force) override;
  std::optional<LockDoc> insert_claim(const std::string& collection,
                                      const LockClaim& claim) override;
  std::int64_t bump_epoch(const std::string& collection, const std::string& key) override;
  bool set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                 std::int64_t old_fence, std::int64_t created_ms, std::int64_t new_fence) override;
  // update_one, {$max: {ts_expire}}: matched (matchedCount) is renewed.
  bool renew(const std::string& collection, const std::string& key, const std::string& uuid,
             std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) override;
  // renew()'s filter, {$set: {ts_expire}}.
  bool set_expiry(const std::string& collection, const std::string& key, const std::string& uuid,
                  std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms,
                  std::int64_t created_ms) override;
  // Per chunk of max_renew_batch(): one `update` (multi) per group of renew_groups()
  // ($in lists of keys, uuids and fences: storage.h), then one `find` of the chunk's keys
  // deciding each request (RenewRequest::renewed_by). N keys of one ttl: 2 commands.
  std::vector<bool> renew_many(const std::string& collection,
                               const std::vector<RenewRequest>& requests,
                               std::int64_t now_ms) override;
  // Smaller on FerretDB (Storage::renew_batch_for), once the client knows the server.
  std::size_t max_renew_batch() const override;
  // Shared by every storage of the same MongoClient (one database) in this process.
  const void* batch_domain() const override;
  std::shared_ptr<ClockSampleBoard> clock_sample_board() override;
  bool release(const std::string& collection, const std::string& key,
               const std::optional<std::string>& uuid, std::int64_t fence, std::int64_t now_ms,
               bool delete_document) override;
  std::optional<LockDoc> read(const std::string& collection, const std::string& key) override;
  std::vector<std::optional<LockDoc>> read_many(const std::string& collection,
                                                const std::vector<std::string>& keys) override;
  // Semaphores (storage.h): one command each -- find (read), insert (create), update
  // with a compare-and-set filter on {limit, fence, "slots.<i>.ts_expire"} (claim),
  // update naming {"slots.<i>.uuid", "slots.<i>.fence"} (renew, release).
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

  struct Impl;

 private:
  ServerInfo probe_server_info();  // buildInfo (and serverStatus for emulations)
  std::unique_ptr<Impl> impl_;

 public:
  // Graceful handover (Storage::hand_over): one update_one whose filter is renew()'s.
  bool hand_over(const std::string& collection, const HandOver& h) override;
  // The leader's payload (Storage::set_payload): one conditional update.
  bool set_payload(const std::string& collection, const PayloadWrite& w) override;
};

}  // namespace mongoelector
