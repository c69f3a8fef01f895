// What `run` holds while CMD runs (run_hold.h): the lock KEY or a side of the read-write
// lock KEY, each kept alive by a keep-alive lease of the library.
#include "run_hold.h"

#include <cinttypes>
#include <cstdio>

#include "cli.h"

namespace cli {

namespace {

// The printed form of a holder: "HOST pid PID".
std::string who(const char* host, int64_t pid) {
  return std::string(host != nullptr ? host : "?") + " pid " + std::to_string(pid);
}

// "(fence F, expires in X s unless renewed)"
std::string fence_and_expiry(int64_t fence, int64_t expire_ms) {
  char buf[128];
  snprintf(buf, sizeof buf, "(fence %" PRId64 ", expires in %.1f s unless renewed)", fence,
           static_cast<double>(expire_ms - wall_ms()) / 1000.0);
  return buf;
}

// {"uuid", "host", "pid", "fence", "expire_ms"} of one holder of a read-write lock.
std::string holder_json(const mongoelector_rwlock_holder& h) {
  char buf[160];
  snprintf(buf, sizeof buf,
           ", \"pid\": %" PRId64 ", \"fence\": %" PRId64 ", \"expire_ms\": %" PRId64 "}", h.pid,
           h.fence, h.expire_ms);
  return "{\"uuid\": " + json_quote(h.uuid) + ", \"host\": " + json_quote(h.host) + buf;
}

}  // namespace

std::string leader_fields(const std::string& key, const std::string& status, bool found,
                          const std::string& uuid, const std::string& host, int64_t pid,
                          int64_t fence, int64_t expire_ms, int64_t server_ms,
                          const std::string& error, const std::string& payload_json) {
  std::string out = "\"key\": " + json_quote(key) + ", \"status\": " + json_quote(status);
  if (!found) {
    out += ", \"leader\": null, \"fence\": null, \"expire_ms\": null, \"expires_in_s\": null";
  } else {
    char buf[160];
    snprintf(buf, sizeof buf,
             ", \"pid\": %" PRId64 "}, \"fence\": %" PRId64 ", \"expire_ms\": %" PRId64, pid, fence,
             expire_ms);
    out += ", \"leader\": {\"uuid\": " + json_quote(uuid) + ", \"host\": " + json_quote(host) + buf;
    if (server_ms > 0) {
      snprintf(buf, sizeof buf, ", \"expires_in_s\": %.3f",
               static_cast<double>(expire_ms - server_ms) / 1000.0);
      out += buf;
    } else {
      out += ", \"expires_in_s\": null";
    }
  }
  // The leader's payload (a JSON object, as its elector published it with this term).
  out += ", \"payload\": " + (found && !payload_json.empty() ? payload_json : std::string("null"));
  out +=
      ", \"server_time_ms\": " + (server_ms > 0 ? std::to_string(server_ms) : std::string("null"));
  return out + ", \"error\": " + (error.empty() ? std::string("null") : json_quote(error));
}

// ---------------------------------------------------------------- the lock ----------

std::unique_ptr<RunLock> RunLock::open(mongoelector_client* client, const std::string& key,
                                       const char* collection, double ttl, bool fair,
                                       int& exit_code) {
  LockerPtr locker = open_locker(client, key, collection, ttl, exit_code, fair);
  if (!locker) return nullptr;
  std::unique_ptr<RunLock> out(new RunLock());
  out->client_ = client;
  out->key_ = key;
  out->collection_ = collection;
  out->locker_ = locker.release();
  return out;
}

RunLock::~RunLock() {
  let_go();
  mongoelector_locker_free(locker_);
}

mongoelector_status RunLock::take(const mongoelector_acquire_options& how,
                                  mongoelector_lease_lost_fn on_lost, void* user_data) {
  return mongoelector_lease_acquire_with(locker_, &how, on_lost, user_data, &lease_);
}

int64_t RunLock::fence() const {
  int64_t f = 0;
  if (lease_ != nullptr) mongoelector_lease_fence(lease_, &f);
  return f;
}

bool RunLock::lost() const {
  int l = 0;
  return lease_ != nullptr && mongoelector_lease_lost(lease_, &l) == MONGOELECTOR_OK && l != 0;
}

void RunLock::let_go() {
  mongoelector_lease_free(lease_);  // releases the lock (fenced) unless the lease was lost
  lease_ = nullptr;
}

std::string RunLock::holder() {
  mongoelector_lock_info info;
  int found = 0;
  if (mongoelector_locker_current(locker_, &info, &found) != MONGOELECTOR_OK || !found) return "";
  return "held by " + who(info.host, info.pid) + " " + fence_and_expiry(info.fence, info.expire_ms);
}

std::string RunLock::leader_fields() {
  mongoelector_lock_details d{};
  d.version = MONGOELECTOR_LOCK_DETAILS_VERSION;
  int found = 0;
  if (mongoelector_client_read_lock(client_, collection_, key_.c_str(), &d, &found) !=
      MONGOELECTOR_OK)
    return cli::leader_fields(key_, "unknown", false, "", "", 0, 0, 0, 0,
                              mongoelector_last_error());
  std::string out =
      cli::leader_fields(key_, found ? "held" : "free", found != 0, found ? d.uuid : "",
                         found ? d.host : "", d.pid, d.fence, d.expire_ms, 0, "");
  mongoelector_lock_details_clear(&d);
  return out;
}

std::string RunLock::uuid() const {
  const char* u = "";
  mongoelector_locker_uuid(locker_, &u);
  return u;
}

// ---------------------------------------------------------------- the read-write lock -

std::unique_ptr<RunRwLock> RunRwLock::open(mongoelector_client* client, const std::string& key,
                                           mongoelector_rwlock_side side,
                                           const int64_t* max_readers, double ttl, bool fair,
                                           int& exit_code) {
  mongoelector_rwlock_config c;
  mongoelector_rwlock_config_init(&c, MONGOELECTOR_RWLOCK_CONFIG_VERSION);
  c.ttl_seconds = ttl;
  c.fair = fair ? 1 : 0;  // writers only: the caller refuses --fair with --shared
  if (max_readers != nullptr) c.max_readers = *max_readers;
  std::unique_ptr<RunRwLock> out(new RunRwLock());
  out->key_ = key;
  out->side_ = side;
  const mongoelector_status st = mongoelector_rwlock_new(client, key.c_str(), &c, &out->rwlock_);
  if (st != MONGOELECTOR_OK) {
    exit_code = report_open_failure(
        st,
        "--max-readers: how many --shared holders KEY admits at once, fixed when KEY is first "
        "used");
    return nullptr;
  }
  return out;
}

RunRwLock::~RunRwLock() {
  let_go();
  mongoelector_rwlock_free(rwlock_);
}

std::string RunRwLock::name() const {
  return key_ + (side_ == MONGOELECTOR_RWLOCK_WRITE ? " for writing" : " for reading");
}

mongoelector_status RunRwLock::take(const mongoelector_acquire_options& how,
                                    mongoelector_lease_lost_fn on_lost, void* user_data) {
  return mongoelector_rwlock_lease_acquire(rwlock_, side_, &how, on_lost, user_data, &lease_);
}

int64_t RunRwLock::fence() const {
  int64_t f = 0;
  if (lease_ != nullptr) mongoelector_rwlock_lease_fence(lease_, &f);
  return f;
}

bool RunRwLock::lost() const {
  int l = 0;
  return lease_ != nullptr && mongoelector_rwlock_lease_lost(lease_, &l) == MONGOELECTOR_OK &&
         l != 0;
}

void RunRwLock::let_go() {
  mongoelector_rwlock_lease_free(lease_);  // releases the hold (fenced) unless lost
  lease_ = nullptr;
}

std::string RunRwLock::holder() {
  mongoelector_rwlock_holder* hs = nullptr;
  size_t n = 0;
  if (mongoelector_rwlock_holders(rwlock_, &hs, &n) != MONGOELECTOR_OK) return "";
  const std::string self = uuid();
  std::string writer, waiting, readers;
  size_t reader_count = 0;
  for (size_t i = 0; i < n; ++i) {
    const mongoelector_rwlock_holder& h = hs[i];
    if (h.side == MONGOELECTOR_RWLOCK_WRITE) {
      writer = "held for writing by " + who(h.host, h.pid) + " " +
               fence_and_expiry(h.fence, h.expire_ms);
    } else if (h.side == MONGOELECTOR_RWLOCK_WAITING_WRITER && self != h.uuid) {
      waiting = "wanted by a waiting writer, " + who(h.host, h.pid) +
                " (new readers wait until it has written)";
    } else if (h.side == MONGOELECTOR_RWLOCK_READ) {
      if (++reader_count <= 3) readers += (readers.empty() ? "" : ", ") + who(h.host, h.pid);
    }
  }
  mongoelector_rwlock_holders_free(hs, n);
  if (!writer.empty()) return writer;
  if (side_ == MONGOELECTOR_RWLOCK_READ && !waiting.empty()) return waiting;
  if (reader_count == 0) return "";
  if (reader_count > 3) readers += " and " + std::to_string(reader_count - 3) + " more";
  return "held for reading by " + std::to_string(reader_count) +
         (reader_count == 1 ? " process (" : " processes (") + readers + ")";
}

std::string RunRwLock::leader_fields() {
  mongoelector_rwlock_holder* hs = nullptr;
  size_t n = 0;
  const std::string key = "\"key\": " + json_quote(key_);
  if (mongoelector_rwlock_holders(rwlock_, &hs, &n) != MONGOELECTOR_OK)
    return key +
           ", \"status\": \"unknown\", \"readers\": null, \"writer\": null, "
           "\"waiting_writer\": null, \"error\": " +
           json_quote(mongoelector_last_error());
  std::string readers, writer = "null", waiting = "null";
  for (size_t i = 0; i < n; ++i) {
    if (hs[i].side == MONGOELECTOR_RWLOCK_READ)
      readers += (readers.empty() ? "" : ", ") + holder_json(hs[i]);
    else if (hs[i].side == MONGOELECTOR_RWLOCK_WRITE)
      writer = holder_json(hs[i]);
    else
      waiting = holder_json(hs[i]);
  }
  mongoelector_rwlock_holders_free(hs, n);
  const char* status = writer != "null" ? "write" : !readers.empty() ? "read" : "free";
  return key + ", \"status\": " + json_quote(status) + ", \"readers\": [" + readers +
         "], \"writer\": " + writer + ", \"waiting_writer\": " + waiting + ", \"error\": null";
}

std::string RunRwLock::uuid() const {
  const char* u = "";
  mongoelector_rwlock_uuid(rwlock_, &u);
  return u;
}

std::vector<std::pair<std::string, std::string>> RunRwLock::env() const {
  return {{"MONGOELECTOR_SIDE", side_ == MONGOELECTOR_RWLOCK_WRITE ? "write" : "read"}};
}

}  // namespace cli
