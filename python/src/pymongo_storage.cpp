#include "pymongo_storage.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "convert.h"
#include "csot_scope.h"
#include "exceptions.h"
#include "gil.h"
#include "log.h"
#include "server_clock.h"
#include "storage/client.h"

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

// Interned attribute names, made once (the GIL is held): a call by name then costs no
// str object per call. Leaked, like convert.cpp's cached types.
PyObject* interned(const char* name) {
  PyObject* s = PyUnicode_InternFromString(name);
  if (s == nullptr) throw py::error_already_set();
  return s;
}

struct Names {
  PyObject* find_one_and_update = interned("find_one_and_update");
  PyObject* update_one = interned("update_one");
  PyObject* delete_one = interned("delete_one");
  PyObject* insert_one = interned("insert_one");
  PyObject* find_one = interned("find_one");
  PyObject* replace_one = interned("replace_one");
  PyObject* matched_count = interned("matched_count");
  PyObject* deleted_count = interned("deleted_count");
  PyObject* upsert = interned("upsert");
  PyObject* return_document = interned("return_document");
};

const Names& names() {
  static const Names* n = new Names;
  return *n;
}

// obj.name(args...) by vectorcall (no bound method, no argument tuple); kwnames: a
// tuple naming the last arguments, or null.
py::object call_method(PyObject* obj, PyObject* name, std::initializer_list<PyObject*> args,
                       PyObject* kwnames = nullptr) {
  PyObject* argv[8];
  std::size_t n = 0;
  argv[n++] = obj;
  for (PyObject* a : args) argv[n++] = a;
  const std::size_t positional = n - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  PyObject* r =
      PyObject_VectorcallMethod(name, argv, positional | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

// The serverSelectionTimeoutMS of the client of `db` (a pymongo Database, or the facade
// of an AsyncDatabase): 0 when it tells none.
std::int64_t selection_timeout_ms(const py::object& db) {
  try {
    py::object client = py::getattr(db, "client", py::none());
    if (client.is_none()) return 0;
    py::object s = py::getattr(py::getattr(client, "options", py::none()),
                               "server_selection_timeout", py::none());
    return s.is_none() ? 0 : ms_from_seconds(s.cast<double>());
  } catch (const std::exception&) {  // a lookalike's client: no such option
    return 0;
  }
}

}  // namespace

struct PyMongoStorage::Refs {
  py::object db;
  py::object return_after;                  // pymongo.ReturnDocument.AFTER
  py::object duplicate_key_error;           // pymongo.errors.DuplicateKeyError
  py::object operation_failure;             // pymongo.errors.OperationFailure
  py::object update_one_op;                 // pymongo.UpdateOne (a bulk_write statement)
  std::unique_ptr<CsotTimeout> csot;        // each call's client-side timeout
  std::unique_ptr<CsotTimeout> setup_csot;  // a setup call's (ensure_indexes, server_info)
  py::object upsert_after_names;            // ("upsert", "return_document")
  py::object upsert_names;                  // ("upsert",)
  // Collection objects by name: db[name] builds a new Collection (name checks, codec
  // options) on every call; the lock, fences and status collections are asked for on
  // every poll. Used with the GIL held.
  std::map<std::string, py::object, std::less<>> collections;
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
  refs_->update_one_op = pymongo.attr("UpdateOne");
  refs_->upsert_after_names =
      py::make_tuple(py::reinterpret_borrow<py::object>(names().upsert),
                     py::reinterpret_borrow<py::object>(names().return_document));
  refs_->upsert_names = py::make_tuple(py::reinterpret_borrow<py::object>(names().upsert));

  py::object database_type = py::module_::import("pymongo.database").attr("Database");
  bool real = py::isinstance(refs_->db, database_type);
  real_ = real;
  if (real && op_timeout_s > 0) {
    refs_->csot = std::make_unique<CsotTimeout>(op_timeout_s);
    const auto setup_ms =
        me::setup_timeout_ms(ms_from_seconds(op_timeout_s), selection_timeout_ms(refs_->db));
    refs_->setup_csot = std::make_unique<CsotTimeout>(static_cast<double>(setup_ms) / 1000.0);
  }
  csot_ = refs_->csot && refs_->csot->available();
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
  auto it = refs_->collections.find(name);
  if (it != refs_->collections.end()) return it->second;
  py::object coll = refs_->db[py::str(name)];
  if (real_) coll = with_majority_writes(coll);
  refs_->collections.emplace(name, coll);
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

// Runs f() with the GIL and, for a real pymongo Database, inside pymongo.timeout(): the
// call budget, or for a setup call the setup bound.
template <class F>
auto PyMongoStorage::with_python(Bound bound, F&& f) {
  if (interpreter_finalizing())
    throw me::StorageUnavailable("the Python interpreter is shutting down");
  py::gil_scoped_acquire gil;
  const CsotTimeout* t = bound == Bound::setup ? refs_->setup_csot.get() : refs_->csot.get();
  CsotTimeout::Scope scope(csot_ ? t : nullptr);
  return f();
}

template <class F>
auto PyMongoStorage::with_python(F&& f) {
  return with_python(Bound::call, std::forward<F>(f));
}

const char* PyMongoStorage::timeout_scope() const {
  if (!csot_) return "none";
  return refs_->csot->direct() ? "direct" : "pymongo.timeout";
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
  return with_python(Bound::setup, [&] {
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

namespace {
// A count attribute of a pymongo result (deleted_count, matched_count) > 0.
bool count_positive(const py::object& result, PyObject* name) {
  PyObject* n = PyObject_GetAttr(result.ptr(), name);
  if (n == nullptr) throw py::error_already_set();
  py::object count = py::reinterpret_steal<py::object>(n);
  if (PyLong_CheckExact(n)) {
    const long long v = PyLong_AsLongLong(n);
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return v > 0;
  }
  return count.cast<std::int64_t>() > 0;
}
}  // namespace

py::object PyMongoStorage::call_on(const py::object& coll, const me::commands::Command& c) {
  using Op = me::commands::Op;
  const Names& n = names();
  py::object filter = to_py(c.filter);
  switch (c.op) {
    case Op::find_and_modify: {
      py::object update = to_py(c.update);
      return call_method(coll.ptr(), n.find_one_and_update,
                         {filter.ptr(), update.ptr(), Py_True, refs_->return_after.ptr()},
                         refs_->upsert_after_names.ptr());
    }
    case Op::update_one: {
      py::object update = to_py(c.update);
      return call_method(coll.ptr(), n.update_one, {filter.ptr(), update.ptr()});
    }
    case Op::delete_one:
      return call_method(coll.ptr(), n.delete_one, {filter.ptr()});
    case Op::insert_one: {
      py::object doc = to_py(c.update);
      return call_method(coll.ptr(), n.insert_one, {doc.ptr()});
    }
    case Op::find:
      if (c.one) return call_method(coll.ptr(), n.find_one, {filter.ptr()});  // doc or None
      break;
    default:
      break;
  }
  throw me::StorageError("not a one-document command: " + c.what);
}

bool PyMongoStorage::matched_of(const me::commands::Command& c, const py::object& reply) {
  // matched_count: for a renewal, "matched but already later" is renewed too.
  return count_positive(
      reply, c.op == me::commands::Op::delete_one ? names().deleted_count : names().matched_count);
}

std::optional<me::LockDoc> PyMongoStorage::lock_doc_of(const py::object& reply) {
  if (reply.is_none()) return std::nullopt;
  return me::LockDoc::from_document(doc_from_py(reply));
}

me::LockDoc PyMongoStorage::claimed_doc_of(const py::object& reply) {
  if (reply.is_none()) throw me::StorageError("findAndModify upsert returned no document");
  return me::LockDoc::from_document(doc_from_py(reply));
}

bool PyMongoStorage::duplicate_key(const py::error_already_set& e) const {
  return e.matches(refs_->duplicate_key_error) ||
         (e.matches(refs_->operation_failure) && is_duplicate_key_code(error_code(e)));
}

bool PyMongoStorage::matched(const me::commands::Command& c) {
  return matched_of(c, call_on(this->collection(c.collection), c));
}

py::object PyMongoStorage::find_one_and_update(const me::commands::Command& c) {
  return call_on(this->collection(c.collection), c);
}

void PyMongoStorage::insert_one(const me::commands::Command& c) {
  call_on(this->collection(c.collection), c);
}

bool PyMongoStorage::fronts_async_database() const {
  return py::hasattr(refs_->db, "async_database");
}

py::object PyMongoStorage::start(const me::commands::Command& c) {
  if (!fronts_async_database())
    throw me::InvalidArgument("this storage does not front a pymongo AsyncDatabase");
  // The facade's collection carries the write concern the synchronous calls use.
  return call_on(this->collection(c.collection).attr("async_collection"), c);
}

void PyMongoStorage::ensure_indexes(const std::string& collection,
                                    const std::vector<me::commands::IndexSpec>& specs) {
  with_python(Bound::setup, [&] {
    py::object coll = this->collection(collection);
    for (const auto& spec : specs) {
      if (spec.expire_after_s)
        ensure_ttl_index(coll, spec.field.c_str(), *spec.expire_after_s);
      else
        coll.attr("create_index")(spec.field);
    }
  });
}

void PyMongoStorage::ensure_lock_indexes(const std::string& collection) {
  ensure_indexes(collection, me::commands::lock_indexes());
}

std::optional<me::LockDoc> PyMongoStorage::claim(const std::string& collection,
                                                 const me::LockClaim& claim, bool force) {
  const me::commands::Command c = me::commands::claim(collection, claim, force);
  return with_python([&]() -> std::optional<me::LockDoc> {
    py::object result;
    try {
      result = find_one_and_update(c);
    } catch (py::error_already_set& e) {
      if (duplicate_key(e)) return std::nullopt;  // held
      throw;
    }
    return claimed_doc_of(result);
  });
}

std::optional<me::LockDoc> PyMongoStorage::insert_claim(const std::string& collection,
                                                        const me::LockClaim& claim) {
  const me::commands::Command c = me::commands::insert_claim(collection, claim);
  return with_python([&]() -> std::optional<me::LockDoc> {
    try {
      insert_one(c);
    } catch (py::error_already_set& e) {
      if (duplicate_key(e)) return std::nullopt;  // a document is there
      throw;
    }
    return claim.inserted();
  });
}

std::int64_t PyMongoStorage::bump_epoch(const std::string& collection, const std::string& key) {
  const me::commands::Command c = me::commands::bump_epoch(collection, key);
  return with_python([&]() -> std::int64_t {
    for (int attempt = 0;; ++attempt) {
      try {
        py::object doc = find_one_and_update(c);
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
  const auto c = me::commands::set_fence(collection, key, uuid, old_fence, created_ms, new_fence);
  return with_python([&] { return matched(c); });
}

bool PyMongoStorage::renew(const std::string& collection, const std::string& key,
                           const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                           std::int64_t expire_ms) {
  const auto c = me::commands::renew(collection, key, uuid, fence, now_ms, expire_ms);
  return with_python([&] { return matched(c); });
}

bool PyMongoStorage::set_expiry(const std::string& collection, const std::string& key,
                                const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                                std::int64_t expire_ms, std::int64_t created_ms) {
  const auto c =
      me::commands::renew(collection, key, uuid, fence, now_ms, expire_ms, true, created_ms);
  return with_python([&] { return matched(c); });
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
    return me::commands::renew_in_chunks<me::LockDoc>(
        requests, max_renew_batch(), [&](std::size_t from, std::size_t to) {
          for (const me::RenewGroup& g : me::renew_groups(requests, from, to)) {
            const auto c = me::commands::renew_group(collection, requests, g, now_ms);
            // Its counts are not used: they cannot say WHICH requests matched.
            coll.attr("update_many")(to_py(c.filter), to_py(c.update));
          }
          std::vector<std::string> keys;
          keys.reserve(to - from);
          for (std::size_t i = from; i < to; ++i) keys.push_back(requests[i].key);
          std::map<std::string, me::LockDoc> found;
          for (py::handle d : find(me::commands::read_keys(collection, keys))) {
            me::LockDoc doc = me::LockDoc::from_document(doc_from_py(d));
            found.emplace(doc.key, std::move(doc));
          }
          return found;
        });
  });
  if (batched) return std::move(*batched);
  return Storage::renew_many(collection, requests, now_ms);
}

py::object PyMongoStorage::find(const me::commands::Command& c) {
  py::object coll = this->collection(c.collection);
  if (c.one) return call_on(coll, c);  // doc or None
  py::object filter = to_py(c.filter);
  // A negative limit: one batch, the cursor closed by the server (no getMore).
  py::object cursor = c.limit > 0 ? coll.attr("find")(filter, py::arg("limit") = -c.limit)
                                  : coll.attr("find")(filter);
  if (!c.sort.empty()) {
    py::list order;
    for (const auto& s : c.sort.children) order.append(py::make_tuple(s.name, to_py(s)));
    cursor = cursor.attr("sort")(order);
  }
  return cursor;
}

const void* PyMongoStorage::batch_domain() const { return domain_.get(); }

std::shared_ptr<me::ClockSampleBoard> PyMongoStorage::clock_sample_board() {
  return domain_->board;
}

bool PyMongoStorage::release(const std::string& collection, const std::string& key,
                             const std::optional<std::string>& uuid, std::int64_t fence,
                             std::int64_t now_ms, bool delete_document) {
  const auto c = me::commands::release(collection, key, uuid, fence, now_ms, delete_document);
  return with_python([&] { return matched(c); });
}

std::optional<me::LockDoc> PyMongoStorage::read(const std::string& collection,
                                                const std::string& key) {
  const auto c = me::commands::read(collection, key);
  return with_python([&]() -> std::optional<me::LockDoc> {
    py::object doc = find(c);
    if (doc.is_none()) return std::nullopt;
    return me::LockDoc::from_document(doc_from_py(doc));
  });
}

std::vector<std::optional<me::LockDoc>> PyMongoStorage::read_many(
    const std::string& collection, const std::vector<std::string>& keys) {
  if (keys.empty()) return {};
  auto c = me::commands::read_keys(collection, keys);
  c.what = "find (read_many)";
  c.limit = 0;  // a cursor (getMore past the first batch), not one batch capped at 16 MB
  return with_python([&] {
    std::map<std::string, me::LockDoc> by_key;
    for (py::handle d : find(c)) {
      me::LockDoc doc = me::LockDoc::from_document(doc_from_py(d));
      by_key.emplace(doc.key, std::move(doc));
    }
    std::vector<std::optional<me::LockDoc>> docs;
    docs.reserve(keys.size());
    for (const std::string& k : keys) {
      auto it = by_key.find(k);
      docs.push_back(it == by_key.end() ? std::nullopt : std::optional<me::LockDoc>(it->second));
    }
    return docs;
  });
}

void PyMongoStorage::ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) {
  ensure_indexes(collection, me::commands::status_indexes(ttl_s));
}

void PyMongoStorage::put_status(const std::string& collection, const me::Document& doc) {
  const auto c = me::commands::put_status(collection, doc);
  with_python([&] {
    py::object coll = this->collection(c.collection);
    py::object filter = to_py(c.filter);
    py::object doc = to_py(c.update);
    call_method(coll.ptr(), names().replace_one, {filter.ptr(), doc.ptr(), Py_True},
                refs_->upsert_names.ptr());
  });
}

std::vector<me::Document> PyMongoStorage::list_status(const std::string& collection,
                                                      const std::string& key) {
  const auto c = me::commands::list_status(collection, key);
  return with_python([&] {
    std::vector<me::Document> out;
    for (py::handle d : find(c)) out.push_back(doc_from_py(d));
    return out;
  });
}

// ---------------------------------------------------------------- semaphores ----

namespace {

// The nested document (a dict from pymongo or mongomock) -> SemaphoreDoc; odd or missing
// fields take their defaults, as the libmongoc backend reads them.
me::SemaphoreDoc semaphore_from_py(py::handle doc) {
  me::Document top = doc_from_py(doc);
  me::SemaphoreDoc d;
  d.key = top.get_string("_id").value_or("");
  d.limit = top.get_int("limit").value_or(0);
  d.fence = top.get_int("fence").value_or(0);
  // A kind of another type: unknown (refused, never taken for a semaphore's document).
  if (top.has("kind")) d.kind = top.get_string("kind").value_or("?");
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
  py::object queue = py::getattr(doc, "get")("queue");
  if (py::isinstance<py::list>(queue) || py::isinstance<py::tuple>(queue)) {
    for (py::handle item : queue) {
      me::QueueEntry e;
      if (py::isinstance<py::dict>(item) || py::hasattr(item, "items")) {
        me::Document f = doc_from_py(item);
        e.uuid = f.get_string("uuid").value_or("");
        e.ticket = f.get_int("ticket").value_or(0);
        const std::optional<me::DateTime> t = f.get_date("ts_expire");
        e.expire_ms = t ? t->ms : 0;
      }
      d.queue.push_back(std::move(e));  // an odd element still keeps its place
    }
  }
  return d;
}

}  // namespace

std::optional<me::SemaphoreDoc> PyMongoStorage::read_semaphore(const std::string& collection,
                                                               const std::string& key) {
  const auto c = me::commands::read(collection, key);
  return with_python([&]() -> std::optional<me::SemaphoreDoc> {
    py::object doc = find(c);
    if (doc.is_none()) return std::nullopt;
    return semaphore_from_py(doc);
  });
}

bool PyMongoStorage::create_semaphore(const std::string& collection,
                                      const me::SemaphoreClaim& claim) {
  const auto c = me::commands::create_semaphore(collection, claim);  // checks before the call
  return with_python([&] {
    try {
      insert_one(c);
    } catch (py::error_already_set& e) {
      if (duplicate_key(e)) return false;  // created by someone else
      throw;
    }
    return true;
  });
}

bool PyMongoStorage::claim_semaphore(const std::string& collection,
                                     const me::SemaphoreClaim& claim) {
  const auto c = me::commands::claim_semaphore(collection, claim);
  return with_python([&] { return matched(c); });
}

bool PyMongoStorage::renew_semaphore(const std::string& collection, const std::string& key,
                                     std::int64_t slot, const std::string& uuid, std::int64_t fence,
                                     std::int64_t now_ms, std::int64_t expire_ms) {
  const auto c =
      me::commands::renew_semaphore(collection, key, slot, uuid, fence, now_ms, expire_ms);
  return with_python([&] { return matched(c); });
}

std::vector<bool> PyMongoStorage::renew_semaphores(
    const std::string& collection, const std::vector<me::SemaphoreRenewRequest>& requests,
    std::int64_t now_ms) {
  if (requests.empty()) return {};
  auto batched = with_python([&]() -> std::optional<std::vector<bool>> {
    py::object coll = this->collection(collection);
    // One by one on mongomock (its bulk_write does not take pymongo's UpdateOne of every
    // version) and on the aio facade (no bulk_write).
    if (mock_ || !py::hasattr(coll, "bulk_write")) return std::nullopt;
    return me::commands::renew_in_chunks<me::SemaphoreDoc>(
        requests, max_renew_batch(), [&](std::size_t from, std::size_t to) {
          const auto c = me::commands::renew_semaphores(collection, requests, from, to, now_ms);
          py::list ops(c.statements.size());
          for (std::size_t j = 0; j < c.statements.size(); ++j) {
            py::object op =
                refs_->update_one_op(to_py(c.statements[j].filter), to_py(c.statements[j].update));
            PyList_SET_ITEM(ops.ptr(), static_cast<Py_ssize_t>(j), op.release().ptr());
          }
          // One `update` command; its counts are not used (they cannot say WHICH matched).
          coll.attr("bulk_write")(ops, py::arg("ordered") = false);
          std::map<std::string, me::SemaphoreDoc> found;
          const auto keys = me::commands::semaphore_keys(requests, from, to);
          for (py::handle d : find(me::commands::read_keys(collection, keys))) {
            me::SemaphoreDoc doc = semaphore_from_py(d);
            found.emplace(doc.key, std::move(doc));
          }
          return found;
        });
  });
  if (batched) return std::move(*batched);
  return Storage::renew_semaphores(collection, requests, now_ms);
}

bool PyMongoStorage::release_semaphore(const std::string& collection, const std::string& key,
                                       std::int64_t slot, const std::string& uuid,
                                       std::int64_t fence) {
  const auto c = me::commands::release_semaphore(collection, key, slot, uuid, fence);
  return with_python([&] { return matched(c); });
}

bool PyMongoStorage::renew_queue_entry(const std::string& collection, const std::string& key,
                                       std::int64_t index, const std::string& uuid,
                                       std::int64_t ticket, std::int64_t now_ms,
                                       std::int64_t expire_ms) {
  const auto c =
      me::commands::renew_queue_entry(collection, key, index, uuid, ticket, now_ms, expire_ms);
  return with_python([&] { return matched(c); });
}

bool PyMongoStorage::leave_queue(const std::string& collection, const std::string& key,
                                 const std::string& uuid, std::int64_t ticket) {
  const auto c = me::commands::leave_queue(collection, key, uuid, ticket);
  return with_python([&] { return matched(c); });
}

bool PyMongoStorage::hand_over(const std::string& collection, const HandOver& h) {
  const auto c = me::commands::hand_over(collection, h);
  return with_python([&] { return matched(c); });
}

bool PyMongoStorage::set_payload(const std::string& collection, const me::PayloadWrite& w) {
  const auto c = me::commands::set_payload(collection, w);
  return with_python([&] { return matched(c); });
}

}  // namespace mongoelector_py
