// _native.LeaderObserver: core/observe/leader_observer.h for Python (python/mongoelector/
// observer.py builds mongoelector.observe() on it).
//
// The core's thread polls the lock document and pushes each change into a queue of this
// binding's own (a mutex and a condition variable: no Python involved). Consumers:
//  * next(timeout) waits on that condition variable WITHOUT the GIL, in slices of
//    kSignalCheck, looking at pending signals between them (with the GIL), so that
//    Ctrl-C ends a blocking iteration;
//  * asyncio: `notify`, a Python callable, runs after every push with the GIL taken for
//    that call only (never while the queue's mutex is held, never once the interpreter
//    is finalizing); it wakes the event loops' waiters (call_soon_threadsafe).
// The core's thread is stopped and joined only without the GIL: it may be waiting for
// the GIL (notify, or a PyMongoStorage read).
#include "observer_binding.h"

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "convert.h"
#include "gil.h"
#include "log.h"
#include "observe/leader_observer.h"

namespace mongoelector_py {

namespace me = mongoelector;

namespace {

// Changes kept for a consumer that does not keep up. Changes come at most one per
// interval, so this is reached only by a stream nobody reads; the oldest go first (the
// newest state is what matters), with a warning.
constexpr std::size_t kMaxQueued = 1024;
constexpr auto kSignalCheck = std::chrono::milliseconds(100);

struct ChangeQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<me::LeaderState> items;
  bool closed = false;
  bool warned = false;
  SharedPyObject notify;  // set before the core's thread starts, never changed

  // On the core's observer thread (on_change).
  void push(const me::LeaderState& s, const std::string& key) {
    bool warn = false;
    {
      std::lock_guard<std::mutex> g(mu);
      if (closed) return;
      if (items.size() >= kMaxQueued) {
        items.pop_front();
        warn = !warned;
        warned = true;
      }
      items.push_back(s);
    }
    cv.notify_all();
    if (warn)
      me::log(me::LogLevel::Warning,
              "observer of " + key + ": nobody reads its changes; dropping the oldest (keeping " +
                  std::to_string(kMaxQueued) + ")");
    wake();
  }

  void wake() {
    if (!notify || interpreter_finalizing()) return;
    py::gil_scoped_acquire gil;
    if (interpreter_finalizing()) return;
    try {
      notify.get()();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("mongoelector observer wake-up");
    }
  }
};

// The fields of observer.py's LeaderState, in order; None where a field does not apply.
py::object state_tuple(const me::LeaderState& s) {
  const auto or_none = [](bool present, auto value) -> py::object {
    return present ? py::cast(value) : py::none();
  };
  const bool pending = s.status == me::LeaderStatus::kPending;
  return py::make_tuple(s.has_leader, or_none(s.has_leader, s.uuid), or_none(s.has_leader, s.host),
                        or_none(s.has_leader, s.pid), or_none(s.has_leader, s.fence),
                        datetime_from_ms(s.server_time_ms), static_cast<int>(s.status),
                        s.expire_ms != 0 ? datetime_from_ms(s.expire_ms) : py::none(),
                        or_none(pending, s.handover_uuid), or_none(pending, s.handover_host),
                        or_none(pending, s.handover_pid), or_none(pending, s.handover_fence),
                        s.has_leader && s.payload ? py::cast(*s.payload) : py::none());
}

class PyLeaderObserver {
 public:
  PyLeaderObserver(std::shared_ptr<me::Storage> storage, std::string key, std::string collection,
                   double interval, py::object notify)
      : queue_(std::make_shared<ChangeQueue>()) {
    if (!notify.is_none()) queue_->notify = SharedPyObject(std::move(notify));
    me::LeaderObserverOptions o;
    o.key = key;
    o.lock_collection = std::move(collection);
    o.interval_s = interval;
    auto q = queue_;
    py::gil_scoped_release nogil;
    observer_ = std::make_unique<me::LeaderObserver>(
        std::move(storage), std::move(o), [q, key](const me::LeaderState& s) { q->push(s, key); });
    observer_->start();
  }

  // Without the GIL: the thread may be waiting for it. On the observer's own thread (the
  // object collected as garbage there, during a read through pymongo or a wake-up) the
  // core does not wait: that thread ends after its current poll, holding what it uses.
  ~PyLeaderObserver() {
    if (!observer_) return;  // abandoned after fork()
    end_stream();
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> g(stop_mu_);
    observer_.reset();
  }

  PyLeaderObserver(const PyLeaderObserver&) = delete;
  PyLeaderObserver& operator=(const PyLeaderObserver&) = delete;

  // The next change: (has_leader, uuid, host, pid, fence, server_time), or None once the
  // timeout (seconds; None: no limit) passed or the observer is closed.
  py::object next(std::optional<double> timeout) {
    using clock = std::chrono::steady_clock;
    const bool bounded = timeout && std::isfinite(*timeout);
    const clock::time_point deadline =
        bounded ? clock::now() + std::chrono::duration_cast<clock::duration>(
                                     std::chrono::duration<double>(std::max(0.0, *timeout)))
                : clock::time_point::max();
    for (;;) {
      std::optional<me::LeaderState> got;
      bool done = false;
      {
        py::gil_scoped_release nogil;
        std::unique_lock<std::mutex> lk(queue_->mu);
        const clock::time_point now = clock::now();
        const clock::time_point slice =
            deadline - now > kSignalCheck ? now + kSignalCheck : deadline;
        queue_->cv.wait_until(lk, slice,
                              [this] { return queue_->closed || !queue_->items.empty(); });
        if (!queue_->closed && !queue_->items.empty()) {
          got = queue_->items.front();
          queue_->items.pop_front();
        }
        done = got || queue_->closed || clock::now() >= deadline;
      }
      if (got) return state_tuple(*got);
      if (done) return py::none();
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  // Ends the stream at once (waiters in next() return None, queued changes are dropped)
  // and stops the core's thread, waiting for a poll in flight. Idempotent, any thread.
  void close() {
    end_stream();
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> g(stop_mu_);  // LeaderObserver::stop() joins: one caller
    if (observer_) observer_->stop();
  }

  bool closed() const {
    std::lock_guard<std::mutex> g(queue_->mu);
    return queue_->closed;
  }

  // In a child created by fork() the core's thread does not exist: forget the observer
  // without stopping or joining it (leaked on purpose, with the queue its callback
  // holds, whose mutex that thread may have held at the fork): a closed queue stands in.
  void abandon() {
    (void)observer_.release();
    queue_ = std::make_shared<ChangeQueue>();
    queue_->closed = true;
  }

 private:
  // Closes the queue (waking waiters); whether it was closed already.
  bool end_stream() {
    bool was_closed;
    {
      std::lock_guard<std::mutex> g(queue_->mu);
      was_closed = queue_->closed;
      queue_->closed = true;
      queue_->items.clear();
    }
    queue_->cv.notify_all();
    return was_closed;
  }

  std::shared_ptr<ChangeQueue> queue_;
  std::mutex stop_mu_;
  std::unique_ptr<me::LeaderObserver> observer_;
};

}  // namespace

void bind_observer(py::module_& m) {
  py::class_<PyLeaderObserver>(m, "LeaderObserver")
      .def(py::init<std::shared_ptr<me::Storage>, std::string, std::string, double, py::object>(),
           py::arg("storage"), py::arg("key"), py::arg("collection") = "elector.locks",
           py::arg("interval") = 1.0, py::arg("notify") = py::none(),
           "Polls the lock of `key` every `interval` seconds on a native thread, queueing "
           "every change of leader (the first poll: the current state); calls `notify()` "
           "(GIL taken) after each.")
      .def("next", &PyLeaderObserver::next, py::arg("timeout") = py::none(),
           "The next change as (has_leader, uuid, host, pid, fence, server_time), or None "
           "after `timeout` seconds or once closed. Waits without the GIL; Ctrl-C ends it.")
      .def("close", &PyLeaderObserver::close)
      .def_property_readonly("closed", &PyLeaderObserver::closed)
      .def("_abandon", &PyLeaderObserver::abandon);
}

}  // namespace mongoelector_py
