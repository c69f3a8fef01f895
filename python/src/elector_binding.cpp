#include "bindings.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "binding_util.h"
#include "convert.h"
#include "election/elector.h"

namespace mongoelector_py {

namespace {

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
            std::optional<double> handover_poll, std::optional<std::string> payload,
            std::optional<double> priority, std::optional<double> priority_stability)
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
    o.payload = std::move(payload);  // JSON text, validated by the core
    o.priority = priority;           // validated by the core (the rule lives in its loop)
    o.priority_stability_s = priority_stability;
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

// A leader payload (JSON object text) as the dict it encodes, None when there is none.
py::object payload_to_py(const std::optional<std::string>& json) {
  if (!json) return py::none();
  return py::module_::import("json").attr("loads")(*json);
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
    // Only when it has one: the original's {host, process_id, uuid} otherwise (drop-in).
    if (cd.leader->payload) leader["payload"] = payload_to_py(cd.leader->payload);
    out["leader"] = leader;
  } else {
    out["leader"] = py::none();
  }
  out["timestamp"] = datetime_from_ms(cd.timestamp.ms);
  return out;
}

}  // namespace

void bind_elector(py::module_& m) {
  py::class_<PyElector>(m, "Elector")
      .def(py::init<std::shared_ptr<me::Storage>, std::string, double, bool,
                    std::optional<std::string>, py::object, std::string, std::string, bool,
                    std::optional<me::Identity>, bool, std::optional<double>,
                    std::optional<std::string>, std::optional<double>, std::optional<double>>(),
           py::arg("storage"), py::arg("key"), py::arg("ttl"), py::arg("report_status"),
           py::arg("app_version"), py::arg("dispatch"),
           py::arg("lock_collection") = "elector.locks",
           py::arg("status_collection") = "elector.leader_status",
           py::arg("allow_unsafe_server") = false, py::arg("identity") = py::none(),
           py::arg("delete_on_release") = false, py::arg("handover_poll") = py::none(),
           py::arg("payload") = py::none(), py::arg("priority") = py::none(),
           py::arg("priority_stability") = py::none())
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
      .def(
          "set_payload",
          [](PyElector& e, std::optional<std::string> json) {
            UserCall uc;
            return nogil<bool>([&] { return e.get().set_payload(std::move(json)); });
          },
          py::arg("json"))
      .def_property_readonly(
          "payload",
          [](PyElector& e) {
            return nogil<std::optional<std::string>>([&] { return e.get().payload(); });
          })
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
  m.def("wait_reapers", &wait_reapers, py::arg("timeout"),
        "Wait until electors released from their own callbacks are destroyed.");
}

}  // namespace mongoelector_py
