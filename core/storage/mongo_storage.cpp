// Storage over MongoDB (or a server speaking its protocol) through libmongoc: encodes and
// sends the commands that commands.h builds (the filters and updates live there, shared
// with the pymongo transport), and maps the replies. The connection (bounds, round-trip counting, error mapping)
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
#include <memory>

#include "../exceptions.h"
#include "../log.h"
#include "commands.h"
#include "mongo_bson.h"
#include "mongo_connection.h"

namespace mongoelector {

using mongo_bson::Bson;

namespace {

constexpr std::uint32_t kDuplicateKey = 11000;

std::atomic<bool> g_ttl_warned{false};

// A TTL index is a clean-up aid only; servers that refuse the option are tolerated.
bool is_ttl_rejection(const bson_error_t& e) {
  return is_server_error(e, 238)      // NotImplemented (FerretDB)
         || is_server_error(e, 197)   // InvalidIndexSpecificationOption
         || is_server_error(e, 115);  // CommandNotSupported
}

bool is_index_conflict(const bson_error_t& e) {
  return is_server_error(e, 85)      // IndexOptionsConflict
         || is_server_error(e, 86);  // IndexKeySpecsConflict
}

// Creates each index; on an index-spec conflict drops the collection's indexes and
// starts over once (as the original does); tolerates servers refusing TTL options.
void ensure_indexes(MongoConnection& conn, const std::string& collection,
                    const std::vector<commands::IndexSpec>& specs) {
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

// A command of commands.h, encoded (the transport adds only what libmongoc needs:
// write concerns and maxTimeMS in the session, one batch for a limited find).
struct Encoded {
  explicit Encoded(const commands::Command& c) {
    mongo_bson::append_tree(filter.get(), c.filter);
    mongo_bson::append_tree(update.get(), c.update);
    if (c.limit > 0) {
      BSON_APPEND_INT64(opts.get(), "limit", c.limit);
      BSON_APPEND_INT64(opts.get(), "batchSize", c.limit);
      BSON_APPEND_BOOL(opts.get(), "singleBatch", true);  // no cursor left open
    }
    if (!c.sort.empty()) mongo_bson::append_node(opts.get(), "sort", c.sort);
  }
  Bson filter, update, opts;
};

// update_one / delete_one: whether a document matched (matched, not modified: for a
// renewal, "matched but already later" is renewed too).
bool matched(MongoConnection::Session s, const commands::Command& c) {
  Encoded e(c);
  if (c.op == commands::Op::delete_one) return s.delete_one(c.collection, e.filter.get(), c.what);
  return s.update_one(c.collection, e.filter.get(), e.update.get(), c.what);
}

std::vector<Document> found(MongoConnection::Session& s, const commands::Command& c) {
  Encoded e(c);
  return s.find(c.collection, e.filter.get(), e.opts.get(), c.what,
                c.limit > 0 ? static_cast<std::size_t>(c.limit) : SIZE_MAX);
}

}  // namespace

struct MongoStorage::Impl {
  Impl(std::shared_ptr<MongoClient> c, std::int64_t op_timeout_ms)
      : client(std::move(c)),
        conn(client->pool_for(op_timeout_ms)),
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
  const auto specs = commands::lock_indexes();
  impl_->client->ensured_indexes().once(impl_->client->database(), collection, specs,
                                        [&] { ensure_indexes(impl_->conn, collection, specs); });
}

std::optional<LockDoc> MongoStorage::claim(const std::string& collection, const LockClaim& claim,
                                           bool force) {
  const commands::Command c = commands::claim(collection, claim, force);
  Encoded e(c);
  std::optional<Document> value;
  bson_error_t error;
  if (!impl_->conn.session().find_and_modify(c.collection, e.filter.get(), e.update.get(), &value,
                                             &error)) {
    if (is_server_error(error, kDuplicateKey)) return std::nullopt;  // held by someone else
    throw_error(c.what, error);
  }
  if (!value) throw StorageError(c.what + " returned no document");
  LockDoc doc = LockDoc::from_document(*value);
  if (doc.key != claim.key || doc.uuid != claim.uuid || !doc.locked || doc.fence < 1) {
    throw StorageError(c.what + " returned a document that is not the claim just written");
  }
  return doc;
}

std::optional<LockDoc> MongoStorage::insert_claim(const std::string& collection,
                                                  const LockClaim& claim) {
  const commands::Command c = commands::insert_claim(collection, claim);
  Encoded e(c);
  bson_error_t error;
  if (!impl_->conn.session().insert_one(c.collection, e.update.get(), &error)) {
    if (is_server_error(error, kDuplicateKey)) return std::nullopt;  // a document is there
    throw_error(c.what, error);
  }
  return claim.inserted();
}

std::int64_t MongoStorage::bump_epoch(const std::string& collection, const std::string& key) {
  const commands::Command c = commands::bump_epoch(collection, key);
  Encoded e(c);
  auto s = impl_->conn.session();
  for (int attempt = 0;; ++attempt) {
    std::optional<Document> value;
    bson_error_t error;
    if (s.find_and_modify(c.collection, e.filter.get(), e.update.get(), &value, &error)) {
      auto epoch = value ? value->get_int("epoch") : std::nullopt;
      if (!epoch || *epoch < 1) throw StorageError(c.what + " returned no valid epoch");
      return *epoch;
    }
    // Two first upserts can race; the loser's retry finds the document and increments
    // it (MongoDB retries this itself; emulations may not).
    if (attempt == 0 && is_server_error(error, kDuplicateKey)) continue;
    throw_error(c.what, error);
  }
}

bool MongoStorage::set_fence(const std::string& collection, const std::string& key,
                             const std::string& uuid, std::int64_t old_fence,
                             std::int64_t created_ms, std::int64_t new_fence) {
  return matched(impl_->conn.session(),
                 commands::set_fence(collection, key, uuid, old_fence, created_ms, new_fence));
}

bool MongoStorage::renew(const std::string& collection, const std::string& key,
                         const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                         std::int64_t expire_ms) {
  return matched(impl_->conn.session(),
                 commands::renew(collection, key, uuid, fence, now_ms, expire_ms));
}

bool MongoStorage::set_expiry(const std::string& collection, const std::string& key,
                              const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                              std::int64_t expire_ms, std::int64_t created_ms) {
  return matched(impl_->conn.session(), commands::renew(collection, key, uuid, fence, now_ms,
                                                        expire_ms, /*exact=*/true, created_ms));
}

namespace {
// Bad strings are refused before anything is sent, not between two commands.
template <class Request>
void check_strings(const std::vector<Request>& requests) {
  for (const Request& r : requests) {
    mongo_bson::check_utf8(r.key, "_id");
    mongo_bson::check_utf8(r.uuid, "uuid");
  }
}
}  // namespace

std::vector<bool> MongoStorage::renew_many(const std::string& collection,
                                           const std::vector<RenewRequest>& requests,
                                           std::int64_t now_ms) {
  if (requests.empty()) return {};
  check_strings(requests);
  auto s = impl_->conn.session();  // every command of the call on one connection
  return commands::renew_in_chunks<LockDoc>(
      requests, max_renew_batch(), [&](std::size_t from, std::size_t to) {
        for (const RenewGroup& g : renew_groups(requests, from, to)) {
          const commands::Command c = commands::renew_group(collection, requests, g, now_ms);
          Encoded e(c);
          // The matched count is not used: it cannot say WHICH requests matched.
          (void)s.update_many(c.collection, e.filter.get(), e.update.get(), c.what);
        }
        std::vector<std::string> keys;
        keys.reserve(to - from);
        for (std::size_t i = from; i < to; ++i) keys.push_back(requests[i].key);
        std::map<std::string, LockDoc> docs;
        for (const Document& d : found(s, commands::read_keys(collection, keys))) {
          LockDoc doc = LockDoc::from_document(d);
          docs.emplace(doc.key, std::move(doc));
        }
        return docs;
      });
}

const void* MongoStorage::batch_domain() const { return impl_->domain.get(); }

std::shared_ptr<ClockSampleBoard> MongoStorage::clock_sample_board() {
  return impl_->domain->board;
}

bool MongoStorage::release(const std::string& collection, const std::string& key,
                           const std::optional<std::string>& uuid, std::int64_t fence,
                           std::int64_t now_ms, bool delete_document) {
  return matched(impl_->conn.session(),
                 commands::release(collection, key, uuid, fence, now_ms, delete_document));
}

std::vector<std::optional<LockDoc>> MongoStorage::read_many(const std::string& collection,
                                                            const std::vector<std::string>& keys) {
  if (keys.empty()) return {};
  for (const std::string& k : keys) mongo_bson::check_utf8(k, "_id");
  auto s = impl_->conn.session();
  commands::Command c = commands::read_keys(collection, keys);
  c.what = "find (read_many)";
  c.limit = 0;  // a cursor (getMore past the first batch), not one batch capped at 16 MB
  std::map<std::string, LockDoc> by_key;
  for (const Document& d : found(s, c)) {
    LockDoc doc = LockDoc::from_document(d);
    by_key.emplace(doc.key, std::move(doc));
  }
  std::vector<std::optional<LockDoc>> docs;
  docs.reserve(keys.size());
  for (const std::string& k : keys) {
    auto it = by_key.find(k);
    docs.push_back(it == by_key.end() ? std::nullopt : std::optional<LockDoc>(it->second));
  }
  return docs;
}

std::optional<LockDoc> MongoStorage::read(const std::string& collection, const std::string& key) {
  auto s = impl_->conn.session();
  auto docs = found(s, commands::read(collection, key));
  if (docs.empty()) return std::nullopt;
  return LockDoc::from_document(docs.front());
}

void MongoStorage::ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) {
  const auto specs = commands::status_indexes(ttl_s);
  impl_->client->ensured_indexes().once(impl_->client->database(), collection, specs,
                                        [&] { ensure_indexes(impl_->conn, collection, specs); });
}

void MongoStorage::put_status(const std::string& collection, const Document& doc) {
  const commands::Command c = commands::put_status(collection, doc);
  Encoded e(c);
  BSON_APPEND_BOOL(e.opts.get(), "upsert", true);
  impl_->conn.session().replace_one(c.collection, e.filter.get(), e.update.get(), e.opts.get(),
                                    c.what);
}

std::vector<Document> MongoStorage::list_status(const std::string& collection,
                                                const std::string& key) {
  auto s = impl_->conn.session();
  return found(s, commands::list_status(collection, key));
}

// ---------------------------------------------------------------- semaphores ----

namespace {

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
    } else if (name == "kind") {
      // Any other type: a kind nobody knows (the document is refused, never taken for a
      // semaphore's).
      if (BSON_ITER_HOLDS_UTF8(&it)) {
        std::uint32_t len = 0;
        const char* v = bson_iter_utf8(&it, &len);
        d.kind.assign(v, len);
      } else {
        d.kind = "?";
      }
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
    } else if (name == "queue" && BSON_ITER_HOLDS_ARRAY(&it)) {
      bson_iter_t queue;
      if (!bson_iter_recurse(&it, &queue)) continue;
      while (bson_iter_next(&queue)) {
        QueueEntry e;
        bson_iter_t f;
        if (BSON_ITER_HOLDS_DOCUMENT(&queue) && bson_iter_recurse(&queue, &f)) {
          while (bson_iter_next(&f)) {
            const std::string k = bson_iter_key(&f);
            if (k == "uuid" && BSON_ITER_HOLDS_UTF8(&f)) {
              std::uint32_t len = 0;
              const char* v = bson_iter_utf8(&f, &len);
              e.uuid.assign(v, len);
            } else if (k == "ticket") {
              e.ticket = iter_int(&f).value_or(0);
            } else if (k == "ts_expire" && BSON_ITER_HOLDS_DATE_TIME(&f)) {
              e.expire_ms = bson_iter_date_time(&f);
            }
          }
        }
        d.queue.push_back(std::move(e));  // an odd element still keeps its place
      }
    }
  }
  return d;
}

}  // namespace

std::optional<SemaphoreDoc> MongoStorage::read_semaphore(const std::string& collection,
                                                         const std::string& key) {
  const commands::Command c = commands::read(collection, key);
  Encoded e(c);
  Bson out;
  if (!impl_->conn.session().find_one_raw(c.collection, e.filter.get(), out.get(), c.what))
    return std::nullopt;
  return parse_semaphore(out.get());
}

bool MongoStorage::create_semaphore(const std::string& collection, const SemaphoreClaim& claim) {
  const commands::Command c = commands::create_semaphore(collection, claim);
  Encoded e(c);
  bson_error_t error;
  if (impl_->conn.session().insert_one(c.collection, e.update.get(), &error)) return true;
  if (is_server_error(error, kDuplicateKey)) return false;  // created by someone else
  throw_error(c.what, error);
}

bool MongoStorage::claim_semaphore(const std::string& collection, const SemaphoreClaim& claim) {
  return matched(impl_->conn.session(), commands::claim_semaphore(collection, claim));
}

bool MongoStorage::renew_semaphore(const std::string& collection, const std::string& key,
                                   std::int64_t slot, const std::string& uuid, std::int64_t fence,
                                   std::int64_t now_ms, std::int64_t expire_ms) {
  return matched(impl_->conn.session(),
                 commands::renew_semaphore(collection, key, slot, uuid, fence, now_ms, expire_ms));
}

std::vector<bool> MongoStorage::renew_semaphores(const std::string& collection,
                                                 const std::vector<SemaphoreRenewRequest>& requests,
                                                 std::int64_t now_ms) {
  if (requests.empty()) return {};
  check_strings(requests);
  auto s = impl_->conn.session();  // every command of the call on one connection
  return commands::renew_in_chunks<SemaphoreDoc>(
      requests, max_renew_batch(), [&](std::size_t from, std::size_t to) {
        const commands::Command c =
            commands::renew_semaphores(collection, requests, from, to, now_ms);
        std::vector<std::unique_ptr<Bson>> encoded;  // owns what `statements` points at
        std::vector<std::pair<const bson_t*, const bson_t*>> statements;
        for (const commands::Statement& st : c.statements) {
          encoded.push_back(std::make_unique<Bson>());
          mongo_bson::append_tree(encoded.back()->get(), st.filter);
          encoded.push_back(std::make_unique<Bson>());
          mongo_bson::append_tree(encoded.back()->get(), st.update);
          statements.emplace_back(encoded[encoded.size() - 2]->get(), encoded.back()->get());
        }
        s.update_bulk(c.collection, statements, c.what);
        const auto read =
            commands::read_keys(collection, commands::semaphore_keys(requests, from, to));
        Encoded e(read);
        std::map<std::string, SemaphoreDoc> docs;
        s.find_each(read.collection, e.filter.get(), e.opts.get(), read.what,
                    static_cast<std::size_t>(read.limit), [&](const bson_t* raw) {
                      SemaphoreDoc d = parse_semaphore(raw);
                      docs.emplace(d.key, std::move(d));
                    });
        return docs;
      });
}

bool MongoStorage::release_semaphore(const std::string& collection, const std::string& key,
                                     std::int64_t slot, const std::string& uuid,
                                     std::int64_t fence) {
  return matched(impl_->conn.session(),
                 commands::release_semaphore(collection, key, slot, uuid, fence));
}

bool MongoStorage::renew_queue_entry(const std::string& collection, const std::string& key,
                                     std::int64_t index, const std::string& uuid,
                                     std::int64_t ticket, std::int64_t now_ms,
                                     std::int64_t expire_ms) {
  return matched(impl_->conn.session(), commands::renew_queue_entry(collection, key, index, uuid,
                                                                    ticket, now_ms, expire_ms));
}

bool MongoStorage::leave_queue(const std::string& collection, const std::string& key,
                               const std::string& uuid, std::int64_t ticket) {
  return matched(impl_->conn.session(), commands::leave_queue(collection, key, uuid, ticket));
}

bool MongoStorage::hand_over(const std::string& collection, const HandOver& h) {
  mongo_bson::check_utf8(h.to_uuid, "uuid");
  mongo_bson::check_utf8(h.to_host, "host");
  return matched(impl_->conn.session(), commands::hand_over(collection, h));
}

bool MongoStorage::set_payload(const std::string& collection, const PayloadWrite& w) {
  if (w.json) mongo_bson::check_utf8(*w.json, "payload");
  return matched(impl_->conn.session(), commands::set_payload(collection, w));
}

std::int64_t op_timeout_ms_for_ttl(double ttl_s) {
  if (!(ttl_s > 0)) return 100;
  double ms = ttl_s * 100.0;  // ttl / 10
  if (ms < 100) return 100;
  if (ms > 5000) return 5000;
  return static_cast<std::int64_t>(ms);
}

std::int64_t setup_timeout_ms(std::int64_t op_timeout_ms, std::int64_t selection_timeout_ms) {
  const std::int64_t setup =
      selection_timeout_ms > 0 ? std::min(kSetupTimeoutMs, selection_timeout_ms) : kSetupTimeoutMs;
  return std::max(op_timeout_ms, setup);
}

}  // namespace mongoelector
