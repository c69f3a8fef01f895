#include "pymongo_storage.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "convert.h"
#include "exceptions.h"
#include "gil.h"
#include "log.h"
#include "semaphore/semaphore_doc.h"
#include "server_clock.h"

namespace mongoelector_py {

namespace me = mongoelector;

namespace {
// MongoDB's duplicate-key codes: a conditional upsert that hit a held lock.
bool is_duplicate_key_code(int code) { return code == 11000 || code == 11001 || code == 12582; }
// Codes of servers that refuse TTL indexes: NotImplemented (FerretDB),
// InvalidIndexSpecificationOption, CommandNotSupported.
bool is_unsupported_code(int code) { return code == 238 || code == 197 || code == 115; }

int error_code(const py::error_already_set& e) {
  py::object code = py::getattr(e.value(), "code", py::none());
  if (code.is_none()) return 0;
  try {
    return code.cast<int>();
  } catch (py::cast_error&) {
    return 0;
  }
}

std::int64_t host_wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// pymongo.timeout(seconds) entered for one storage call (client-side operation timeout,
// pymongo >= 4.2): bounds server selection, connection checkout and the round trip, so
// that a hung call cannot outlive the lease.
class TimeoutScope {
 public:
  TimeoutScope(const py::object& timeout_fn, double seconds) {
    if (timeout_fn.is_none() || seconds <= 0) return;
    cm_ = timeout_fn(seconds);
    cm_.attr("__enter__")();
  }
  ~TimeoutScope() {
    if (!cm_) return;
    try {
      cm_.attr("__exit__")(py::none(), py::none(), py::none());
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(__func__);
    }
  }
  TimeoutScope(const TimeoutScope&) = delete;
  TimeoutScope& operator=(const TimeoutScope&) = delete;

 private:
  py::object cm_;
};
}  // namespace

struct PyMongoStorage::Refs {
  py::object db;
  py::object return_after;         // pymongo.ReturnDocument.AFTER
  py::object duplicate_key_error;  // pymongo.errors.DuplicateKeyError
  py::object operation_failure;    // pymongo.errors.OperationFailure
  py::object timeout_fn;           // pymongo.timeout, or None
  // Collection objects by name: db[name] builds a new Collection (name checks, codec
  // options) on every call; the lock, fences and status collections are asked for on
  // every poll.
  py::dict collections;
};

// What the storages of one pymongo client and database share (batch_domain()). It holds
// the client object, so the client's id() cannot be reused while the domain lives.
struct PyMongoStorage::Domain {
  SharedPyObject owner;
  std::shared_ptr<me::ClockSampleBoard> board = std::make_shared<me::ClockSampleBoard>();
};

namespace {
// (id of the client object, database name) -> the live domain. Needs the GIL (the key's
// object must stay alive while it is looked up).
std::shared_ptr<PyMongoStorage::Domain> domain_of(const py::object& db) {
  static std::mutex mu;
  static std::map<std::pair<std::uintptr_t, std::string>, std::weak_ptr<PyMongoStorage::Domain>>
      registry;
  // A lookalike without `client` is a domain of its own database object.
  py::object owner = py::getattr(db, "client", py::none());
  if (owner.is_none()) owner = db;
  std::string name;
  py::object n = py::getattr(db, "name", py::none());
  if (!n.is_none()) name = py::str(n).cast<std::string>();
  const auto key = std::make_pair(reinterpret_cast<std::uintptr_t>(owner.ptr()), name);
  std::lock_guard<std::mutex> g(mu);
  for (auto it = registry.begin(); it != registry.end();)  // forget dead domains
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  if (auto live = registry[key].lock()) return live;
  auto d = std::make_shared<PyMongoStorage::Domain>();
  d->owner = SharedPyObject(owner);
  registry[key] = d;
  return d;
}

// {$max: {field: expire}}: renewals never lower an expiry (core/storage.h, renew()); with
// `exact`, set_expiry's {$set: {field: expire}}.
py::dict expiry_update(const std::string& field, std::int64_t expire_ms, bool exact = false) {
  py::dict op;
  op[py::str(field)] = datetime_from_ms(expire_ms);
  py::dict update;
  update[exact ? "$set" : "$max"] = op;
  return update;
}

// renew()'s filter (and set_expiry's, hand_over's).
py::dict renew_filter(const std::string& key, const std::string& uuid, std::int64_t fence,
                      const py::object& now) {
  py::dict filter;
  filter["_id"] = key;
  filter["locked"] = true;
  filter["uuid"] = uuid;
  if (fence != 0) filter["fence"] = fence;
  filter["ts_expire"] = py::dict(py::arg("$gt") = now);
  return filter;
}
}  // namespace

PyMongoStorage::PyMongoStorage(py::object db, double op_timeout_s,
                               std::shared_ptr<ServerFacts> facts)
    : refs_(new Refs), op_timeout_s_(op_timeout_s), facts_(std::move(facts)) {
  if (facts_) {
    std::lock_guard<std::mutex> g(facts_->mu);
    time_command_ = facts_->time_command;
  }
  py::module_ pymongo = py::module_::import("pymongo");
  refs_->db = std::move(db);
  refs_->return_after = pymongo.attr("ReturnDocument").attr("AFTER");
  py::module_ errors = py::module_::import("pymongo.errors");
  refs_->duplicate_key_error = errors.attr("DuplicateKeyError");
  refs_->operation_failure = errors.attr("OperationFailure");
  refs_->timeout_fn = py::getattr(pymongo, "timeout", py::none());

  py::object database_type = py::module_::import("pymongo.database").attr("Database");
  bool real = py::isinstance(refs_->db, database_type);
  real_ = real;
  csot_ = real && !refs_->timeout_fn.is_none();
  std::string module = py::str(py::type::of(refs_->db).attr("__module__"));
  mock_ = !real && module.rfind("mongomock", 0) == 0;
  domain_ = domain_of(refs_->db);
}

PyMongoStorage::~PyMongoStorage() {
  if (interpreter_finalizing()) return;  // leak: decref'ing now would crash
  py::gil_scoped_acquire gil;
  delete refs_;
}

py::object PyMongoStorage::db() const { return refs_->db; }

py::object PyMongoStorage::collection(const std::string& name) {
  py::str key(name);
  if (refs_->collections.contains(key)) return refs_->collections[key];
  py::object coll = refs_->db[key];
  if (real_) coll = with_majority_writes(coll);
  refs_->collections[key] = coll;
  return coll;
}

// Lock, fence and release writes must survive a primary failover: a w:1 write can be
// rolled back and hand a key (or a token) out twice. The user's client is honoured in
// everything else (auth, TLS, read preference, listeners) and in a write concern at
// least as strong as majority; a weaker one (unset, w:0, w:1) is raised to
// {w: "majority", wtimeout: op_timeout}, keeping the user's `j`.
py::object PyMongoStorage::with_majority_writes(py::object coll) {
  py::object wc = coll.attr("write_concern");
  py::dict doc = wc.attr("document");
  py::object w = doc.attr("get")("w");
  const bool weak = w.is_none() || (py::isinstance<py::int_>(w) && w.cast<long long>() <= 1);
  if (!weak) return coll;
  py::dict kwargs;
  kwargs["w"] = "majority";
  kwargs["wtimeout"] = ms_from_seconds(op_timeout_s_);
  if (doc.contains("j")) kwargs["j"] = doc["j"];
  py::object majority = py::module_::import("pymongo.write_concern").attr("WriteConcern")(**kwargs);
  return coll.attr("with_options")(py::arg("write_concern") = majority);
}

// Runs f() with the GIL and, for a real pymongo Database, inside pymongo.timeout().
template <class F>
auto PyMongoStorage::with_python(F&& f) {
  if (interpreter_finalizing())
    throw me::StorageUnavailable("the Python interpreter is shutting down");
  py::gil_scoped_acquire gil;
  TimeoutScope scope(csot_ ? refs_->timeout_fn : py::object(py::none()), op_timeout_s_);
  return f();
}

std::int64_t PyMongoStorage::call_bound_ms() const {
  // mongomock runs in this process and never waits on a network: a call ends within
  // the budget as surely as a pymongo call under pymongo.timeout().
  return csot_ || mock_ ? ms_from_seconds(op_timeout_s_) : 0;
}

me::ServerInfo PyMongoStorage::server_info() {
  if (facts_) {
    std::lock_guard<std::mutex> g(facts_->mu);
    if (facts_->info && !mock_) return *facts_->info;
  }
  me::ServerInfo info = probe_server_info();
  if (facts_ && !mock_) {
    std::lock_guard<std::mutex> g(facts_->mu);
    facts_->info = info;
  }
  return info;
}

me::ServerInfo PyMongoStorage::probe_server_info() {
  return with_python([&] {
    me::ServerInfo info;
    if (mock_) {
      // mongomock runs in this process, one operation at a time.
      info.name = "mongomock";
      info.atomic_find_and_modify = true;
      return info;
    }
    py::object reply;
    try {
      reply = refs_->db.attr("command")("buildInfo");
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_NotImplementedError)) throw;
      mock_ = true;  // a lookalike that runs no server commands: an in-process fake
      info.name = "in-process fake database";
      info.atomic_find_and_modify = true;
      return info;
    }
    py::object get = py::getattr(reply, "get");
    py::object version = get("version");
    info.version = version.is_none() ? "" : py::str(version).cast<std::string>();
    py::object ferret = get("ferretdbVersion");
    if (!ferret.is_none() || !get("ferretdb").is_none()) {
      // Reads then writes in findAndModify/update (protocol notes): not atomic.
      info.name = "FerretDB";
      if (!ferret.is_none()) info.version = py::str(ferret).cast<std::string>();
      info.atomic_find_and_modify = false;
      return info;
    }
    if (!get("gitVersion").is_none()) {  // every mongod/mongos reports it
      info.name = "MongoDB";
      info.atomic_find_and_modify = true;
      return info;
    }
    // mongo-java-server: buildInfo is bare, serverStatus says process "java"; its
    // collection operations are synchronized (atomic).
    try {
      py::object status = refs_->db.attr("command")("serverStatus");
      py::object process = py::getattr(status, "get")("process");
      if (!process.is_none() && py::str(process).cast<std::string>() == "java") {
        info.name = "mongo-java-server";
        info.atomic_find_and_modify = true;
        return info;
      }
    } catch (py::error_already_set& e) {
      if (!e.matches(refs_->operation_failure)) throw;
    }
    // Unknown emulation: not assumed atomic, so the Locker's safety check applies.
    info.name = "unknown MongoDB-compatible server";
    info.atomic_find_and_modify = false;
    return info;
  });
}

std::int64_t PyMongoStorage::server_time_ms() {
  if (mock_) return host_wall_ms();
  return with_python([&]() -> std::int64_t {
    // hello needs no privileges (serverStatus may); mongo-java-server knows only
    // isMaster. The first command that answers with localTime is remembered.
    static const char* const kCommands[] = {"hello", "isMaster", "serverStatus"};
    for (int i = time_command_.load(); i < 3; ++i) {
      py::object reply;
      try {
        reply = refs_->db.attr("command")(kCommands[i]);
      } catch (py::error_already_set& e) {
        if (e.matches(PyExc_NotImplementedError)) {
          mock_ = true;  // mongomock: the "server" is this process
          return host_wall_ms();
        }
        if (e.matches(refs_->operation_failure)) continue;
        throw;
      }
      if (auto ms = ms_from_datetime(py::getattr(reply, "get")("localTime"))) {
        time_command_ = i;
        if (facts_) {
          std::lock_guard<std::mutex> g(facts_->mu);
          facts_->time_command = i;
        }
        return *ms;
      }
    }
    throw me::StorageError("the server reports no localTime in hello or serverStatus");
  });
}

void PyMongoStorage::ensure_ttl_index(const py::object& coll, const char* field,
                                      std::int64_t seconds) {
  auto create = [&] { coll.attr("create_index")(field, py::arg("expireAfterSeconds") = seconds); };
  auto tolerate = [&](const py::error_already_set& e) {
    if (!is_unsupported_code(error_code(e))) return false;
    if (!ttl_warned_.exchange(true))
      me::log(me::LogLevel::Warning,
              "the server does not support TTL indexes (" + py::str(e.value()).cast<std::string>() +
                  "); expired lock documents stay until overwritten, which the protocol does "
                  "not need");
    return true;
  };
  try {
    create();
    return;
  } catch (py::error_already_set& e) {
    if (!e.matches(refs_->operation_failure)) throw;
    if (tolerate(e)) return;
  }
  // An index of another spec exists: drop the indexes and create again, as the original.
  coll.attr("drop_indexes")();
  try {
    create();
  } catch (py::error_already_set& e) {
    if (!e.matches(refs_->operation_failure) || !tolerate(e)) throw;
  }
}

void PyMongoStorage::ensure_lock_indexes(const std::string& collection) {
  with_python([&] { ensure_ttl_index(this->collection(collection), "ts_expire", 0); });
}

std::optional<me::LockDoc> PyMongoStorage::claim(const std::string& collection,
                                                 const me::LockClaim& c, bool force) {
  return with_python([&]() -> std::optional<me::LockDoc> {
    py::object now = datetime_from_ms(c.now_ms);
    py::dict filter;
    filter["_id"] = c.key;
    if (!force) {
      // "Free or expired": absent / released / no usable expiry / expired. A held lock
      // matches nothing, so the upsert becomes an insert of an existing _id: E11000.
      py::dict not_locked, expired, gt, not_gt;
      not_locked["locked"] = py::dict(py::arg("$ne") = true);
      gt["$gt"] = now;
      not_gt["$not"] = gt;
      expired["ts_expire"] = not_gt;
      py::list any;
      any.append(not_locked);
      any.append(expired);
      filter["$or"] = any;
    }
    py::dict set;
    set["locked"] = true;
    set["host"] = c.host;
    set["uuid"] = c.uuid;
    set["pid"] = c.pid;
    set["ts_created"] = now;
    set["ts_expire"] = datetime_from_ms(c.expire_ms);
    py::dict update;
    update["$set"] = set;
    update["$inc"] = py::dict(py::arg("fence") = 1);
    py::object result;
    try {
      result = this->collection(collection).attr("find_one_and_update")(
          filter, update, py::arg("upsert") = true, py::arg("return_document") = refs_->return_after);
    } catch (py::error_already_set& e) {
      if (e.matches(refs_->duplicate_key_error)) return std::nullopt;
      if (e.matches(refs_->operation_failure) && is_duplicate_key_code(error_code(e)))
        return std::nullopt;
      throw;
    }
    if (result.is_none()) throw me::StorageError("findAndModify upsert returned no document");
    return me::LockDoc::from_document(doc_from_py(result));
  });
}

std::int64_t PyMongoStorage::bump_epoch(const std::string& collection, const std::string& key) {
  return with_python([&]() -> std::int64_t {
    py::object fences = this->collection(collection + ".fences");
    py::dict update;
    update["$inc"] = py::dict(py::arg("epoch") = 1);
    for (int attempt = 0;; ++attempt) {
      try {
        py::object doc = fences.attr("find_one_and_update")(
            py::dict(py::arg("_id") = key), update, py::arg("upsert") = true,
            py::arg("return_document") = refs_->return_after);
        if (doc.is_none()) throw me::StorageError("epoch upsert returned no document");
        auto v = value_from_py(py::getattr(doc, "get")("epoch"));
        if (!v || !std::holds_alternative<std::int64_t>(*v))
          throw me::StorageError("epoch document of " + key + " has no integer epoch");
        return std::get<std::int64_t>(*v);
      } catch (py::error_already_set& e) {
        // Two first-time upserts raced on one _id: the loser retries once and increments.
        if (attempt == 0 && e.matches(refs_->duplicate_key_error)) continue;
        throw;
      }
    }
  });
}

bool PyMongoStorage::set_fence(const std::string& collection, const std::string& key,
                               const std::string& uuid, std::int64_t old_fence,
                               std::int64_t created_ms, std::int64_t new_fence) {
  return with_python([&] {
    py::dict filter;
    filter["_id"] = key;
    filter["locked"] = true;
    filter["uuid"] = uuid;
    filter["fence"] = old_fence;
    filter["ts_created"] = datetime_from_ms(created_ms);
    py::dict update;
    update["$set"] = py::dict(py::arg("fence") = new_fence);
    py::object r = this->collection(collection).attr("update_one")(filter, update);
    return r.attr("matched_count").cast<std::int64_t>() > 0;
  });
}

bool PyMongoStorage::renew(const std::string& collection, const std::string& key,
                           const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                           std::int64_t expire_ms) {
  return write_expiry(collection, key, uuid, fence, now_ms, expire_ms, /*exact=*/false);
}

bool PyMongoStorage::set_expiry(const std::string& collection, const std::string& key,
                                const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                                std::int64_t expire_ms) {
  return write_expiry(collection, key, uuid, fence, now_ms, expire_ms, /*exact=*/true);
}

bool PyMongoStorage::write_expiry(const std::string& collection, const std::string& key,
                                  const std::string& uuid, std::int64_t fence,
                                  std::int64_t now_ms, std::int64_t expire_ms, bool exact) {
  return with_python([&] {
    py::dict filter = renew_filter(key, uuid, fence, datetime_from_ms(now_ms));
    // matched_count: for a renewal, "matched but already later" is renewed too.
    py::object r = this->collection(collection).attr("update_one")(
        filter, expiry_update("ts_expire", expire_ms, exact));
    return r.attr("matched_count").cast<std::int64_t>() > 0;
  });
}

std::size_t PyMongoStorage::max_renew_batch() const {
  if (!facts_) return renew_batch_for(std::nullopt);  // made without shared facts
  std::lock_guard<std::mutex> g(facts_->mu);
  return renew_batch_for(facts_->info);
}

std::vector<bool> PyMongoStorage::renew_many(const std::string& collection,
                                             const std::vector<me::RenewRequest>& requests,
                                             std::int64_t now_ms) {
  if (requests.empty()) return {};
  auto batched = with_python([&]() -> std::optional<std::vector<bool>> {
    py::object coll = this->collection(collection);
    if (!py::hasattr(coll, "update_many")) return std::nullopt;
    std::vector<bool> renewed(requests.size(), false);
    py::object now = datetime_from_ms(now_ms);
    const std::size_t chunk = std::max<std::size_t>(1, max_renew_batch());
    for (std::size_t from = 0; from < requests.size(); from += chunk) {
      const std::size_t to = std::min(requests.size(), from + chunk);
      // One update_many per group (core/storage.h, renew_groups: $in lists, not an $or).
      for (const me::RenewGroup& g : me::renew_groups(requests, from, to)) {
        py::list keys, uuids, fences;
        for (std::size_t i : g.members) {
          keys.append(py::str(requests[i].key));
          uuids.append(py::str(requests[i].uuid));
          fences.append(py::int_(requests[i].fence));
        }
        py::dict filter;
        filter["_id"] = py::dict(py::arg("$in") = keys);
        filter["locked"] = true;
        filter["uuid"] = py::dict(py::arg("$in") = uuids);
        filter["ts_expire"] = py::dict(py::arg("$gt") = now);
        if (g.fenced) filter["fence"] = py::dict(py::arg("$in") = fences);
        // Its counts are not used: they cannot say WHICH requests matched.
        coll.attr("update_many")(filter, expiry_update("ts_expire", g.expire_ms));
      }
      py::list keys;
      for (std::size_t i = from; i < to; ++i) keys.append(py::str(requests[i].key));
      py::dict filter;
      filter["_id"] = py::dict(py::arg("$in") = keys);
      // A negative limit: one batch, the cursor closed by the server (no getMore).
      const auto n = static_cast<long long>(to - from);
      py::object cursor = coll.attr("find")(filter, py::arg("limit") = -n);
      std::map<std::string, me::LockDoc> found;
      for (py::handle d : cursor) {
        me::LockDoc doc = me::LockDoc::from_document(doc_from_py(d));
        found.emplace(doc.key, std::move(doc));
      }
      for (std::size_t i = from; i < to; ++i) {
        auto it = found.find(requests[i].key);
        renewed[i] = it != found.end() && requests[i].renewed_by(it->second);
      }
    }
    return std::optional<std::vector<bool>>(std::move(renewed));
  });
  if (batched) return std::move(*batched);
  return Storage::renew_many(collection, requests, now_ms);
}

const void* PyMongoStorage::batch_domain() const { return domain_.get(); }

std::shared_ptr<me::ClockSampleBoard> PyMongoStorage::clock_sample_board() {
  return domain_->board;
}

bool PyMongoStorage::release(const std::string& collection, const std::string& key,
                             const std::optional<std::string>& uuid, std::int64_t fence,
                             std::int64_t now_ms, bool delete_document) {
  return with_python([&] {
    py::dict filter;
    filter["_id"] = key;
    if (uuid) {
      filter["uuid"] = *uuid;
      // The hold, not just the owner: a late release cannot free a newer hold.
      if (fence != 0) filter["fence"] = fence;
    }
    py::object coll = this->collection(collection);
    if (delete_document)
      return coll.attr("delete_one")(filter).attr("deleted_count").cast<std::int64_t>() > 0;
    py::dict set;
    set["locked"] = false;
    set["ts_expire"] = datetime_from_ms(now_ms);
    py::dict update;
    update["$set"] = set;
    return coll.attr("update_one")(filter, update).attr("matched_count").cast<std::int64_t>() > 0;
  });
}

std::optional<me::LockDoc> PyMongoStorage::read(const std::string& collection,
                                                const std::string& key) {
  return with_python([&]() -> std::optional<me::LockDoc> {
    py::object doc =
        this->collection(collection).attr("find_one")(py::dict(py::arg("_id") = key));
    if (doc.is_none()) return std::nullopt;
    return me::LockDoc::from_document(doc_from_py(doc));
  });
}

void PyMongoStorage::ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) {
  with_python([&] {
    py::object coll = this->collection(collection);
    ensure_ttl_index(coll, "timestamp", ttl_s);
    coll.attr("create_index")("key");
  });
}

void PyMongoStorage::put_status(const std::string& collection, const me::Document& doc) {
  const me::Value* id = doc.get("_id");
  if (id == nullptr) throw me::InvalidArgument("status document without _id");
  with_python([&] {
    py::dict filter;
    filter["_id"] = to_py(*id);
    this->collection(collection).attr("replace_one")(filter, to_py(doc), py::arg("upsert") = true);
  });
}

std::vector<me::Document> PyMongoStorage::list_status(const std::string& collection,
                                                      const std::string& key) {
  return with_python([&] {
    std::vector<me::Document> out;
    py::object cursor = this->collection(collection)
                            .attr("find")(py::dict(py::arg("key") = key))
                            .attr("sort")("timestamp", -1);
    for (py::handle d : cursor) out.push_back(doc_from_py(d));
    return out;
  });
}

// ---------------------------------------------------------------- semaphores ----

namespace {

py::dict slot_to_py(const me::SemaphoreSlot& s) {
  py::dict d;
  d["uuid"] = s.uuid;
  d["host"] = s.host;
  d["pid"] = s.pid;
  d["fence"] = s.fence;
  d["ts_created"] = datetime_from_ms(s.ts_created ? s.ts_created->ms : 0);
  d["ts_expire"] = datetime_from_ms(s.ts_expire ? s.ts_expire->ms : 0);
  return d;
}

std::string slot_path(std::int64_t slot, const char* field = nullptr) {
  std::string p = "slots." + std::to_string(slot);
  if (field) p += std::string(".") + field;
  return p;
}

// The nested document (a dict from pymongo or mongomock) -> SemaphoreDoc; odd or missing
// fields take their defaults, as the libmongoc backend reads them.
me::SemaphoreDoc semaphore_from_py(py::handle doc) {
  me::Document top = doc_from_py(doc);
  me::SemaphoreDoc d;
  d.key = top.get_string("_id").value_or("");
  d.limit = top.get_int("limit").value_or(0);
  d.fence = top.get_int("fence").value_or(0);
  py::object slots = py::getattr(doc, "get")("slots");
  if (py::isinstance<py::list>(slots) || py::isinstance<py::tuple>(slots)) {
    for (py::handle item : slots) {
      me::SemaphoreSlot s;
      if (py::isinstance<py::dict>(item) || py::hasattr(item, "items")) {
        me::Document f = doc_from_py(item);
        s.uuid = f.get_string("uuid").value_or("");
        s.host = f.get_string("host").value_or("");
        s.pid = f.get_int("pid").value_or(0);
        s.fence = f.get_int("fence").value_or(0);
        s.ts_created = f.get_date("ts_created");
        s.ts_expire = f.get_date("ts_expire");
      }
      d.slots.push_back(std::move(s));
    }
  }
  return d;
}

}  // namespace

std::optional<me::SemaphoreDoc> PyMongoStorage::read_semaphore(const std::string& collection,
                                                               const std::string& key) {
  return with_python([&]() -> std::optional<me::SemaphoreDoc> {
    py::object doc =
        this->collection(collection).attr("find_one")(py::dict(py::arg("_id") = key));
    if (doc.is_none()) return std::nullopt;
    return semaphore_from_py(doc);
  });
}

bool PyMongoStorage::create_semaphore(const std::string& collection,
                                      const me::SemaphoreClaim& c) {
  const me::SemaphoreDoc d = me::semaphore_doc::created_doc(c);  // checks before the call
  return with_python([&] {
    py::dict doc;
    doc["_id"] = c.key;
    doc["limit"] = d.limit;
    doc["fence"] = d.fence;
    py::list slots;
    for (const auto& s : d.slots) slots.append(slot_to_py(s));
    doc["slots"] = slots;
    try {
      this->collection(collection).attr("insert_one")(doc);
    } catch (py::error_already_set& e) {
      if (e.matches(refs_->duplicate_key_error)) return false;  // created by someone else
      if (e.matches(refs_->operation_failure) && is_duplicate_key_code(error_code(e)))
        return false;
      throw;
    }
    return true;
  });
}

bool PyMongoStorage::claim_semaphore(const std::string& collection,
                                     const me::SemaphoreClaim& c) {
  return with_python([&] {
    py::dict filter;
    filter["_id"] = c.key;
    filter["limit"] = c.limit;
    filter["fence"] = c.old_fence;
    // Free: NOT (ts_expire > now), the negation of SemaphoreSlot::held_at.
    py::dict gt;
    gt["$gt"] = datetime_from_ms(c.now_ms);
    filter[py::str(slot_path(c.slot, "ts_expire"))] = py::dict(py::arg("$not") = gt);
    py::dict set;
    set["fence"] = c.new_fence;
    set[py::str(slot_path(c.slot))] = slot_to_py(me::semaphore_doc::claimed_slot(c));
    py::dict update;
    update["$set"] = set;
    py::object r = this->collection(collection).attr("update_one")(filter, update);
    return r.attr("matched_count").cast<std::int64_t>() > 0;
  });
}

bool PyMongoStorage::renew_semaphore(const std::string& collection, const std::string& key,
                                     std::int64_t slot, const std::string& uuid,
                                     std::int64_t fence, std::int64_t now_ms,
                                     std::int64_t expire_ms) {
  return with_python([&] {
    py::dict filter;
    filter["_id"] = key;
    filter[py::str(slot_path(slot, "uuid"))] = uuid;
    filter[py::str(slot_path(slot, "fence"))] = fence;
    filter[py::str(slot_path(slot, "ts_expire"))] =
        py::dict(py::arg("$gt") = datetime_from_ms(now_ms));
    py::object r = this->collection(collection).attr("update_one")(
        filter, expiry_update(slot_path(slot, "ts_expire"), expire_ms));
    return r.attr("matched_count").cast<std::int64_t>() > 0;
  });
}

bool PyMongoStorage::release_semaphore(const std::string& collection, const std::string& key,
                                       std::int64_t slot, const std::string& uuid,
                                       std::int64_t fence) {
  return with_python([&] {
    py::dict filter;
    filter["_id"] = key;
    filter[py::str(slot_path(slot, "uuid"))] = uuid;
    filter[py::str(slot_path(slot, "fence"))] = fence;
    py::dict set;
    set[py::str(slot_path(slot))] = slot_to_py(me::semaphore_doc::empty_slot());
    py::dict update;
    update["$set"] = set;
    py::object r = this->collection(collection).attr("update_one")(filter, update);
    return r.attr("matched_count").cast<std::int64_t>() > 0;
  });
}

}  // namespace mongoelector_py

namespace mongoelector_py {

// Graceful handover: renew()'s filter (uuid, fence, unexpired), one atomic update_one.
bool PyMongoStorage::hand_over(const std::string& collection, const HandOver& h) {
  return with_python([&] {
    py::dict filter = renew_filter(h.key, h.from_uuid, h.from_fence, datetime_from_ms(h.now_ms));
    py::dict update;
    update["$set"] = to_py(h.fields());
    py::object r = this->collection(collection).attr("update_one")(filter, update);
    return r.attr("matched_count").cast<std::int64_t>() > 0;
  });
}

}  // namespace mongoelector_py
