#include "bindings.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "binding_util.h"
#include "lease/lease.h"
#include "semaphore/semaphore.h"
#include "slot_holder_binding.h"

namespace mongoelector_py {

namespace {

std::shared_ptr<me::Semaphore> make_semaphore(std::shared_ptr<me::Storage> storage, std::string key,
                                              std::int64_t limit, std::string collection,
                                              double ttl, bool timeparanoid, double maxoffset,
                                              bool allow_unsafe_server,
                                              std::optional<me::Identity> identity, bool fair) {
  me::SemaphoreOptions o;
  o.limit = limit;
  o.fair = fair;
  return make_slot_holder<me::Semaphore>(std::move(storage), std::move(o), std::move(key),
                                         std::move(collection), ttl, timeparanoid, maxoffset,
                                         allow_unsafe_server, std::move(identity));
}

}  // namespace

// A semaphore slot kept alive on the process's renewer (core/lease/lease.h, the one keep-alive lease).
struct PySemaphoreLease : PyKeepAlive {
  static constexpr const char* what = "mongoelector semaphore lease on_lost";
  PySemaphoreLease() = default;
  PySemaphoreLease(std::shared_ptr<me::Semaphore> sem, bool blocking, std::optional<double> timeout,
                   double step, py::object on_lost)
      : PyKeepAlive(acquire_keep_alive(
            blocking, timeout, step, std::move(on_lost), what, [&](me::KeepAliveOptions o) {
              return me::SemaphoreLease::acquire(std::move(sem), std::move(o));
            })) {}
};

void bind_semaphore(py::module_& m) {
  // Private names (the public API is mongoelector.semaphore): _native.pyi types them
  // once they are final.
  py::class_<me::Semaphore, std::shared_ptr<me::Semaphore>> cls(m, "_Semaphore");
  cls.def(py::init(&make_semaphore), py::arg("storage"), py::arg("key"), py::arg("limit"),
          py::arg("collection") = "mongosemaphore", py::arg("ttl") = 600.0,
          py::arg("timeparanoid") = true, py::arg("maxoffset") = 0.5,
          py::arg("allow_unsafe_server") = false, py::arg("identity") = py::none(),
          py::arg("fair") = false)
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
      .def(
          "start_acquire",
          [](me::Semaphore& s, bool blocking, std::optional<double> timeout, double step) {
            return std::shared_ptr<me::AcquireRun>(s.start_acquire(blocking, timeout, step));
          },
          py::arg("blocking") = true, py::arg("timeout") = py::none(), py::arg("step") = 0.25,
          py::keep_alive<0, 1>(), "Locker.start_acquire for a slot.")
      .def("holders",
           [](me::Semaphore& s) {
             auto slots = nogil<std::vector<me::SemaphoreSlot>>([&] { return s.holders(); });
             py::list out;
             for (const auto& slot : slots) out.append(slot_dict(slot));
             return out;
           })
      .def_property_readonly("limit", [](me::Semaphore& s) { return s.limit(); })
      .def_property_readonly("fair", [](me::Semaphore& s) { return s.options().fair; });
  def_slot_holder(cls);

  py::class_<PySemaphoreLease> lease(m, "_SemaphoreLease");
  lease.def(
      py::init<std::shared_ptr<me::Semaphore>, bool, std::optional<double>, double, py::object>(),
      py::arg("semaphore"), py::arg("blocking") = true, py::arg("timeout") = py::none(),
      py::arg("step") = 0.25, py::arg("on_lost") = py::none(),
      "Acquires a slot and keeps it alive on the process's renewer threads.");
  def_keep_alive<me::Semaphore>(lease, "semaphore");
}

}  // namespace mongoelector_py
