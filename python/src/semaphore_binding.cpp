#include "bindings.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "binding_util.h"
#include "convert.h"
#include "lease/lease.h"
#include "semaphore/semaphore.h"

namespace mongoelector_py {

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

void bind_semaphore(py::module_& m) {
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
      .def(
          "start_acquire",
          [](me::Semaphore& s, bool blocking, std::optional<double> timeout, double step) {
            return std::shared_ptr<me::AcquireRun>(s.start_acquire(blocking, timeout, step));
          },
          py::arg("blocking") = true, py::arg("timeout") = py::none(), py::arg("step") = 0.25,
          py::keep_alive<0, 1>(), "Locker.start_acquire for a slot.")
      .def(
          "release_if",
          [](me::Semaphore& s, std::int64_t fence) {
            return nogil<bool>([&] { return s.release_if(fence); });
          },
          py::arg("fence"), "Locker.release_if for a slot.")
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
}

}  // namespace mongoelector_py
