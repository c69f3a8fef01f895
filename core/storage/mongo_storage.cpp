// Storage over MongoDB (or a server speaking its protocol): the operations of storage.h
// as filters and updates. The connection (bounds, round-trip counting, error mapping)
// is mongo_connection.h.
//
// - One call is one command on the wire (claim, renew, release, read, set_fence,
//   bump_epoch, put_status, server_time_ms on a server that knows `hello`), so the
//   lock protocol's round-trip budget holds. renew_many is the exception by design: per
//   chunk, one update per distinct expire_ms plus one find (2 commands for N keys).
// - Errors: cannot reach / timed out -> StorageUnavailable; duplicate key in claim() ->
//   nullopt ("held"); any other server answer -> StorageError(message, server code).
#include "mongo_storage.h"

#include <algorithm>
#include <atomic>
#include <map>

#include "../exceptions.h"
#include "../log.h"
#include "mongo_bson.h"
#include "mongo_connection.h"
#include "../semaphore/semaphore_doc.h"

namespace mongoelector {

using mongo_bson::Bson;

namespace {

constexpr std::uint32_t kDuplicateKey = 11000;

std::atomic<bool> g_ttl_warned{false};

void append_key(bson_t* b, const std::string& key) { mongo_bson::append_utf8(b, "_id", key); }

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

// Creates each index; on an index-spec conflict drops the collection's indexes and
// starts over once (as the original does); tolerates servers refusing TTL options.
void ensure_indexes(MongoConnection& conn, const std::string& collection,
                    const std::vector<IndexSpec>& specs) {
  auto s = conn.session();
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool conflict = false;
    for (const auto& spec : specs) {
      bson_error_t error;
      if (s.create_index(collection, spec.field, spec.expire_after_s, &error)) continue;
      if (is_unavailable(error)) throw_error("createIndexes", error);
      const std::string where = conn.database() + "." + collection;
      if (spec.expire_after_s && is_ttl_rejection(error)) {
        if (!g_ttl_warned.exchange(true)) {
          log(LogLevel::Warning,
              "the server refused the TTL index on " + where + "." + spec.field + " (" +
                  error.message +
                  "); expired documents will stay until overwritten (the lock protocol "
                  "does not depend on the TTL index). Logged once per process.");
        }
        continue;
      }
      if (is_index_conflict(error) && attempt == 0) {
        log(LogLevel::Info, "index conflict on " + where + " (" + error.message +
                                "); dropping its indexes and creating them again");
        s.drop_indexes(collection);
        conflict = true;
        break;
      }
      throw_error("createIndexes on " + collection, error);
    }
    if (!conflict) return;
  }
}

}  // namespace

struct MongoStorage::Impl {
  Impl(std::shared_ptr<MongoClient> c, std::int64_t op_timeout_ms)
      : client(std::move(c)), conn(client->pool_for(op_timeout_ms)),
        domain(client->batch_domain()) {}
  std::shared_ptr<MongoClient> client;
  MongoConnection conn;
  std::shared_ptr<MongoBatchDomain> domain;  // shared with the client's other storages
};

MongoStorage::MongoStorage(MongoStorageOptions options)
    : MongoStorage(MongoClient::open(options.uri, options.database), options.op_timeout_ms) {}

MongoStorage::MongoStorage(std::shared_ptr<MongoClient> client, std::int64_t op_timeout_ms) {
  if (!client) throw InvalidArgument("client must not be null");
  impl_ = std::make_unique<Impl>(std::move(client), op_timeout_ms);
}

MongoStorage::~MongoStorage() = default;

std::int64_t MongoStorage::round_trips() const { return impl_->conn.round_trips(); }

std::int64_t MongoStorage::call_bound_ms() const { return impl_->conn.call_bound_ms(); }

std::size_t MongoStorage::max_renew_batch() const {
  return renew_batch_for(impl_->client->known_server_info());
}

ServerInfo MongoStorage::server_info() {
  if (auto known = impl_->client->known_server_info()) return *known;
  ServerInfo info = probe_server_info();
  impl_->client->remember_server_info(info);
  return info;
}

ServerInfo MongoStorage::probe_server_info() {
  auto s = impl_->conn.session();
  Bson build;
  s.admin_command("buildInfo", build.get());
  ServerInfo info;
  info.version = mongo_bson::find_utf8(build.get(), "version").value_or("");
  if (auto v = mongo_bson::find_utf8(build.get(), "ferretdbVersion")) {
    info.name = "FerretDB";
    info.version = *v;
    info.atomic_find_and_modify = false;  // read-then-write by _id (see protocol notes)
    return info;
  }
  if (bson_has_field(build.get(), "ferretdb")) {  // later FerretDB versions
    info.name = "FerretDB";
    info.version = mongo_bson::find_utf8(build.get(), "ferretdb.version").value_or(info.version);
    info.atomic_find_and_modify = false;
    return info;
  }
  if (bson_has_field(build.get(), "gitVersion")) {  // every mongod/mongos has it
    info.name = "MongoDB";
    info.atomic_find_and_modify = true;
    return info;
  }
  // mongo-java-server's buildInfo is only {version, versionArray, maxBsonObjectSize};
  // its serverStatus says process "java". Its collection operations are synchronized.
  Bson status;
  bson_error_t error;
  if (!s.try_admin_command("serverStatus", status.get(), &error)) {
    if (is_unavailable(error)) throw_error("serverStatus", error);
  } else if (mongo_bson::find_utf8(status.get(), "process").value_or("") == "java") {
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
  auto s = impl_->conn.session();
  bson_error_t error;
  if (!impl_->client->hello_unsupported) {
    Bson reply;
    if (s.try_admin_command("hello", reply.get(), &error)) {
      if (auto t = mongo_bson::find_date_time(reply.get(), "localTime")) return *t;
    } else if (is_unavailable(error)) {
      throw_error("hello", error);
    } else {
      impl_->client->hello_unsupported = true;  // remembered: one round trip from now on
    }
  }
  if (impl_->client->hello_unsupported) {
    Bson reply;
    if (!s.try_admin_command("isMaster", reply.get(), &error)) throw_error("isMaster", error);
    if (auto t = mongo_bson::find_date_time(reply.get(), "localTime")) return *t;
  }
  Bson status;
  s.admin_command("serverStatus", status.get());
  if (auto t = mongo_bson::find_date_time(status.get(), "localTime")) return *t;
  throw StorageError("the server reports no localTime in hello/isMaster or serverStatus");
}

void MongoStorage::ensure_lock_indexes(const std::string& collection) {
  ensure_indexes(impl_->conn, collection, {IndexSpec{"ts_expire", 0}});
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

  const std::string what = "findAndModify (claim " + claim.key + ")";
  std::optional<Document> value;
  bson_error_t error;
  if (!impl_->conn.session().find_and_modify(collection, query.get(), update.get(), &value,
                                             &error)) {
    if (is_server_error(error, kDuplicateKey)) return std::nullopt;  // held by someone else
    throw_error(what, error);
  }
  if (!value) throw StorageError(what + " returned no document");
  LockDoc doc = LockDoc::from_document(*value);
  if (doc.key != claim.key || doc.uuid != claim.uuid || !doc.locked || doc.fence < 1) {
    throw StorageError(what + " returned a document that is not the claim just written");
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

  const std::string what = "findAndModify (epoch of " + key + ")";
  auto s = impl_->conn.session();
  for (int attempt = 0;; ++attempt) {
    std::optional<Document> value;
    bson_error_t error;
    if (s.find_and_modify(collection + ".fences", query.get(), update.get(), &value, &error)) {
      auto epoch = value ? value->get_int("epoch") : std::nullopt;
      if (!epoch || *epoch < 1) throw StorageError(what + " returned no valid epoch");
      return *epoch;
    }
    // Two first upserts can race; the loser's retry finds the document and increments
    // it (MongoDB retries this itself; emulations may not).
    if (attempt == 0 && is_server_error(error, kDuplicateKey)) continue;
    throw_error(what, error);
  }
}

bool MongoStorage::set_fence(const std::string& collection, const std::string& key,
                             const std::string& uuid, std::int64_t old_fence,
                             std::int64_t created_ms, std::int64_t new_fence) {
  Bson filter, update;
  append_key(filter.get(), key);
  BSON_APPEND_BOOL(filter.get(), "locked", true);
  mongo_bson::append_utf8(filter.get(), "uuid", uuid);
  BSON_APPEND_INT64(filter.get(), "fence", old_fence);
  BSON_APPEND_DATE_TIME(filter.get(), "ts_created", created_ms);
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_INT64(&set, "fence", new_fence);
  bson_append_document_end(update.get(), &set);
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (set_fence)");
}

namespace {

// renew()'s filter: {_id, locked: true, uuid, ts_expire: {$gt: now}, fence (unless 0)}
// (renew_many() matches the same documents with $in lists).
void append_renew_filter(bson_t* filter, const std::string& key, const std::string& uuid,
                         std::int64_t fence, std::int64_t now_ms) {
  append_key(filter, key);
  BSON_APPEND_BOOL(filter, "locked", true);
  mongo_bson::append_utf8(filter, "uuid", uuid);
  bson_t gt;
  BSON_APPEND_DOCUMENT_BEGIN(filter, "ts_expire", &gt);
  BSON_APPEND_DATE_TIME(&gt, "$gt", now_ms);
  bson_append_document_end(filter, &gt);
  if (fence != 0) BSON_APPEND_INT64(filter, "fence", fence);
}

// {$max: {<field>: expire}}: a renewal never lowers an expiry (storage.h, renew()).
void append_expiry_update(bson_t* update, const char* field, std::int64_t expire_ms,
                          bool exact = false) {
  bson_t op;
  BSON_APPEND_DOCUMENT_BEGIN(update, exact ? "$set" : "$max", &op);
  BSON_APPEND_DATE_TIME(&op, field, expire_ms);
  bson_append_document_end(update, &op);
}

}  // namespace

bool MongoStorage::renew(const std::string& collection, const std::string& key,
                         const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                         std::int64_t expire_ms) {
  Bson filter, update;
  append_renew_filter(filter.get(), key, uuid, fence, now_ms);
  append_expiry_update(update.get(), "ts_expire", expire_ms);
  // matchedCount: "matched but already later" is renewed too.
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (renew)");
}

bool MongoStorage::set_expiry(const std::string& collection, const std::string& key,
                              const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                              std::int64_t expire_ms) {
  Bson filter, update;
  append_renew_filter(filter.get(), key, uuid, fence, now_ms);
  append_expiry_update(update.get(), "ts_expire", expire_ms, /*exact=*/true);
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (set expiry)");
}

std::vector<bool> MongoStorage::renew_many(const std::string& collection,
                                           const std::vector<RenewRequest>& requests,
                                           std::int64_t now_ms) {
  std::vector<bool> renewed(requests.size(), false);
  if (requests.empty()) return renewed;
  // Bad strings are refused before anything is sent, not between two commands.
  for (const RenewRequest& r : requests) {
    mongo_bson::check_utf8(r.key, "_id");
    mongo_bson::check_utf8(r.uuid, "uuid");
  }
  const std::size_t chunk = std::max<std::size_t>(1, max_renew_batch());
  auto s = impl_->conn.session();  // every command of the call on one connection
  for (std::size_t from = 0; from < requests.size(); from += chunk) {
    const std::size_t to = std::min(requests.size(), from + chunk);
    // One multi update per group (storage.h, renew_groups: $in lists, not an $or).
    for (const RenewGroup& g : renew_groups(requests, from, to)) {
      const std::vector<std::size_t>& members = g.members;
      Bson filter, update;
      bson_t cond, list;
      BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "_id", &cond);
      BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &list);
      for (std::size_t j = 0; j < members.size(); ++j)
        mongo_bson::append_utf8(&list, std::to_string(j).c_str(), requests[members[j]].key);
      bson_append_array_end(&cond, &list);
      bson_append_document_end(filter.get(), &cond);
      BSON_APPEND_BOOL(filter.get(), "locked", true);
      BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "uuid", &cond);
      BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &list);
      for (std::size_t j = 0; j < members.size(); ++j)
        mongo_bson::append_utf8(&list, std::to_string(j).c_str(), requests[members[j]].uuid);
      bson_append_array_end(&cond, &list);
      bson_append_document_end(filter.get(), &cond);
      BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "ts_expire", &cond);
      BSON_APPEND_DATE_TIME(&cond, "$gt", now_ms);
      bson_append_document_end(filter.get(), &cond);
      if (g.fenced) {
        BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "fence", &cond);
        BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &list);
        for (std::size_t j = 0; j < members.size(); ++j)
          BSON_APPEND_INT64(&list, std::to_string(j).c_str(), requests[members[j]].fence);
        bson_append_array_end(&cond, &list);
        bson_append_document_end(filter.get(), &cond);
      }
      append_expiry_update(update.get(), "ts_expire", g.expire_ms);
      // The matched count is not used: it cannot say WHICH requests matched.
      (void)s.update_many(collection, filter.get(), update.get(), "update (renew_many)");
    }
    // Then what each document is now: one find of all the chunk's keys, in one batch
    // (singleBatch: no getMore, no cursor left open).
    Bson filter, opts;
    bson_t id, keys;
    BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "_id", &id);
    BSON_APPEND_ARRAY_BEGIN(&id, "$in", &keys);
    for (std::size_t i = from; i < to; ++i) {
      const std::string index = std::to_string(i - from);
      mongo_bson::append_utf8(&keys, index.c_str(), requests[i].key);
    }
    bson_append_array_end(&id, &keys);
    bson_append_document_end(filter.get(), &id);
    const auto n = static_cast<std::int64_t>(to - from);
    BSON_APPEND_INT64(opts.get(), "limit", n);
    BSON_APPEND_INT64(opts.get(), "batchSize", n);
    BSON_APPEND_BOOL(opts.get(), "singleBatch", true);
    std::map<std::string, LockDoc> found;
    for (const Document& d : s.find(collection, filter.get(), opts.get(),
                                    "find (renew_many)", to - from)) {
      LockDoc doc = LockDoc::from_document(d);
      found.emplace(doc.key, std::move(doc));
    }
    for (std::size_t i = from; i < to; ++i) {
      auto it = found.find(requests[i].key);
      renewed[i] = it != found.end() && requests[i].renewed_by(it->second);
    }
  }
  return renewed;
}

const void* MongoStorage::batch_domain() const { return impl_->domain.get(); }

std::shared_ptr<ClockSampleBoard> MongoStorage::clock_sample_board() {
  return impl_->domain->board;
}

bool MongoStorage::release(const std::string& collection, const std::string& key,
                           const std::optional<std::string>& uuid, std::int64_t fence,
                           std::int64_t now_ms, bool delete_document) {
  Bson filter;
  append_key(filter.get(), key);
  if (uuid) {
    mongo_bson::append_utf8(filter.get(), "uuid", *uuid);
    // Names the hold, not just the owner: a release that runs late (timed out at the
    // client, applied later) cannot free a newer hold of the same owner.
    if (fence != 0) BSON_APPEND_INT64(filter.get(), "fence", fence);
  }
  if (delete_document) {
    return impl_->conn.session().delete_one(collection, filter.get(), "delete (release)");
  }
  Bson update;
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_BOOL(&set, "locked", false);
  BSON_APPEND_DATE_TIME(&set, "ts_expire", now_ms);
  bson_append_document_end(update.get(), &set);
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (release)");
}

std::optional<LockDoc> MongoStorage::read(const std::string& collection, const std::string& key) {
  Bson filter, opts;
  append_key(filter.get(), key);
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  BSON_APPEND_BOOL(opts.get(), "singleBatch", true);  // no cursor left open: one round trip
  auto docs = impl_->conn.session().find(collection, filter.get(), opts.get(),
                                         "find (read " + key + ")", 1);
  if (docs.empty()) return std::nullopt;
  return LockDoc::from_document(docs.front());
}

void MongoStorage::ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) {
  if (ttl_s < 0) throw InvalidArgument("status TTL must not be negative");
  ensure_indexes(impl_->conn, collection,
                 {IndexSpec{"timestamp", ttl_s}, IndexSpec{"key", std::nullopt}});
}

void MongoStorage::put_status(const std::string& collection, const Document& doc) {
  const Value* id = doc.get("_id");
  if (id == nullptr) throw InvalidArgument("status document has no _id");
  Bson filter, replacement, opts;
  mongo_bson::append_value(filter.get(), "_id", *id);
  mongo_bson::append_document(replacement.get(), doc);
  BSON_APPEND_BOOL(opts.get(), "upsert", true);
  impl_->conn.session().replace_one(collection, filter.get(), replacement.get(), opts.get(),
                                    "replace (status)");
}

std::vector<Document> MongoStorage::list_status(const std::string& collection,
                                                const std::string& key) {
  Bson filter, opts;
  mongo_bson::append_utf8(filter.get(), "key", key);
  bson_t sort;
  BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "sort", &sort);
  BSON_APPEND_INT32(&sort, "timestamp", -1);
  bson_append_document_end(opts.get(), &sort);
  return impl_->conn.session().find(collection, filter.get(), opts.get(),
                                    "find (status of " + key + ")");
}

// ---------------------------------------------------------------- semaphores ----

namespace {

void append_slot(bson_t* parent, const char* name, const SemaphoreSlot& s) {
  bson_t slot;
  BSON_APPEND_DOCUMENT_BEGIN(parent, name, &slot);
  mongo_bson::append_utf8(&slot, "uuid", s.uuid);
  mongo_bson::append_utf8(&slot, "host", s.host);
  BSON_APPEND_INT64(&slot, "pid", s.pid);
  BSON_APPEND_INT64(&slot, "fence", s.fence);
  BSON_APPEND_DATE_TIME(&slot, "ts_created", s.ts_created ? s.ts_created->ms : 0);
  BSON_APPEND_DATE_TIME(&slot, "ts_expire", s.ts_expire ? s.ts_expire->ms : 0);
  bson_append_document_end(parent, &slot);
}

std::string slot_path(std::int64_t slot, const char* field = nullptr) {
  std::string p = "slots." + std::to_string(slot);
  if (field) p += std::string(".") + field;
  return p;
}

std::optional<std::int64_t> iter_int(const bson_iter_t* it) {
  if (BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it)) return bson_iter_as_int64(it);
  if (BSON_ITER_HOLDS_DOUBLE(it)) {
    const double d = bson_iter_double(it);
    if (d == static_cast<double>(static_cast<std::int64_t>(d))) return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

// The nested document -> SemaphoreDoc; odd or missing fields take their defaults.
SemaphoreDoc parse_semaphore(const bson_t* b) {
  SemaphoreDoc d;
  bson_iter_t it;
  if (!bson_iter_init(&it, b)) return d;
  while (bson_iter_next(&it)) {
    const std::string name = bson_iter_key(&it);
    if (name == "_id" && BSON_ITER_HOLDS_UTF8(&it)) {
      d.key = bson_iter_utf8(&it, nullptr);
    } else if (name == "limit") {
      d.limit = iter_int(&it).value_or(0);
    } else if (name == "fence") {
      d.fence = iter_int(&it).value_or(0);
    } else if (name == "slots" && BSON_ITER_HOLDS_ARRAY(&it)) {
      bson_iter_t slots;
      if (!bson_iter_recurse(&it, &slots)) continue;
      while (bson_iter_next(&slots)) {
        SemaphoreSlot s;
        bson_iter_t f;
        if (BSON_ITER_HOLDS_DOCUMENT(&slots) && bson_iter_recurse(&slots, &f)) {
          while (bson_iter_next(&f)) {
            const std::string k = bson_iter_key(&f);
            if (k == "uuid" && BSON_ITER_HOLDS_UTF8(&f)) {
              std::uint32_t len = 0;
              const char* v = bson_iter_utf8(&f, &len);
              s.uuid.assign(v, len);
            } else if (k == "host" && BSON_ITER_HOLDS_UTF8(&f)) {
              std::uint32_t len = 0;
              const char* v = bson_iter_utf8(&f, &len);
              s.host.assign(v, len);
            } else if (k == "pid") {
              s.pid = iter_int(&f).value_or(0);
            } else if (k == "fence") {
              s.fence = iter_int(&f).value_or(0);
            } else if (k == "ts_created" && BSON_ITER_HOLDS_DATE_TIME(&f)) {
              s.ts_created = DateTime{bson_iter_date_time(&f)};
            } else if (k == "ts_expire" && BSON_ITER_HOLDS_DATE_TIME(&f)) {
              s.ts_expire = DateTime{bson_iter_date_time(&f)};
            }
          }
        }
        d.slots.push_back(std::move(s));  // an odd element still counts as a slot
      }
    }
  }
  return d;
}

}  // namespace

std::optional<SemaphoreDoc> MongoStorage::read_semaphore(const std::string& collection,
                                                         const std::string& key) {
  Bson filter, out;
  append_key(filter.get(), key);
  if (!impl_->conn.session().find_one_raw(collection, filter.get(), out.get(),
                                          "find (semaphore " + key + ")"))
    return std::nullopt;
  return parse_semaphore(out.get());
}

bool MongoStorage::create_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  const SemaphoreDoc d = semaphore_doc::created_doc(c);
  Bson doc;
  append_key(doc.get(), c.key);
  BSON_APPEND_INT64(doc.get(), "limit", d.limit);
  BSON_APPEND_INT64(doc.get(), "fence", d.fence);
  bson_t slots;
  BSON_APPEND_ARRAY_BEGIN(doc.get(), "slots", &slots);
  for (std::size_t i = 0; i < d.slots.size(); ++i)
    append_slot(&slots, std::to_string(i).c_str(), d.slots[i]);
  bson_append_array_end(doc.get(), &slots);
  bson_error_t error;
  if (impl_->conn.session().insert_one(collection, doc.get(), &error)) return true;
  if (is_server_error(error, kDuplicateKey)) return false;  // created by someone else
  throw_error("insert (create semaphore " + c.key + ")", error);
}

bool MongoStorage::claim_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  Bson filter, update;
  append_key(filter.get(), c.key);
  BSON_APPEND_INT64(filter.get(), "limit", c.limit);
  BSON_APPEND_INT64(filter.get(), "fence", c.old_fence);
  // Free: NOT (ts_expire > now), the negation of SemaphoreSlot::held_at.
  const std::string expire_path = slot_path(c.slot, "ts_expire");
  bson_t free, gt;
  BSON_APPEND_DOCUMENT_BEGIN(filter.get(), expire_path.c_str(), &free);
  BSON_APPEND_DOCUMENT_BEGIN(&free, "$not", &gt);
  BSON_APPEND_DATE_TIME(&gt, "$gt", c.now_ms);
  bson_append_document_end(&free, &gt);
  bson_append_document_end(filter.get(), &free);
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_INT64(&set, "fence", c.new_fence);
  append_slot(&set, slot_path(c.slot).c_str(), semaphore_doc::claimed_slot(c));
  bson_append_document_end(update.get(), &set);
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (claim semaphore " + c.key + ")");
}

bool MongoStorage::renew_semaphore(const std::string& collection, const std::string& key,
                                   std::int64_t slot, const std::string& uuid,
                                   std::int64_t fence, std::int64_t now_ms,
                                   std::int64_t expire_ms) {
  Bson filter, update;
  append_key(filter.get(), key);
  mongo_bson::append_utf8(filter.get(), slot_path(slot, "uuid").c_str(), uuid);
  BSON_APPEND_INT64(filter.get(), slot_path(slot, "fence").c_str(), fence);
  bson_t gt;
  BSON_APPEND_DOCUMENT_BEGIN(filter.get(), slot_path(slot, "ts_expire").c_str(), &gt);
  BSON_APPEND_DATE_TIME(&gt, "$gt", now_ms);
  bson_append_document_end(filter.get(), &gt);
  append_expiry_update(update.get(), slot_path(slot, "ts_expire").c_str(), expire_ms);
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (renew semaphore " + key + ")");
}

bool MongoStorage::release_semaphore(const std::string& collection, const std::string& key,
                                     std::int64_t slot, const std::string& uuid,
                                     std::int64_t fence) {
  Bson filter, update;
  append_key(filter.get(), key);
  mongo_bson::append_utf8(filter.get(), slot_path(slot, "uuid").c_str(), uuid);
  BSON_APPEND_INT64(filter.get(), slot_path(slot, "fence").c_str(), fence);
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  append_slot(&set, slot_path(slot).c_str(), semaphore_doc::empty_slot());
  bson_append_document_end(update.get(), &set);
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (release semaphore " + key + ")");
}

std::int64_t op_timeout_ms_for_ttl(double ttl_s) {
  if (!(ttl_s > 0)) return 100;
  double ms = ttl_s * 100.0;  // ttl / 10
  if (ms < 100) return 100;
  if (ms > 5000) return 5000;
  return static_cast<std::int64_t>(ms);
}

}  // namespace mongoelector

namespace mongoelector {

// Graceful handover: renew()'s filter (uuid, fence, unexpired), one atomic update_one.
bool MongoStorage::hand_over(const std::string& collection, const HandOver& h) {
  mongo_bson::check_utf8(h.to_uuid, "uuid");
  mongo_bson::check_utf8(h.to_host, "host");
  Bson filter, update;
  append_renew_filter(filter.get(), h.key, h.from_uuid, h.from_fence, h.now_ms);
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  mongo_bson::append_document(&set, h.fields());
  bson_append_document_end(update.get(), &set);
  return impl_->conn.session().update_one(collection, filter.get(), update.get(),
                                          "update (hand over " + h.key + ")");
}

}  // namespace mongoelector
