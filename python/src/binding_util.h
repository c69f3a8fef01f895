// Helpers shared by the extension's bindings (python/src/*_binding.cpp): the GIL,
// errors, Ctrl-C in native waits, and keep-alive leases.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "clock.h"
#include "exceptions.h"
#include "gil.h"
#include "lease/lease.h"
#include "locker.h"
#include "storage/storage.h"

namespace mongoelector_py {

namespace py = pybind11;
namespace me = mongoelector;

// Runs `f` without the GIL (every call into core/: see module.cpp).
template <class R, class F>
R nogil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// The exception translator: core exceptions -> mongoelector.errors / builtins.
void translate(std::exception_ptr p);

// The cancel function of a native blocking acquire (a lock, a semaphore slot, a lease).
// A signal whose handler raised (Ctrl-C: KeyboardInterrupt) ends the wait as the core's
// own Cancelled, so the core counts the outcome once, as "cancelled", in its metrics;
// run() then raises the handler's exception in its place. Interpreter exit cancels too.
// Pending signals are looked at every time the core asks (only the main thread's wait
// sees them); the core's first ask is answered by the look run() takes while it still
// holds the GIL, so an acquire that succeeds at once never takes the GIL back to ask.
class SignalCancel {
 public:
  me::CancelFn fn() const {
    auto s = state_;
    return [s] {
      if (s->answered.exchange(false)) return s->raised.has_value();
      if (interpreter_finalizing()) return true;
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) return false;
      s->raised.emplace();  // takes the handler's exception (the GIL is held)
      return true;
    };
  }
  // Re-raises the handler's exception of a wait that fn() cancelled (with the GIL).
  void rethrow_raised() const {
    if (state_->raised) throw py::error_already_set(std::move(*state_->raised));
  }
  // Runs `f` (a blocking core call given fn()) without the GIL. Called with the GIL.
  template <class R, class F>
  R run(F&& f) const {
    // A pending signal's handler runs now; the core's first cancel check reports it.
    if (PyErr_CheckSignals() != 0) state_->raised.emplace();
    state_->answered = true;
    try {
      R r = without_gil<R>(f);
      if (state_->answered.exchange(false) && state_->raised) {
        without_gil<void>([&r] { [[maybe_unused]] R dropped = std::move(r); });  // a lease: closes
        rethrow_raised();
      }
      return r;
    } catch (const py::error_already_set&) {
      throw;
    } catch (const me::Cancelled&) {
      rethrow_raised();
      throw;
    } catch (...) {
      rethrow_unasked();
      throw;
    }
  }

 private:
  template <class R, class F>
  static R without_gil(F&& f) {
    py::gil_scoped_release nogil;
    return f();
  }
  // The core returned without asking: the exception of a handler that ran in run()
  // must not be lost.
  void rethrow_unasked() const {
    if (state_->answered.exchange(false)) rethrow_raised();
  }

  struct State {
    std::optional<py::error_already_set> raised;
    std::atomic<bool> answered{false};  // run() looked: the next ask is answered
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Seconds from now (host monotonic clock) until a deadline, None without one.
inline std::optional<double> seconds_until(const std::optional<std::int64_t>& deadline_mono,
                                           me::Clock& clock) {
  if (!deadline_mono) return std::nullopt;
  return (*deadline_mono - clock.mono_ms()) / 1000.0;
}

// A Database lookalike (neither pymongo nor mongomock) cannot have its calls bounded, and
// the original's API has no way to opt in: accept it, saying so once per object.
bool allow_unbounded(const std::shared_ptr<me::Storage>& storage);

// A keep-alive's on_lost from Python's callable (None: nothing). It runs on a thread of
// the core's callback dispatcher (never the timer that decides losses: a GIL wait there
// delays no other lease's loss): it takes the GIL only to call the Python callable,
// never once the interpreter is finalizing.
std::function<void()> on_lost_function(py::object on_lost, const char* what);

// The options of a keep-alive (lease or semaphore slot) from Python's arguments.
me::KeepAliveOptions keep_alive_options(bool blocking, std::optional<double> timeout, double step,
                                        py::object on_lost, const char* what,
                                        const SignalCancel& cancel);

// Acquires a keep-alive lease with `acquire(options)` (one of KeepAliveLease::acquire's
// overloads) without the GIL, Ctrl-C ending a blocking wait.
template <class Acquire>
std::unique_ptr<me::KeepAliveLease> acquire_keep_alive(bool blocking, std::optional<double> timeout,
                                                       double step, py::object on_lost,
                                                       const char* what, Acquire&& acquire) {
  SignalCancel cancel;
  auto o = keep_alive_options(blocking, timeout, step, std::move(on_lost), what, cancel);
  return cancel.run<std::unique_ptr<me::KeepAliveLease>>([&] { return acquire(std::move(o)); });
}

// Keeps alive the hold `holder` (a Locker, a Semaphore, an RwLock) has now, taken by its
// own acquire: the asyncio leases wait in the event loop between the holder's attempts
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

// A keep-alive lease (core/lease) as Python holds it, whatever it keeps (a lock, a
// semaphore slot, a read or write hold): each kind derives its own class from it.
struct PyKeepAlive {
  std::unique_ptr<me::KeepAliveLease> lease;

  PyKeepAlive() = default;
  explicit PyKeepAlive(std::unique_ptr<me::KeepAliveLease> l) : lease(std::move(l)) {}
  PyKeepAlive(const PyKeepAlive&) = delete;
  PyKeepAlive& operator=(const PyKeepAlive&) = delete;
  ~PyKeepAlive() { close(); }
  void close() { close_without_gil(lease); }
};

// The clock of the hold a lease keeps alive (the renewer's).
inline me::Clock& lease_clock(const me::KeepAliveLease& l) {
  if (l.locker()) return l.locker()->clock();
  if (l.semaphore()) return l.semaphore()->clock();
  return l.rwlock()->clock();
}

// What every keep-alive class T (the leases of a `Holder`'s holds) has on `cls`:
// adopt(<holder_arg>, on_lost), fence, lost, deadline_in, lost_reason, wait_lost(timeout)
// and close(), each core call without the GIL. T::what names its on_lost in reports.
template <class Holder, class T>
void def_keep_alive(py::class_<T>& cls, const char* holder_arg) {
  static_assert(std::is_base_of_v<PyKeepAlive, T>, "a keep-alive lease");
  cls.def_static(
         "adopt",
         [](std::shared_ptr<Holder> holder, py::object on_lost) {
           return adopt_hold<T>(std::move(holder), std::move(on_lost), T::what);
         },
         py::arg(holder_arg), py::arg("on_lost") = py::none(),
         "Keeps alive the hold its holder has now (ValueError without one).")
      .def_property_readonly("fence", [](T& l) { return l.lease->fence(); })
      .def_property_readonly("lost",
                             [](T& l) { return nogil<bool>([&] { return l.lease->lost(); }); })
      .def_property_readonly(
          "deadline_in",
          [](T& l) {
            return nogil<double>([&] {
              return static_cast<double>(l.lease->renew_deadline_mono() -
                                         lease_clock(*l.lease).mono_ms()) /
                     1000.0;
            });
          },
          "Seconds until the renew deadline on the lease's clock (<= 0: passed).")
      .def_property_readonly(
          "lost_reason",
          [](T& l) { return nogil<std::string>([&] { return l.lease->lost_reason(); }); })
      .def(
          "wait_lost",
          [](T& l, std::optional<double> timeout) {
            std::optional<std::int64_t> ms;
            if (timeout)
              ms = static_cast<std::int64_t>(std::ceil(std::max(0.0, *timeout) * 1000.0));
            return nogil<bool>([&] { return l.lease->wait_lost(ms); });
          },
          py::arg("timeout") = py::none())
      .def(
          "close", [](T& l) { l.close(); },
          "Stops renewing; releases the hold (fenced) unless it was lost.");
}

}  // namespace mongoelector_py
