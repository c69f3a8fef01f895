// In-memory storage with the same semantics as MongoDB (atomic per document): unit tests
// and single-process use. Thread-safe. Counts its calls like round trips.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "../storage.h"

namespace mongoelector {

class MemoryStorage final : public Storage {
 public:
  std::int64_t round_trips() const;
  // Test hooks: the server's clock, and failure injection.
  void set_server_time(std::int64_t ms) { std::lock_guard<std::mutex> g(mu_); server_time_ = ms; }
  void set_server_time_source(std::function<std::int64_t()> fn) {
    std::lock_guard<std::mutex> g(mu_);
    server_time_source_ = std::move(fn);
  }
  void set_unavailable(bool down) { std::lock_guard<std::mutex> g(mu_); down_ = down; }
  void set_call_bound_ms(std::int64_t ms) { std::lock_guard<std::mutex> g(mu_); call_bound_ = ms; }
  std::int64_t call_bound_ms() const override { std::lock_guard<std::mutex> g(mu_); return call_bound_; }
  // Deletes a lock document behind the library's back (TTL monitor, original node).
  void delete_lock(const std::string& collection, const std::string& key);
  // Writes a raw lock document (e.g. in the original's schema).
  void put_lock(const std::string& collection, const Document& doc);

  ServerInfo server_info() override;
  std::int64_t server_time_ms() override;
  void ensure_lock_indexes(const std::string& collection) override;
  std::optional<LockDoc> claim(const std::string& collection, const LockClaim& claim,
                               bool force) override;
  std::int64_t bump_epoch(const std::string& collection, const std::string& key) override;
  bool set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                 std::int64_t old_fence, std::int64_t new_fence) override;
  bool renew(const std::string& collection, const std::string& key, const std::string& uuid,
             std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) override;
  bool release(const std::string& collection, const std::string& key,
               const std::optional<std::string>& uuid, std::int64_t now_ms,
               bool delete_document) override;
  std::optional<LockDoc> read(const std::string& collection, const std::string& key) override;
  void ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) override;
  void put_status(const std::string& collection, const Document& doc) override;
  std::vector<Document> list_status(const std::string& collection, const std::string& key) override;

 private:
  void enter();  // counts a round trip; throws StorageUnavailable when down
  Document* find_lock(const std::string& collection, const std::string& key);  // mu_ held

  mutable std::mutex mu_;
  std::int64_t round_trips_ = 0;
  std::int64_t server_time_ = 0;
  std::function<std::int64_t()> server_time_source_;
  bool down_ = false;
  std::int64_t call_bound_ = 0;
  std::map<std::string, std::map<std::string, Document>> locks_;     // coll -> key -> doc
  std::map<std::string, std::map<std::string, std::int64_t>> epochs_;
  std::map<std::string, std::map<std::string, Document>> status_;    // coll -> _id -> doc
};

}  // namespace mongoelector
