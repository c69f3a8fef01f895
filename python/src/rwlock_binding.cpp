#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "binding_util.h"
#include "bindings.h"
#include "exceptions.h"
#include "lease/lease.h"
#include "semaphore/rwlock.h"
#include "slot_holder_binding.h"

namespace mongoelector_py {

namespace {

std::shared_ptr<me::RwLock> make_rwlock(std::shared_ptr<me::Storage> storage, std::string key,
                                        std::int64_t max_readers, bool writer_preference,
                                        std::string collection, double ttl, bool timeparanoid,
                                        double maxoffset, bool allow_unsafe_server,
                                        std::optional<me::Identity> identity, bool fair) {
  me::RwLockOptions o;
  o.max_readers = max_readers;
  o.fair = fair;
  o.writer_preference = writer_preference;
  return make_slot_holder<me::RwLock>(std::move(storage), std::move(o), std::move(key),
                                      std::move(collection), ttl, timeparanoid, maxoffset,
                                      allow_unsafe_server, std::move(identity));
}

// "read" / "write" (the names of side_name); anything else is the caller's mistake.
me::RwSide side_of(const std::string& side) {
  if (side == me::side_name(me::RwSide::Read)) return me::RwSide::Read;
  if (side == me::side_name(me::RwSide::Write)) return me::RwSide::Write;
  throw me::InvalidArgument("a read-write lock's side is \"read\" or \"write\", not \"" + side +
                            "\"");
}

py::object optional_slot(const std::optional<me::SemaphoreSlot>& s) {
  return s ? py::object(slot_dict(*s)) : py::none();
}

}  // namespace

// A read or write hold kept alive on the process's renewer (core/lease/lease.h).
struct PyRwLockLease : PyKeepAlive {
  static constexpr const char* what = "mongoelector read-write lock on_lost";
  PyRwLockLease() = default;
  PyRwLockLease(std::shared_ptr<me::RwLock> rwlock, const std::string& side, bool blocking,
                std::optional<double> timeout, double step, py::object on_lost)
      : PyKeepAlive(acquire_keep_alive(blocking, timeout, step, std::move(on_lost), what,
                                       [&, s = side_of(side)](me::KeepAliveOptions o) {
                                         return me::KeepAliveLease::acquire(std::move(rwlock), s,
                                                                            std::move(o));
                                       })) {}
};

void bind_rwlock(py::module_& m) {
  // Private names (the public API is mongoelector.rwlock), as _Semaphore's.
  py::class_<me::RwLock, std::shared_ptr<me::RwLock>> cls(m, "_RwLock");
  cls.def(py::init(&make_rwlock), py::arg("storage"), py::arg("key"),
          py::arg("max_readers") = me::RwLockDefaults::max_readers,
          py::arg("writer_preference") = me::RwLockDefaults::writer_preference,
          py::arg("collection") = me::RwLockDefaults::collection,
          py::arg("ttl") = me::RwLockDefaults::ttl_s,
          py::arg("timeparanoid") = me::RwLockDefaults::timeparanoid,
          py::arg("maxoffset") = me::RwLockDefaults::maxoffset_s,
          py::arg("allow_unsafe_server") = me::RwLockDefaults::allow_unsafe_server,
          py::arg("identity") = py::none(), py::arg("fair") = false)
      .def(
          "acquire",
          [](me::RwLock& l, const std::string& side, bool blocking, std::optional<double> timeout,
             double step) {
            const me::RwSide s = side_of(side);
            SignalCancel cancel;
            return cancel.run<std::int64_t>(
                [&] { return l.acquire(s, blocking, timeout, step, cancel.fn()); });
          },
          py::arg("side"), py::arg("blocking") = true, py::arg("timeout") = py::none(),
          py::arg("step") = 0.25)
      .def(
          "try_acquire",
          [](me::RwLock& l, const std::string& side) {
            const me::RwSide s = side_of(side);
            return nogil<std::optional<std::int64_t>>([&] { return l.try_acquire(s); });
          },
          py::arg("side"))
      .def(
          "start_acquire",
          [](me::RwLock& l, const std::string& side, bool blocking, std::optional<double> timeout,
             double step) {
            return std::shared_ptr<me::AcquireRun>(
                l.start_acquire(side_of(side), blocking, timeout, step));
          },
          py::arg("side"), py::arg("blocking") = true, py::arg("timeout") = py::none(),
          py::arg("step") = 0.25, py::keep_alive<0, 1>(),
          "Locker.start_acquire for a read or the write hold (a blocking writer's waiting "
          "mark stays until drop_mark(), release() or its expiry).")
      .def(
          "drop_mark", [](me::RwLock& l) { nogil<void>([&] { l.drop_mark(); }); },
          "Releases (fenced) this instance's writer-waiting mark, if any.")
      .def("holders",
           [](me::RwLock& l) {
             auto h = nogil<me::RwLockHolders>([&] { return l.holders(); });
             py::list readers;
             for (const auto& slot : h.readers) readers.append(slot_dict(slot));
             py::dict out;
             out["readers"] = readers;
             out["writer"] = optional_slot(h.writer);
             out["waiting_writer"] = optional_slot(h.waiting_writer);
             out["waiting"] = queue_list(h.waiting);
             return out;
           })
      .def_property_readonly("side",
                             [](me::RwLock& l) -> py::object {
                               auto s = nogil<std::optional<me::RwSide>>([&] { return l.side(); });
                               return s ? py::object(py::str(me::side_name(*s))) : py::none();
                             })
      .def_property_readonly("waiting_mark", &me::RwLock::waiting_mark)
      .def_property_readonly("max_readers", &me::RwLock::max_readers)
      .def_property_readonly("fair", [](me::RwLock& l) { return l.options().fair; })
      .def_property_readonly("writer_preference",
                             [](me::RwLock& l) { return l.options().writer_preference; });
  def_slot_holder(cls);

  py::class_<PyRwLockLease> lease(m, "_RwLockLease");
  lease.def(py::init<std::shared_ptr<me::RwLock>, const std::string&, bool, std::optional<double>,
                     double, py::object>(),
            py::arg("rwlock"), py::arg("side"), py::arg("blocking") = true,
            py::arg("timeout") = py::none(), py::arg("step") = 0.25,
            py::arg("on_lost") = py::none(),
            "Takes a read or the write hold and keeps it alive on the process's renewer.");
  def_keep_alive<me::RwLock>(lease, "rwlock");
}

}  // namespace mongoelector_py
