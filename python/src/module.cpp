// mongoelector._native: the pybind11 bindings of core/ (private; the public API is the
// pure-Python package around it).
//
// GIL discipline: every binding that enters core/ releases the GIL first. The core
// then runs without it; only PyMongoStorage, callbacks and the log bridge take it back,
// each for its own Python call. So no core mutex is ever waited for while holding the
// GIL, and no thread holding a core mutex ever waits for the GIL for long.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "convert.h"
#include "election/elector.h"
#include "exceptions.h"
#include "gil.h"
#include "lease/lease.h"
#include "locker.h"
#include "log.h"
#include "log_bridge.h"
#include "metrics_binding.h"
#include "observer_binding.h"
#include "pymongo_storage.h"
#include "semaphore/semaphore.h"
#include "storage/client.h"
#include "storage/memory_storage.h"
#include "storage/mongo_storage.h"
#include "storage/sqlite_storage.h"
#include "testing_binding.h"
#include "uri_binding.h"

namespace py = pybind11;
namespace me = mongoelector;
using namespace mongoelector_py;

namespace {

// ---------------------------------------------------------------- errors ----

py::object& errors_module() {
  static py::object* m = new py::object(py::module_::import("mongoelector.errors"));
  return *m;
}

void set_error(const char* cls, const std::string& msg) {
  py::object type = errors_module().attr(cls);
  PyErr_SetObject(type.ptr(), py::str(msg).ptr());
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const me::InvalidArgument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const me::LockExists& e) {
    set_error("LockExists", e.what());
  } catch (const me::AcquireTimeout& e) {
    set_error("AcquireTimeout", e.what());
  } catch (const me::TimeOffsetError& e) {
    // The message is built where the Python path (_verifytime) builds it, so both read
    // the same.
    py::object exc = errors_module().attr("_time_offset_error")(e.offset_s());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (const me::Cancelled& e) {
    PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
  } catch (const me::UnsafeServer& e) {
    set_error("UnsafeServerError", e.what());
  } catch (const me::StorageUnavailable& e) {
    set_error("StorageUnavailable", e.what());
  } catch (const me::StorageError& e) {
    py::object type = errors_module().attr("StorageError");
    py::object exc = type(e.what(), e.code());
    PyErr_SetObject(type.ptr(), exc.ptr());
  }
}

// ------------------------------------------------------------- locker -------

// The cancel function of a native blocking acquire (a lock, a semaphore slot, a lease).
// A signal whose handler raised (Ctrl-C: KeyboardInterrupt) ends the wait as the core's
// own Cancelled, so the core counts the outcome once, as "cancelled", in its metrics;
// run() then raises the handler's exception in its place. Interpreter exit cancels too.
// Pending signals are looked at every time the core asks (only the main thread's wait
// sees them).
class SignalCancel {
 public:
  me::CancelFn fn() const {
    auto raised = raised_;
    return [raised] {
      if (interpreter_finalizing()) return true;
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) return false;
      raised->emplace();  // takes the handler's exception (the GIL is held)
      return true;
    };
  }
  // Re-raises the handler's exception of a wait that fn() cancelled (with the GIL).
  void rethrow_raised() const {
    if (*raised_) throw py::error_already_set(std::move(**raised_));
  }
  // Runs `f` (a blocking core call given fn()) without the GIL.
  template <class R, class F>
  R run(F&& f) const {
    try {
      py::gil_scoped_release nogil;
      return f();
    } catch (const me::Cancelled&) {
      rethrow_raised();
      throw;
    }
  }

 private:
  std::shared_ptr<std::optional<py::error_already_set>> raised_ =
      std::make_shared<std::optional<py::error_already_set>>();
};

py::object hold_tuple(const std::optional<me::Hold>& h) {
  if (!h) return py::none();
  return py::make_tuple(h->fence, datetime_from_ms(h->created_ms), datetime_from_ms(h->expire_ms));
}

// Seconds from now (host monotonic clock) until a deadline, None without one.
std::optional<double> seconds_until(const std::optional<std::int64_t>& deadline_mono,
                                    me::Clock& clock) {
  if (!deadline_mono) return std::nullopt;
  return (*deadline_mono - clock.mono_ms()) / 1000.0;
}

// The token of a hold whose lease has not run out on this host's monotonic clock. A
// deferred token (lazy_token) is assigned here: two round trips, once per hold.
std::optional<std::int64_t> live_fence(me::Locker& l) {
  auto running = [&l] {
    auto deadline = l.lease_deadline_mono();
    return deadline && l.clock().mono_ms() < *deadline;
  };
  if (!running()) return std::nullopt;
  auto token = l.token();
  if (!token || !running()) return std::nullopt;
  return token;
}

// A Database lookalike (neither pymongo nor mongomock) cannot have its calls bounded, and
// the original's API has no way to opt in: accept it, saying so once per object.
bool allow_unbounded(const std::shared_ptr<me::Storage>& storage) {
  if (storage->call_bound_ms() > 0) return false;
  if (dynamic_cast<PyMongoStorage*>(storage.get()) == nullptr) return false;
  me::log(me::LogLevel::Warning,
          "calls through this Database object cannot be time-bounded (not pymongo >= 4.2 or "
          "mongomock): a hung call could outlive a lease");
  return true;
}

std::shared_ptr<me::Locker> make_locker(std::shared_ptr<me::Storage> storage, std::string key,
                                        std::string collection, double ttl, bool timeparanoid,
                                        double maxoffset, bool delete_on_release,
                                        bool allow_unsafe_server, bool ensure_indexes,
                                        std::optional<me::Identity> identity, bool lazy_token) {
  me::LockerOptions o;
  o.key = std::move(key);
  o.collection = std::move(collection);
  o.ttl_s = ttl;
  o.timeparanoid = timeparanoid;
  o.maxoffset_s = maxoffset;
  o.delete_on_release = delete_on_release;
  o.allow_unsafe_server = allow_unsafe_server;
  o.ensure_indexes = ensure_indexes;
  o.allow_unbounded_calls = allow_unbounded(storage);
  o.lazy_token = lazy_token;
  me::Identity id = identity ? *identity : me::Identity::generate();
  py::gil_scoped_release nogil;  // index creation goes through the storage
  return std::make_shared<me::Locker>(std::move(storage), std::move(o), nullptr, std::move(id));
}

// ------------------------------------------------------------- elector ------

// Set while a Python thread is inside an elector binding (poll, release, stop...): a
// callback fired then runs on that thread, not on the loop thread.
thread_local bool t_in_user_call = false;

struct UserCall {
  bool saved = t_in_user_call;
  UserCall() { t_in_user_call = true; }
  ~UserCall() { t_in_user_call = saved; }
};

// Destroys electors whose last Python reference went away on their own loop thread
// (inside a callback): that thread cannot join itself, and the core must not be freed
// while the loop is still running on it. Tracked so interpreter exit can wait for them.
struct Reapers {
  std::mutex mu;
  std::condition_variable cv;
  int active = 0;
};
Reapers* g_reapers = new Reapers;  // leaked: used by detached threads until the end

void reap(std::unique_ptr<me::Elector> elector) {
  {
    std::lock_guard<std::mutex> g(g_reapers->mu);
    ++g_reapers->active;
  }
  std::thread([e = std::move(elector)]() mutable {
    e.reset();  // stop(): joins the loop thread once it has left the callback
    std::lock_guard<std::mutex> g(g_reapers->mu);
    --g_reapers->active;
    g_reapers->cv.notify_all();
  }).detach();
}

bool wait_reapers(double timeout_s) {
  py::gil_scoped_release nogil;
  std::unique_lock<std::mutex> lk(g_reapers->mu);
  return g_reapers->cv.wait_for(lk, std::chrono::duration<double>(timeout_s),
                                [] { return g_reapers->active == 0; });
}

// The Python callbacks, looked up at call time by a dispatcher function on the Python
// side (so that reassigning elector.callback_on_leader works as in the original). A
// callback that is None costs nothing: the flag is checked without the GIL, so a loop
// whose callbacks are unset never waits for the GIL except for storage calls.
struct CallbackState {
  SharedPyObject dispatch;
  std::atomic<bool> enabled[3] = {{false}, {false}, {false}};
  std::atomic<std::thread::id> loop_thread{};
  // on_leader_loss at the renew deadline runs on a thread of the core's callback
  // dispatcher (callback_dispatcher.h).
  std::atomic<std::thread::id> dispatcher_thread{};
  std::atomic<const me::Elector*> elector{nullptr};

  void fire(int slot, const char* name) {
    if (!t_in_user_call) {
      const me::Elector* e = elector.load();
      (e == nullptr || e->on_loop_thread() ? loop_thread : dispatcher_thread) =
          std::this_thread::get_id();
    }
    if (!enabled[slot].load() || interpreter_finalizing()) return;
    py::gil_scoped_acquire gil;
    if (interpreter_finalizing()) return;
    dispatch.get()(name);  // exceptions are caught in Python; anything left, core logs
  }
};

int slot_of(const std::string& name) {
  if (name == "on_leader") return 0;
  if (name == "on_leader_loss") return 1;
  if (name == "on_loop") return 2;
  throw py::value_error("unknown callback " + name);
}

class PyElector {
 public:
  PyElector(std::shared_ptr<me::Storage> storage, std::string key, double ttl, bool report_status,
            std::optional<std::string> app_version, py::object dispatch,
            std::string lock_collection, std::string status_collection, bool allow_unsafe_server,
            std::optional<me::Identity> identity, bool delete_on_release,
            std::optional<double> handover_poll)
      : callbacks_(std::make_shared<CallbackState>()) {
    callbacks_->dispatch = SharedPyObject(std::move(dispatch));
    me::ElectorOptions o;
    o.key = std::move(key);
    o.ttl_s = ttl;
    o.report_status = report_status;
    o.app_version = std::move(app_version);
    o.lock_collection = std::move(lock_collection);
    o.status_collection = std::move(status_collection);
    o.allow_unsafe_server = allow_unsafe_server;
    o.delete_on_release = delete_on_release;
    o.handover_poll_s = handover_poll;
    o.allow_unbounded_calls = allow_unbounded(storage);
    me::ElectorCallbacks cb;
    auto state = callbacks_;
    cb.on_leader = [state] { state->fire(0, "on_leader"); };
    cb.on_leader_loss = [state] { state->fire(1, "on_leader_loss"); };
    cb.on_loop = [state] { state->fire(2, "on_loop"); };
    me::Identity id = identity ? *identity : me::Identity::generate();
    py::gil_scoped_release nogil;
    elector_ = std::make_unique<me::Elector>(std::move(storage), std::move(o), std::move(cb),
                                             nullptr, std::move(id));
    callbacks_->elector = elector_.get();
  }

  // Stops and joins the loop WITHOUT the GIL: the loop may be waiting for it. On the
  // loop's own thread or the dispatcher's thread that ran its last callback (last
  // reference dropped in a callback) a reaper thread does it: neither can wait for itself.
  ~PyElector() {
    if (!elector_) return;
    callbacks_->elector = nullptr;
    const auto self = std::this_thread::get_id();
    if (callbacks_->loop_thread.load() == self || callbacks_->dispatcher_thread.load() == self) {
      reap(std::move(elector_));
      return;
    }
    py::gil_scoped_release nogil;
    elector_.reset();
  }

  me::Elector& get() {
    if (!elector_)
      throw std::runtime_error(
          "this elector was inherited through fork(); create a new one in the child");
    return *elector_;
  }

  void set_enabled(const std::string& name, bool on) { callbacks_->enabled[slot_of(name)] = on; }

  // In a forked child the loop thread does not exist: forget the native elector
  // without stopping or joining it (leaked on purpose).
  void abandon() { (void)elector_.release(); }

 private:
  std::shared_ptr<CallbackState> callbacks_;
  std::unique_ptr<me::Elector> elector_;
};

template <class R, class F>
R nogil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

py::dict cluster_detail_dict(const me::Elector::ClusterDetail& cd) {
  py::list members;
  for (const auto& d : cd.member_detail) members.append(to_py(d));
  py::dict out;
  out["member_detail"] = members;
  if (cd.leader) {
    py::dict leader;
    leader["host"] = cd.leader->host;
    leader["process_id"] = cd.leader->pid;
    leader["uuid"] = cd.leader->uuid;
    out["leader"] = leader;
  } else {
    out["leader"] = py::none();
  }
  out["timestamp"] = datetime_from_ms(cd.timestamp.ms);
  return out;
}

// A keep-alive's on_lost from Python's callable (None: nothing). It runs on a thread of
// the core's callback dispatcher (never the timer that decides losses: a GIL wait here
// delays no other lease's loss): it takes the GIL only to call the Python callable,
// never once the interpreter is finalizing.
std::function<void()> on_lost_function(py::object on_lost, const char* what) {
  if (on_lost.is_none()) return {};
  SharedPyObject cb(std::move(on_lost));
  return [cb, what] {
    if (interpreter_finalizing()) return;
    py::gil_scoped_acquire gil;
    if (interpreter_finalizing()) return;
    try {
      cb.get()();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(what);
    }
  };
}

// The options of a keep-alive (lease or semaphore slot) from Python's arguments.
me::KeepAliveOptions keep_alive_options(bool blocking, std::optional<double> timeout, double step,
                                        py::object on_lost, const char* what,
                                        const SignalCancel& cancel) {
  me::KeepAliveOptions o;
  o.blocking = blocking;
  o.timeout_s = timeout;
  o.step_s = step;
  if (blocking) o.cancel = cancel.fn();  // Ctrl-C ends the wait
  o.on_lost = on_lost_function(std::move(on_lost), what);
  return o;
}

// Keeps alive the hold `holder` (a Locker or a Semaphore) has now, taken by its own
// acquire: the asyncio leases wait in the event loop between the holder's attempts
// (mongoelector.aio), then hand the hold to the renewer.
template <class PyKeepAlive, class Holder>
std::unique_ptr<PyKeepAlive> adopt_hold(std::shared_ptr<Holder> holder, py::object on_lost,
                                        const char* what) {
  auto keep_alive = std::make_unique<PyKeepAlive>();
  auto fn = on_lost_function(std::move(on_lost), what);
  py::gil_scoped_release nogil;
  keep_alive->lease = std::make_unique<me::KeepAliveLease>(std::move(holder), std::move(fn));
  return keep_alive;
}

// Closes a keep-alive without the GIL: closing may wait for a renewal in flight, which
// may need the GIL (PyMongoStorage).
template <class KeepAlive>
void close_without_gil(std::unique_ptr<KeepAlive>& keep_alive) {
  if (!keep_alive) return;
  if (PyGILState_Check()) {
    py::gil_scoped_release nogil;
    keep_alive->close();
  } else {
    keep_alive->close();
  }
}

}  // namespace

// A keep-alive lease (core/lease) for Python. Closing may wait for a renewal in flight,
// which may need the GIL (PyMongoStorage): the GIL is always released around it.
struct PyLease {
  std::unique_ptr<me::KeepAliveLease> lease;

  PyLease() = default;
  PyLease(std::shared_ptr<me::Locker> locker, bool blocking, std::optional<double> timeout,
          double step, py::object on_lost) {
    SignalCancel cancel;
    auto o = keep_alive_options(blocking, timeout, step, std::move(on_lost),
                                "mongoelector lease on_lost", cancel);
    lease = cancel.run<std::unique_ptr<me::KeepAliveLease>>(
        [&] { return me::KeepAliveLease::acquire(std::move(locker), std::move(o)); });
  }
  ~PyLease() { close(); }
  void close() { close_without_gil(lease); }
  void close_min_hold(double min_hold) {
    if (!lease) return;
    py::gil_scoped_release nogil;
    lease->close(min_hold);
  }
};

// ------------------------------------------------------------ semaphore ----

namespace {

std::shared_ptr<me::Semaphore> make_semaphore(std::shared_ptr<me::Storage> storage, std::string key,
                                              std::int64_t limit, std::string collection,
                                              double ttl, bool timeparanoid, double maxoffset,
                                              bool allow_unsafe_server,
                                              std::optional<me::Identity> identity) {
  me::SemaphoreOptions o;
  o.key = std::move(key);
  o.limit = limit;
  o.collection = std::move(collection);
  o.ttl_s = ttl;
  o.timeparanoid = timeparanoid;
  o.maxoffset_s = maxoffset;
  o.allow_unsafe_server = allow_unsafe_server;
  o.allow_unbounded_calls = allow_unbounded(storage);
  me::Identity id = identity ? *identity : me::Identity::generate();
  py::gil_scoped_release nogil;
  return std::make_shared<me::Semaphore>(std::move(storage), std::move(o), nullptr, std::move(id));
}

py::dict semaphore_slot_dict(const me::SemaphoreSlot& s) {
  py::dict d;
  d["uuid"] = s.uuid;
  d["host"] = s.host;
  d["pid"] = s.pid;
  d["fence"] = s.fence;
  d["ts_created"] = s.ts_created ? datetime_from_ms(s.ts_created->ms) : py::none();
  d["ts_expire"] = s.ts_expire ? datetime_from_ms(s.ts_expire->ms) : py::none();
  return d;
}

// The token of a hold whose lease has not run out on this host's monotonic clock.
std::optional<std::int64_t> live_semaphore_fence(me::Semaphore& s) {
  auto lease = s.lease();
  if (!lease || s.clock().mono_ms() >= lease->end_mono) return std::nullopt;
  return lease->fence;
}

}  // namespace

// A semaphore slot kept alive on the process's renewer (core/lease/lease.h, the one keep-alive lease).
struct PySemaphoreLease {
  std::unique_ptr<me::SemaphoreLease> lease;

  PySemaphoreLease() = default;
  PySemaphoreLease(std::shared_ptr<me::Semaphore> sem, bool blocking, std::optional<double> timeout,
                   double step, py::object on_lost) {
    SignalCancel cancel;
    auto o = keep_alive_options(blocking, timeout, step, std::move(on_lost),
                                "mongoelector semaphore lease on_lost", cancel);
    lease = cancel.run<std::unique_ptr<me::SemaphoreLease>>(
        [&] { return me::SemaphoreLease::acquire(std::move(sem), std::move(o)); });
  }
  ~PySemaphoreLease() { close(); }
  void close() { close_without_gil(lease); }
};

PYBIND11_MODULE(_native, m) {
  m.doc() = "Native core of mongoelector (private: use the mongoelector package).";
  py::register_exception_translator(translate);
  install_log_bridge();
  bind_metrics(m);
  bind_testing(m);
  bind_observer(m);
  bind_uri(m);

  // Who a locker is. Python passes the original's values (uuid.uuid4(), socket.getfqdn(),
  // os.getpid()) so documents and messages match what the original writes.
  py::class_<me::Identity>(m, "Identity")
      .def(py::init([](std::string uuid, std::string host, std::int64_t pid) {
             return me::Identity{std::move(uuid), std::move(host), pid};
           }),
           py::arg("uuid"), py::arg("host"), py::arg("pid"))
      .def_readonly("uuid", &me::Identity::uuid)
      .def_readonly("host", &me::Identity::host)
      .def_readonly("pid", &me::Identity::pid);

  // ------------------------------------------------------------ storages -----
  py::class_<me::Storage, std::shared_ptr<me::Storage>>(m, "Storage")
      .def("server_time",
           [](me::Storage& s) {
             auto ms = nogil<std::int64_t>([&] { return s.server_time_ms(); });
             return datetime_from_ms(ms);
           })
      .def("server_info", [](me::Storage& s) {
        auto info = nogil<me::ServerInfo>([&] { return s.server_info(); });
        py::dict d;
        d["name"] = info.name;
        d["version"] = info.version;
        d["atomic_find_and_modify"] = info.atomic_find_and_modify;
        return d;
      });

  py::class_<ServerFacts, std::shared_ptr<ServerFacts>>(
      m, "ServerFacts", "What one pymongo client's server is, shared by its storages.")
      .def(py::init<>());

  py::class_<PyMongoStorage, me::Storage, std::shared_ptr<PyMongoStorage>>(m, "PyMongoStorage")
      .def(py::init<py::object, double, std::shared_ptr<ServerFacts>>(), py::arg("db"),
           py::arg("op_timeout"), py::arg("facts") = nullptr)
      .def_property_readonly("is_mock", &PyMongoStorage::is_mock)
      .def_property_readonly("op_timeout", &PyMongoStorage::op_timeout_s)
      .def_property_readonly("db", &PyMongoStorage::db);

  // A client for any URI (storage/client.h): the URI transport's handle on a backend.
  py::class_<me::StorageClient, std::shared_ptr<me::StorageClient>>(m, "StorageClient")
      .def(py::init([](const std::string& uri, const std::string& database) {
             return me::open_client(uri, database);
           }),
           py::arg("uri"), py::arg("database"))
      .def(
          "open_storage",
          [](me::StorageClient& c, double op_timeout) {
            return c.open_storage(ms_from_seconds(op_timeout));
          },
          py::arg("op_timeout"))
      .def_property_readonly("backend",
                             [](const me::StorageClient& c) { return std::string(c.backend()); })
      .def_property_readonly("uri", &me::StorageClient::uri);

  py::class_<me::MongoClient, me::StorageClient, std::shared_ptr<me::MongoClient>>(m, "MongoClient")
      .def(py::init([](const std::string& uri, const std::string& database) {
             return me::MongoClient::open(uri, database);
           }),
           py::arg("uri"), py::arg("database"))
      .def_property_readonly("database", &me::MongoClient::database)
      .def_property_readonly("pool_size", &me::MongoClient::pool_size)
      .def_property_readonly("pool_count", &me::MongoClient::pool_count);

  py::class_<me::MongoStorage, me::Storage, std::shared_ptr<me::MongoStorage>>(m, "MongoStorage")
      .def(py::init([](std::shared_ptr<me::MongoClient> client, double op_timeout) {
             return std::make_shared<me::MongoStorage>(std::move(client),
                                                       ms_from_seconds(op_timeout));
           }),
           py::arg("client"), py::arg("op_timeout"))
      .def(py::init([](std::string uri, std::string database, double op_timeout) {
             me::MongoStorageOptions o;
             o.uri = std::move(uri);
             o.database = std::move(database);
             o.op_timeout_ms = ms_from_seconds(op_timeout);
             return std::make_shared<me::MongoStorage>(std::move(o));
           }),
           py::arg("uri"), py::arg("database"), py::arg("op_timeout"))
      .def_property_readonly("round_trips", &me::MongoStorage::round_trips);

  py::class_<me::SqliteStorage, me::Storage, std::shared_ptr<me::SqliteStorage>>(m, "SqliteStorage")
      .def_property_readonly("round_trips", &me::SqliteStorage::round_trips);

  // -------------------------------------------------------------- locker -----
  py::class_<me::Locker, std::shared_ptr<me::Locker>>(m, "Locker")
      .def(py::init(&make_locker), py::arg("storage"), py::arg("key"),
           py::arg("collection") = "mongolocker", py::arg("ttl") = 600.0,
           py::arg("timeparanoid") = true, py::arg("maxoffset") = 0.5,
           py::arg("delete_on_release") = false, py::arg("allow_unsafe_server") = false,
           py::arg("ensure_indexes") = true, py::arg("identity") = py::none(),
           py::arg("lazy_token") = false)
      .def(
          "try_acquire",
          [](me::Locker& l, bool force) {
            return nogil<std::optional<std::int64_t>>([&] { return l.try_acquire(force); });
          },
          py::arg("force") = false)
      .def(
          "acquire",
          [](me::Locker& l, bool blocking, std::optional<double> timeout, double step, bool force) {
            SignalCancel cancel;
            return cancel.run<std::int64_t>(
                [&] { return l.acquire(blocking, timeout, step, force, cancel.fn()); });
          },
          py::arg("blocking") = true, py::arg("timeout") = py::none(), py::arg("step") = 0.25,
          py::arg("force") = false)
      .def(
          "release", [](me::Locker& l, bool force) { nogil<void>([&] { l.release(force); }); },
          py::arg("force") = false)
      .def("touch",
           [](me::Locker& l) -> py::object {
             auto r = nogil<std::optional<std::int64_t>>([&] { return l.touch(); });
             return r ? datetime_from_ms(*r) : py::none();
           })
      .def("locked", [](me::Locker& l) { return nogil<bool>([&] { return l.locked(); }); })
      .def("owned", [](me::Locker& l) { return nogil<bool>([&] { return l.owned(); }); })
      .def("current",
           [](me::Locker& l) -> py::object {
             auto d = nogil<std::optional<me::LockDoc>>([&] { return l.current(); });
             return d ? py::object(to_py(d->raw)) : py::none();
           })
      .def(
          "status",
          [](me::Locker& l) {
            return to_py(nogil<me::Document>([&] { return me::Elector::locker_status(l); }));
          },
          "MongoLocker.status (one round trip).")
      .def("read",
           [](me::Locker& l) -> py::object {
             auto d = nogil<std::optional<me::LockDoc>>(
                 [&] { return l.storage().read(l.options().collection, l.key()); });
             return d ? py::object(to_py(d->raw)) : py::none();
           })
      .def(
          "measure_offset",
          [](me::Locker& l) {
            return nogil<double>([&] {
              l.server_clock().refresh();
              return l.server_clock().offset_s();
            });
          },
          "Server clock minus host clock in seconds, from a fresh hello round trip.")
      .def("verify_time",
           [](me::Locker& l) { return nogil<double>([&] { return l.verify_time(); }); })
      .def("server_now",
           [](me::Locker& l) {
             return datetime_from_ms(nogil<std::int64_t>([&] { return l.server_now_ms(); }));
           })
      .def_property_readonly(
          "hold",
          [](me::Locker& l) {
            return hold_tuple(nogil<std::optional<me::Hold>>([&] { return l.hold(); }));
          })
      .def_property_readonly(
          "fence",
          [](me::Locker& l) {
            return nogil<std::optional<std::int64_t>>([&] { return live_fence(l); });
          })
      .def_property_readonly("lease_remaining",
                             [](me::Locker& l) {
                               return nogil<std::optional<double>>([&] {
                                 return seconds_until(l.lease_deadline_mono(), l.clock());
                               });
                             })
      .def_property_readonly("uuid", [](me::Locker& l) { return l.identity().uuid; })
      .def_property_readonly("host", [](me::Locker& l) { return l.identity().host; })
      .def_property_readonly("pid", [](me::Locker& l) { return l.identity().pid; })
      .def_property_readonly("key", [](me::Locker& l) { return l.key(); })
      .def_property_readonly("collection", [](me::Locker& l) { return l.options().collection; })
      .def(
          "release_min_hold",
          [](me::Locker& l, double min_hold) -> py::object {
            auto r =
                nogil<std::optional<std::int64_t>>([&] { return l.release_min_hold(min_hold); });
            return r ? datetime_from_ms(*r) : py::none();
          },
          py::arg("min_hold"))
      .def(
          "claim_window",
          [](me::Locker& l, double window) -> py::object {
            auto r = nogil<std::optional<std::int64_t>>([&] { return l.claim_window(window); });
            return r ? datetime_from_ms(*r) : py::none();
          },
          py::arg("window"))
      .def_property_readonly("ttl", [](me::Locker& l) { return l.ttl_s(); })
      .def_static("acquire_retry", &me::Locker::acquire_retry, py::arg("blocking"),
                  py::arg("start_ms"), py::arg("now_ms"), py::arg("timeout"), py::arg("count"),
                  "The core's retry rule of every acquire loop (the contract's _acquireretry): "
                  "may attempt number `count` run at monotonic ms `now_ms` of a wait started "
                  "at `start_ms`? ValueError for a timeout without blocking.");

  // --------------------------------------------------------------- lease -----
  py::class_<PyLease>(m, "KeepAliveLease")
      .def(py::init<std::shared_ptr<me::Locker>, bool, std::optional<double>, double, py::object>(),
           py::arg("locker"), py::arg("blocking") = true, py::arg("timeout") = py::none(),
           py::arg("step") = 0.25, py::arg("on_lost") = py::none(),
           "Acquires the locker's lock and keeps it alive on the process's renewer thread.")
      .def_static(
          "adopt",
          [](std::shared_ptr<me::Locker> locker, py::object on_lost) {
            return adopt_hold<PyLease>(std::move(locker), std::move(on_lost),
                                       "mongoelector lease on_lost");
          },
          py::arg("locker"), py::arg("on_lost") = py::none(),
          "Keeps alive the hold the locker has now (ValueError without one).")
      .def_property_readonly("fence", [](PyLease& l) { return l.lease->fence(); })
      .def_property_readonly(
          "lost", [](PyLease& l) { return nogil<bool>([&] { return l.lease->lost(); }); })
      .def_property_readonly(
          "deadline_in",
          [](PyLease& l) {
            return nogil<double>([&] {
              return static_cast<double>(l.lease->renew_deadline_mono() -
                                         l.lease->locker()->clock().mono_ms()) /
                     1000.0;
            });
          },
          "Seconds until the renew deadline on the lease's clock (<= 0: passed).")
      .def_property_readonly(
          "lost_reason",
          [](PyLease& l) { return nogil<std::string>([&] { return l.lease->lost_reason(); }); })
      .def(
          "wait_lost",
          [](PyLease& l, std::optional<double> timeout) {
            std::optional<std::int64_t> ms;
            if (timeout)
              ms = static_cast<std::int64_t>(std::ceil(std::max(0.0, *timeout) * 1000.0));
            return nogil<bool>([&] { return l.lease->wait_lost(ms); });
          },
          py::arg("timeout") = py::none())
      .def("close", &PyLease::close, "Stops renewing; releases the lock (fenced) unless lost.")
      .def("close_min_hold", &PyLease::close_min_hold, py::arg("min_hold"),
           "close(), keeping the lock taken until min_hold seconds after its acquisition.");

  // ------------------------------------------------------------- elector -----
  py::class_<PyElector>(m, "Elector")
      .def(py::init<std::shared_ptr<me::Storage>, std::string, double, bool,
                    std::optional<std::string>, py::object, std::string, std::string, bool,
                    std::optional<me::Identity>, bool, std::optional<double>>(),
           py::arg("storage"), py::arg("key"), py::arg("ttl"), py::arg("report_status"),
           py::arg("app_version"), py::arg("dispatch"),
           py::arg("lock_collection") = "elector.locks",
           py::arg("status_collection") = "elector.leader_status",
           py::arg("allow_unsafe_server") = false, py::arg("identity") = py::none(),
           py::arg("delete_on_release") = false, py::arg("handover_poll") = py::none())
      .def("set_callback_enabled", &PyElector::set_enabled)
      .def("start",
           [](PyElector& e) {
             UserCall uc;
             nogil<void>([&] { e.get().start(); });
           })
      .def("stop",
           [](PyElector& e) {
             UserCall uc;
             nogil<void>([&] { e.get().stop(); });
           })
      .def("poll",
           [](PyElector& e) {
             UserCall uc;
             nogil<void>([&] { e.get().poll(); });
           })
      .def("release",
           [](PyElector& e) {
             UserCall uc;
             nogil<void>([&] { e.get().release(); });
           })
      .def(
          "resign",
          [](PyElector& e, std::optional<double> hold_off) {
            UserCall uc;
            return nogil<bool>([&] { return e.get().resign(hold_off); });
          },
          py::arg("hold_off") = py::none())
      .def(
          "transfer",
          [](PyElector& e, const std::string& to) {
            UserCall uc;
            nogil<void>([&] { e.get().transfer(to); });
          },
          py::arg("to"))
      .def("_abandon", &PyElector::abandon)
      .def_property_readonly(
          "running", [](PyElector& e) { return nogil<bool>([&] { return e.get().running(); }); })
      .def_property_readonly(
          "is_leader",
          [](PyElector& e) { return nogil<bool>([&] { return e.get().is_leader(); }); })
      .def_property_readonly(
          "leader_fence",
          [](PyElector& e) {
            return nogil<std::optional<std::int64_t>>([&] { return e.get().leader_fence(); });
          })
      .def_property_readonly(
          "leader_exists",
          [](PyElector& e) { return nogil<bool>([&] { return e.get().leader_exists(); }); })
      .def_property_readonly(
          "poll_wait",
          [](PyElector& e) { return nogil<double>([&] { return e.get().poll_wait(); }); })
      .def_property_readonly(
          "last_poll",
          [](PyElector& e) -> py::object {
            auto lp = nogil<std::optional<me::DateTime>>([&] { return e.get().last_poll(); });
            return lp ? datetime_from_ms(lp->ms) : py::none();
          })
      .def_property_readonly("renew_deadline_remaining",
                             [](PyElector& e) {
                               return nogil<std::optional<double>>([&] {
                                 me::Elector& el = e.get();
                                 return seconds_until(el.renew_deadline_mono(),
                                                      el.locker().clock());
                               });
                             })
      .def("node_status",
           [](PyElector& e) {
             return to_py(nogil<me::Document>([&] { return e.get().node_status(); }));
           })
      .def("cluster_detail",
           [](PyElector& e) {
             return cluster_detail_dict(
                 nogil<me::Elector::ClusterDetail>([&] { return e.get().cluster_detail(); }));
           })
      .def_property_readonly("locker", [](PyElector& e) { return e.get().locker_ptr(); });

  // ----------------------------------------------------------- semaphore -----
  // Private names (the public API is mongoelector.semaphore): _native.pyi types them
  // once they are final.
  py::class_<me::Semaphore, std::shared_ptr<me::Semaphore>>(m, "_Semaphore")
      .def(py::init(&make_semaphore), py::arg("storage"), py::arg("key"), py::arg("limit"),
           py::arg("collection") = "mongosemaphore", py::arg("ttl") = 600.0,
           py::arg("timeparanoid") = true, py::arg("maxoffset") = 0.5,
           py::arg("allow_unsafe_server") = false, py::arg("identity") = py::none())
      .def(
          "acquire",
          [](me::Semaphore& s, bool blocking, std::optional<double> timeout, double step) {
            SignalCancel cancel;
            return cancel.run<std::int64_t>(
                [&] { return s.acquire(blocking, timeout, step, cancel.fn()); });
          },
          py::arg("blocking") = true, py::arg("timeout") = py::none(), py::arg("step") = 0.25)
      .def("try_acquire",
           [](me::Semaphore& s) {
             return nogil<std::optional<std::int64_t>>([&] { return s.try_acquire(); });
           })
      .def("release", [](me::Semaphore& s) { nogil<void>([&] { s.release(); }); })
      .def("touch",
           [](me::Semaphore& s) -> py::object {
             auto r = nogil<std::optional<std::int64_t>>([&] { return s.touch(); });
             return r ? datetime_from_ms(*r) : py::none();
           })
      .def("holders",
           [](me::Semaphore& s) {
             auto slots = nogil<std::vector<me::SemaphoreSlot>>([&] { return s.holders(); });
             py::list out;
             for (const auto& slot : slots) out.append(semaphore_slot_dict(slot));
             return out;
           })
      .def("read",
           [](me::Semaphore& s) -> py::object {
             auto d = nogil<std::optional<me::SemaphoreDoc>>([&] { return s.read(); });
             if (!d) return py::none();
             py::dict out;
             out["_id"] = d->key;
             out["limit"] = d->limit;
             out["fence"] = d->fence;
             py::list slots;
             for (const auto& slot : d->slots) slots.append(semaphore_slot_dict(slot));
             out["slots"] = slots;
             return py::object(out);
           })
      .def("verify_time",
           [](me::Semaphore& s) { return nogil<double>([&] { return s.verify_time(); }); })
      .def_property_readonly(
          "hold",
          [](me::Semaphore& s) -> py::object {
            auto h = nogil<std::optional<me::SemaphoreHold>>([&] { return s.hold(); });
            if (!h) return py::none();
            return py::make_tuple(h->fence, h->slot, datetime_from_ms(h->created_ms),
                                  datetime_from_ms(h->expire_ms));
          })
      .def_property_readonly(
          "fence",
          [](me::Semaphore& s) {
            return nogil<std::optional<std::int64_t>>([&] { return live_semaphore_fence(s); });
          })
      .def_property_readonly("lease_remaining",
                             [](me::Semaphore& s) {
                               return nogil<std::optional<double>>([&] {
                                 return seconds_until(s.lease_deadline_mono(), s.clock());
                               });
                             })
      .def_property_readonly("uuid", [](me::Semaphore& s) { return s.identity().uuid; })
      .def_property_readonly("host", [](me::Semaphore& s) { return s.identity().host; })
      .def_property_readonly("pid", [](me::Semaphore& s) { return s.identity().pid; })
      .def_property_readonly("key", [](me::Semaphore& s) { return s.key(); })
      .def_property_readonly("limit", [](me::Semaphore& s) { return s.limit(); })
      .def_property_readonly("collection", [](me::Semaphore& s) { return s.options().collection; })
      .def_property_readonly("ttl", [](me::Semaphore& s) { return s.ttl_s(); });

  py::class_<PySemaphoreLease>(m, "_SemaphoreLease")
      .def(py::init<std::shared_ptr<me::Semaphore>, bool, std::optional<double>, double,
                    py::object>(),
           py::arg("semaphore"), py::arg("blocking") = true, py::arg("timeout") = py::none(),
           py::arg("step") = 0.25, py::arg("on_lost") = py::none(),
           "Acquires a slot and keeps it alive on the process's renewer threads.")
      .def_static(
          "adopt",
          [](std::shared_ptr<me::Semaphore> sem, py::object on_lost) {
            return adopt_hold<PySemaphoreLease>(std::move(sem), std::move(on_lost),
                                                "mongoelector semaphore lease on_lost");
          },
          py::arg("semaphore"), py::arg("on_lost") = py::none(),
          "Keeps alive the slot the semaphore holds now (ValueError without one).")
      .def_property_readonly("fence", [](PySemaphoreLease& l) { return l.lease->fence(); })
      .def_property_readonly(
          "deadline_in",
          [](PySemaphoreLease& l) {
            return nogil<double>([&] {
              return static_cast<double>(l.lease->renew_deadline_mono() -
                                         l.lease->semaphore()->clock().mono_ms()) /
                     1000.0;
            });
          },
          "Seconds until the renew deadline on the lease's clock (<= 0: passed).")
      .def_property_readonly(
          "lost", [](PySemaphoreLease& l) { return nogil<bool>([&] { return l.lease->lost(); }); })
      .def_property_readonly("lost_reason",
                             [](PySemaphoreLease& l) {
                               return nogil<std::string>([&] { return l.lease->lost_reason(); });
                             })
      .def(
          "wait_lost",
          [](PySemaphoreLease& l, std::optional<double> timeout) {
            std::optional<std::int64_t> ms;
            if (timeout)
              ms = static_cast<std::int64_t>(std::ceil(std::max(0.0, *timeout) * 1000.0));
            return nogil<bool>([&] { return l.lease->wait_lost(ms); });
          },
          py::arg("timeout") = py::none())
      .def("close", &PySemaphoreLease::close,
           "Stops renewing; releases the slot (fenced) unless lost.");

  // ------------------------------------------------------------- process -----
  m.def(
      "op_timeout_for_ttl",
      [](double ttl_s) { return static_cast<double>(me::op_timeout_ms_for_ttl(ttl_s)) / 1000.0; },
      "The default per-call timeout of a locker or elector with this ttl (seconds): ttl/10 "
      "in [0.1 s, 5 s], as in every binding.");
  // mongoelector.testing: the in-process memory:// backend's test levers.
  m.def(
      "memory_expire",
      [](const std::string& uri, const std::string& collection, const std::string& key) {
        auto client = me::MemoryClient::open(uri);
        return client->storage()->expire_lock(collection, key);
      },
      py::arg("uri"), py::arg("collection"), py::arg("key"));
  m.def(
      "memory_set_unavailable",
      [](const std::string& uri, bool down) {
        me::MemoryClient::open(uri)->storage()->set_unavailable(down);
      },
      py::arg("uri"), py::arg("down"));
  m.def("flush_log", &flush_log_bridge, "Wait until queued core log messages reached logging.");
  m.def("shutdown_log", &shutdown_log_bridge, "Flush and stop the log bridge (interpreter exit).");
  m.def("finalizing", &interpreter_finalizing);
  m.def("wait_reapers", &wait_reapers, py::arg("timeout"),
        "Wait until electors released from their own callbacks are destroyed.");
  m.def(
      "_spin_with_gil",
      [](double seconds) {
        // Test helper: a long C call that keeps the GIL, like a heavy C extension.
        auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds));
        volatile std::uint64_t n = 0;
        while (std::chrono::steady_clock::now() < end) n = n + 1;
        return static_cast<std::uint64_t>(n);
      },
      py::arg("seconds"), "Busy-wait for `seconds` holding the GIL (tests only).");
}
