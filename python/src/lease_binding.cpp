#include "bindings.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "binding_util.h"
#include "lease/lease.h"
#include "locker.h"

namespace mongoelector_py {

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

void bind_lease(py::module_& m) {
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
}

}  // namespace mongoelector_py
