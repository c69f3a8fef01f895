#include "memory_storage.h"

#include "../metrics.h"

#include <algorithm>
#include <limits>

#include "../clock.h"
#include "../exceptions.h"
#include "../server_clock.h"
#include "semaphore_doc.h"
#include "uri.h"

namespace mongoelector {

template <class F>
auto MemoryStorage::call(const std::string& op, F apply) -> decltype(apply()) {
  FaultHook hook;
  {
    std::lock_guard<std::mutex> g(mu_);
    ++round_trips_;
    metrics::record_round_trip();
    if (down_) throw StorageUnavailable("memory storage is marked unavailable");
    hook = hook_;
  }
  if (hook) hook(op, false);
  using R = decltype(apply());
  R result{};
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!stall_op_.empty() && stall_op_ == op) {
      stall_op_.clear();
      stalled_.push_back([this, apply]() mutable { (void)apply(); });
      throw StorageUnavailable("memory storage: " + op + " timed out at the client (stalled)");
    }
    result = apply();
  }
  if (hook) hook(op, true);
  return result;
}

int MemoryStorage::land_stalled() {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> g(mu_);
    calls.swap(stalled_);
  }
  for (auto& c : calls) {
    std::lock_guard<std::mutex> g(mu_);
    c();
  }
  return static_cast<int>(calls.size());
}

Document* MemoryStorage::find_lock(const std::string& collection, const std::string& key) {
  auto& coll = locks_[collection];
  auto it = coll.find(key);
  return it == coll.end() ? nullptr : &it->second;
}

std::int64_t MemoryStorage::round_trips() const {
  std::lock_guard<std::mutex> g(mu_);
  return round_trips_;
}

void MemoryStorage::delete_lock(const std::string& collection, const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  locks_[collection].erase(key);
}

bool MemoryStorage::expire_lock(const std::string& collection, const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  Document* doc = find_lock(collection, key);
  if (!doc) return false;
  const std::int64_t now = server_time_source_ ? server_time_source_() : server_time_;
  if (!LockDoc::from_document(*doc).held_at(now)) return false;
  doc->set("ts_expire", DateTime{now});
  return true;
}

void MemoryStorage::put_lock(const std::string& collection, const Document& doc) {
  std::lock_guard<std::mutex> g(mu_);
  locks_[collection][doc.get_string("_id").value_or("")] = doc;
}

ServerInfo MemoryStorage::server_info() {
  return call("server_info", [] { return ServerInfo{"memory", "1", true}; });
}

std::int64_t MemoryStorage::server_time_ms() {
  return call("server_time_ms",
              [this] { return server_time_source_ ? server_time_source_() : server_time_; });
}

void MemoryStorage::ensure_lock_indexes(const std::string&) {
  call("ensure_indexes", [] { return true; });
}

std::optional<LockDoc> MemoryStorage::claim(const std::string& collection, const LockClaim& c,
                                            bool force) {
  return call("claim", [this, collection, c, force]() -> std::optional<LockDoc> {
    auto& coll = locks_[collection];
    auto it = coll.find(c.key);
    std::int64_t fence = 0;
    if (it != coll.end()) {
      LockDoc cur = LockDoc::from_document(it->second);
      // Same filter as MongoDB's: {locked: false} or {ts_expire: {$lte: now}}.
      bool free = !cur.locked || (cur.ts_expire && cur.ts_expire->ms <= c.now_ms);
      if (!force && !free) return std::nullopt;  // the duplicate-key case
      fence = cur.fence;
    }
    // MongoDB's $inc refuses to overflow a 64-bit integer (an error reply): so does this.
    if (fence == std::numeric_limits<std::int64_t>::max())
      throw StorageError("claim: $inc of fence would overflow a 64-bit integer");
    Document doc = it != coll.end() ? it->second : Document{{"_id", c.key}};
    c.apply_to(doc, fence + 1);
    coll[c.key] = doc;
    return LockDoc::from_document(doc);
  });
}

std::optional<LockDoc> MemoryStorage::insert_claim(const std::string& collection,
                                                   const LockClaim& c) {
  return call("insert_claim", [this, collection, c]() -> std::optional<LockDoc> {
    auto& coll = locks_[collection];
    if (coll.count(c.key) != 0) return std::nullopt;  // the duplicate-key error
    Document doc = c.document();
    coll[c.key] = doc;
    return LockDoc::from_document(doc);
  });
}

std::int64_t MemoryStorage::bump_epoch(const std::string& collection, const std::string& key) {
  return call("bump_epoch", [this, collection, key] { return ++epochs_[collection][key]; });
}

bool MemoryStorage::set_fence(const std::string& collection, const std::string& key,
                              const std::string& uuid, std::int64_t old_fence,
                              std::int64_t created_ms, std::int64_t new_fence) {
  return call("set_fence", [=] {
    Document* doc = find_lock(collection, key);
    return doc != nullptr && set_fence_on(*doc, uuid, old_fence, created_ms, new_fence);
  });
}

bool MemoryStorage::renew(const std::string& collection, const std::string& key,
                          const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                          std::int64_t expire_ms) {
  return call("renew", [=] {
    return renew_locked(collection, RenewRequest{key, uuid, fence, expire_ms}, now_ms);
  });
}

bool MemoryStorage::renew_locked(const std::string& collection, const RenewRequest& r,
                                 std::int64_t now_ms) {
  Document* doc = find_lock(collection, r.key);
  return doc != nullptr && r.apply_to(*doc, now_ms);  // monotonic
}

bool MemoryStorage::set_expiry(const std::string& collection, const std::string& key,
                               const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                               std::int64_t expire_ms, std::int64_t created_ms) {
  return call("set_expiry", [=] {
    Document* doc = find_lock(collection, key);
    return doc != nullptr && RenewRequest{key, uuid, fence, expire_ms, created_ms}.apply_to(
                                 *doc, now_ms, /*exact=*/true);
  });
}

// One round trip for the whole batch, like one command on a server.
std::vector<bool> MemoryStorage::renew_many(const std::string& collection,
                                            const std::vector<RenewRequest>& requests,
                                            std::int64_t now_ms) {
  return call("renew_many", [=] {
    std::vector<bool> renewed;
    renewed.reserve(requests.size());
    for (const RenewRequest& r : requests) renewed.push_back(renew_locked(collection, r, now_ms));
    return renewed;
  });
}

bool MemoryStorage::release(const std::string& collection, const std::string& key,
                            const std::optional<std::string>& uuid, std::int64_t fence,
                            std::int64_t now_ms, bool delete_document) {
  return call("release", [=] {
    auto& coll = locks_[collection];
    auto it = coll.find(key);
    if (it == coll.end()) return false;
    if (uuid) {
      LockDoc cur = LockDoc::from_document(it->second);
      if (cur.uuid != *uuid || (fence != 0 && cur.fence != fence)) return false;
    }
    if (delete_document) {
      coll.erase(it);
    } else {
      it->second.set("locked", false);
      it->second.set("ts_expire", DateTime{now_ms});
    }
    return true;
  });
}

std::optional<LockDoc> MemoryStorage::read(const std::string& collection, const std::string& key) {
  return call("read", [this, collection, key]() -> std::optional<LockDoc> {
    Document* doc = find_lock(collection, key);
    if (!doc) return std::nullopt;
    return LockDoc::from_document(*doc);
  });
}

// One round trip for all the keys, like one find on a server.
std::vector<std::optional<LockDoc>> MemoryStorage::read_many(const std::string& collection,
                                                             const std::vector<std::string>& keys) {
  return call("read_many", [this, collection, keys]() {
    std::vector<std::optional<LockDoc>> docs;
    docs.reserve(keys.size());
    for (const std::string& k : keys) {
      Document* doc = find_lock(collection, k);
      docs.push_back(doc ? std::optional<LockDoc>(LockDoc::from_document(*doc)) : std::nullopt);
    }
    return docs;
  });
}

void MemoryStorage::ensure_status_indexes(const std::string&, std::int64_t) {
  call("ensure_indexes", [] { return true; });
}

void MemoryStorage::put_status(const std::string& collection, const Document& doc) {
  call("put_status", [this, collection, doc] {
    status_[collection][doc.get_string("_id").value_or("")] = doc;
    return true;
  });
}

std::vector<Document> MemoryStorage::list_status(const std::string& collection,
                                                 const std::string& key) {
  return call("list_status", [this, collection, key] {
    std::vector<Document> out;
    for (const auto& [id, doc] : status_[collection])
      if (doc.get_string("key").value_or("") == key) out.push_back(doc);
    std::stable_sort(out.begin(), out.end(), [](const Document& a, const Document& b) {
      return a.get_date("timestamp").value_or(DateTime{}).ms >
             b.get_date("timestamp").value_or(DateTime{}).ms;
    });
    return out;
  });
}

// ---- semaphores: the same filters as MongoDB's (storage.h), on the stored struct ----

void MemoryStorage::delete_semaphore(const std::string& collection, const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  semaphores_[collection].erase(key);
}

void MemoryStorage::put_semaphore(const std::string& collection, const SemaphoreDoc& doc) {
  std::lock_guard<std::mutex> g(mu_);
  semaphores_[collection][doc.key] = doc;
}

std::optional<SemaphoreDoc> MemoryStorage::read_semaphore(const std::string& collection,
                                                          const std::string& key) {
  return call("read_semaphore", [this, collection, key]() -> std::optional<SemaphoreDoc> {
    auto& coll = semaphores_[collection];
    auto it = coll.find(key);
    if (it == coll.end()) return std::nullopt;
    return it->second;
  });
}

bool MemoryStorage::create_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  SemaphoreDoc doc = semaphore_doc::created_doc(c);  // InvalidArgument before the call
  return call("create_semaphore", [this, collection, doc] {
    auto& coll = semaphores_[collection];
    if (coll.count(doc.key)) return false;  // E11000
    coll[doc.key] = doc;
    return true;
  });
}

bool MemoryStorage::claim_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  return call("claim_semaphore", [this, collection, c] {
    auto& coll = semaphores_[collection];
    auto it = coll.find(c.key);
    if (it == coll.end()) return false;
    return semaphore_doc::apply_claim(it->second, c);  // MongoDB's filter, on the struct
  });
}

bool MemoryStorage::renew_semaphore(const std::string& collection, const std::string& key,
                                    std::int64_t slot, const std::string& uuid, std::int64_t fence,
                                    std::int64_t now_ms, std::int64_t expire_ms) {
  return call("renew_semaphore", [=] {
    auto& coll = semaphores_[collection];
    auto it = coll.find(key);
    return it != coll.end() &&
           semaphore_doc::renew_slot(it->second, slot, uuid, fence, now_ms, expire_ms);
  });
}

// One round trip for the whole batch, like the one bulk command on a server.
std::vector<bool> MemoryStorage::renew_semaphores(
    const std::string& collection, const std::vector<SemaphoreRenewRequest>& requests,
    std::int64_t now_ms) {
  if (requests.empty()) return {};  // nothing to send
  return call("renew_semaphores", [=] {
    auto& coll = semaphores_[collection];
    std::vector<bool> renewed;
    renewed.reserve(requests.size());
    for (const SemaphoreRenewRequest& r : requests) {
      auto it = coll.find(r.key);
      renewed.push_back(
          it != coll.end() &&
          semaphore_doc::renew_slot(it->second, r.slot, r.uuid, r.fence, now_ms, r.expire_ms));
    }
    return renewed;
  });
}

bool MemoryStorage::release_semaphore(const std::string& collection, const std::string& key,
                                      std::int64_t slot, const std::string& uuid,
                                      std::int64_t fence) {
  return call("release_semaphore", [=] {
    auto& coll = semaphores_[collection];
    auto it = coll.find(key);
    if (it == coll.end() || slot < 0 || slot >= static_cast<std::int64_t>(it->second.slots.size()))
      return false;
    auto& s = it->second.slots[static_cast<std::size_t>(slot)];
    if (s.uuid != uuid || s.fence != fence) return false;
    s = semaphore_doc::empty_slot();
    return true;
  });
}

bool MemoryStorage::renew_queue_entry(const std::string& collection, const std::string& key,
                                      std::int64_t index, const std::string& uuid,
                                      std::int64_t ticket, std::int64_t now_ms,
                                      std::int64_t expire_ms) {
  return call("renew_queue_entry", [=] {
    auto& coll = semaphores_[collection];
    auto it = coll.find(key);
    return it != coll.end() &&
           semaphore_doc::renew_queue_entry(it->second, index, uuid, ticket, now_ms, expire_ms);
  });
}

bool MemoryStorage::leave_queue(const std::string& collection, const std::string& key,
                                const std::string& uuid, std::int64_t ticket) {
  return call("leave_queue", [=] {
    auto& coll = semaphores_[collection];
    auto it = coll.find(key);
    return it != coll.end() && semaphore_doc::leave_queue(it->second, uuid, ticket);
  });
}

bool is_memory_uri(const std::string& uri) { return uri.rfind("memory://", 0) == 0; }

void MemoryStorage::set_clock(std::shared_ptr<Clock> clock) {
  std::weak_ptr<Clock> weak = clock;  // not owning: the clock may own leases on this storage
  set_server_time_source([weak] {
    auto c = weak.lock();
    return c ? c->wall_ms() : system_clock()->wall_ms();
  });
  std::lock_guard<std::mutex> g(mu_);
  clock_ = std::move(clock);
}

std::shared_ptr<Clock> MemoryStorage::clock() {
  std::lock_guard<std::mutex> g(mu_);
  return clock_ ? clock_ : system_clock();
}

std::shared_ptr<MemoryClient> MemoryClient::open(const std::string& uri,
                                                 std::shared_ptr<Clock> clock) {
  const StorageUri parsed = parse_storage_uri(uri);
  if (parsed.backend != UriBackend::Memory)
    throw InvalidArgument("not a memory:// URI: " + redact_uri(uri));
  const std::string& name = parsed.path;
  // name -> the shared storage, kept only while someone uses it.
  static std::mutex registry_mu;
  static std::map<std::string, std::weak_ptr<MemoryStorage>> registry;
  auto client = std::shared_ptr<MemoryClient>(new MemoryClient());
  client->uri_ = uri;
  std::lock_guard<std::mutex> g(registry_mu);
  std::shared_ptr<MemoryStorage> storage = registry[name].lock();
  if (!storage) {
    storage = std::make_shared<MemoryStorage>();
    storage->set_clock(clock ? clock : system_clock());
    storage->set_clock_sample_board(std::make_shared<ClockSampleBoard>());
    registry[name] = storage;
  } else if (clock && storage->clock() != clock) {
    throw InvalidArgument(uri + " is already in use on another clock");
  }
  for (auto it = registry.begin(); it != registry.end();)  // forget the dead ones
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  client->storage_ = std::move(storage);
  return client;
}

std::shared_ptr<Storage> MemoryClient::open_storage(std::int64_t op_timeout_ms) {
  if (op_timeout_ms <= 0 || op_timeout_ms > 3600 * 1000)
    throw InvalidArgument("op timeout out of range");
  return storage_;
}

}  // namespace mongoelector

namespace mongoelector {

// Graceful handover: renew()'s match, then the lock changes hands in the same step.
bool MemoryStorage::hand_over(const std::string& collection, const HandOver& h) {
  return call("hand_over", [=] {
    Document* doc = find_lock(collection, h.key);
    return doc != nullptr && h.apply_to(*doc);
  });
}

}  // namespace mongoelector

namespace mongoelector {

bool MemoryStorage::set_payload(const std::string& collection, const PayloadWrite& w) {
  return call("set_payload", [=] {
    Document* doc = find_lock(collection, w.key);
    return doc != nullptr && w.apply_to(*doc);
  });
}

}  // namespace mongoelector
