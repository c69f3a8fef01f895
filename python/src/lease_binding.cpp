#include "bindings.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "binding_util.h"
#include "lease/lease.h"
#include "locker.h"

namespace mongoelector_py {

// A lock's keep-alive lease (core/lease) for Python.
struct PyLease : PyKeepAlive {
  static constexpr const char* what = "mongoelector lease on_lost";
  PyLease() = default;
  PyLease(std::shared_ptr<me::Locker> locker, bool blocking, std::optional<double> timeout,
          double step, py::object on_lost)
      : PyKeepAlive(acquire_keep_alive(
            blocking, timeout, step, std::move(on_lost), what, [&](me::KeepAliveOptions o) {
              return me::KeepAliveLease::acquire(std::move(locker), std::move(o));
            })) {}
  void close_min_hold(double min_hold) {
    if (!lease) return;
    py::gil_scoped_release nogil;
    lease->close(min_hold);
  }
};

void bind_lease(py::module_& m) {
  py::class_<PyLease> cls(m, "KeepAliveLease");
  cls.def(py::init<std::shared_ptr<me::Locker>, bool, std::optional<double>, double, py::object>(),
          py::arg("locker"), py::arg("blocking") = true, py::arg("timeout") = py::none(),
          py::arg("step") = 0.25, py::arg("on_lost") = py::none(),
          "Acquires the locker's lock and keeps it alive on the process's renewer thread.")
      .def("close_min_hold", &PyLease::close_min_hold, py::arg("min_hold"),
           "close(), keeping the lock taken until min_hold seconds after its acquisition.");
  def_keep_alive<me::Locker>(cls, "locker");
}

}  // namespace mongoelector_py
