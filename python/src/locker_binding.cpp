#include "bindings.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "binding_util.h"
#include "convert.h"
#include "election/elector.h"
#include "lock_queue.h"
#include "locker.h"
#include "slot_holder_binding.h"

namespace mongoelector_py {

namespace {

py::object hold_tuple(const std::optional<me::Hold>& h) {
  if (!h) return py::none();
  return py::make_tuple(h->fence, datetime_from_ms(h->created_ms), datetime_from_ms(h->expire_ms));
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

std::shared_ptr<me::Locker> make_locker(std::shared_ptr<me::Storage> storage, std::string key,
                                        std::string collection, double ttl, bool timeparanoid,
                                        double maxoffset, bool delete_on_release,
                                        bool allow_unsafe_server, bool ensure_indexes,
                                        std::optional<me::Identity> identity, bool lazy_token,
                                        bool fair) {
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
  o.fair = fair;
  me::Identity id = identity ? *identity : me::Identity::generate();
  py::gil_scoped_release nogil;  // index creation goes through the storage
  return std::make_shared<me::Locker>(std::move(storage), std::move(o), nullptr, std::move(id));
}

}  // namespace

void bind_locker(py::module_& m) {
  py::class_<me::Locker, std::shared_ptr<me::Locker>> cls(m, "Locker");
  cls.def(py::init(&make_locker), py::arg("storage"), py::arg("key"),
          py::arg("collection") = "mongolocker", py::arg("ttl") = 600.0,
          py::arg("timeparanoid") = true, py::arg("maxoffset") = 0.5,
          py::arg("delete_on_release") = false, py::arg("allow_unsafe_server") = false,
          py::arg("ensure_indexes") = true, py::arg("identity") = py::none(),
          py::arg("lazy_token") = false, py::arg("fair") = false)
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
          "start_acquire",
          [](me::Locker& l, bool blocking, std::optional<double> timeout, double step, bool force) {
            return std::shared_ptr<me::AcquireRun>(l.start_acquire(blocking, timeout, step, force));
          },
          py::arg("blocking") = true, py::arg("timeout") = py::none(), py::arg("step") = 0.25,
          py::arg("force") = false, py::keep_alive<0, 1>(),
          "The core's acquire as steps its caller drives (an event loop: it sleeps on the "
          "loop, each attempt is one call): the same options, retry rule, time check, "
          "cancellation and metrics as acquire(). The run keeps this locker alive.")
      .def(
          "leave_queue", [](me::Locker& l) { nogil<void>([&] { l.leave_queue(); }); },
          "Fair queueing: removes this instance's queue entry, if any (fenced; no round trip "
          "without one; failures are logged, the entry then expires within its ttl).")
      .def_property_readonly(
          "queue_ticket", [](me::Locker& l) { return l.queue_entry().ticket; },
          "Fair queueing: the ticket of this instance's queue entry as last written (0: none).")
      .def(
          "release_if",
          [](me::Locker& l, std::int64_t fence) {
            return nogil<bool>([&] { return l.release_if(fence); });
          },
          py::arg("fence"),
          "Releases this instance's hold only if it is the hold of `fence` (fenced): True "
          "when released, False (no round trip) otherwise.")
      .def(
          "acquire_expiry",
          [](me::Locker& l, bool blocking, std::optional<double> timeout, double step,
             bool force) -> py::object {
            // acquire() and then `hold`'s expiry in one call without the GIL: the
            // drop-in's acquire needs both (MongoLocker.ts_expire).
            SignalCancel cancel;
            auto expire =
                cancel.run<std::optional<std::int64_t>>([&]() -> std::optional<std::int64_t> {
                  l.acquire(blocking, timeout, step, force, cancel.fn());
                  auto h = l.hold();
                  if (!h) return std::nullopt;
                  return h->expire_ms;
                });
            return expire ? datetime_from_ms(*expire) : py::none();
          },
          py::arg("blocking") = true, py::arg("timeout") = py::none(), py::arg("step") = 0.25,
          py::arg("force") = false,
          "acquire(), then the expiry of the hold it took (None if it is gone already).")
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
      .def(
          "waiting",
          [](me::Locker& l) {
            return read_waiting(l.storage(), l.server_clock(),
                                me::LockQueue::collection_for(l.options().collection), l.key());
          },
          "The fair waiters still queued for the lock, first in line first (one round trip; "
          "the queue beside the lock, lock_queue.h).")
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
      .def_static("acquire_retry", &me::HoldState::acquire_retry, py::arg("blocking"),
                  py::arg("start_ms"), py::arg("now_ms"), py::arg("timeout"), py::arg("count"),
                  "The core's retry rule of every acquire loop (the contract's _acquireretry): "
                  "may attempt number `count` run at monotonic ms `now_ms` of a wait started "
                  "at `start_ms`? ValueError for a timeout without blocking.")
      .def_property_readonly(
          "clock_stale", [](me::Locker& l) { return l.server_clock().stale(); },
          "Whether the next use of the server-time estimate takes a sample (a round trip).");
  bind_locker_parts(m, cls);
}

}  // namespace mongoelector_py
