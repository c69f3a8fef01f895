// The bindings shared by the holds on a slot document (core/semaphore/slot_holder.h):
// the Semaphore's (_Semaphore, semaphore_binding.cpp) and the read-write lock's (_RwLock,
// rwlock_binding.cpp). What the SlotHolder does for both is bound here, once.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "binding_util.h"
#include "convert.h"
#include "hold/queue_status.h"
#include "semaphore/slot_holder.h"

namespace mongoelector_py {

// Makes a slot hold (a Semaphore, an RwLock) from its feature's options `o` and the
// arguments every slot hold takes from Python; without the GIL (the constructor may
// check the storage).
template <class Holder, class Options>
std::shared_ptr<Holder> make_slot_holder(std::shared_ptr<me::Storage> storage, Options o,
                                         std::string key, std::string collection, double ttl,
                                         bool timeparanoid, double maxoffset,
                                         bool allow_unsafe_server,
                                         std::optional<me::Identity> identity) {
  o.key = std::move(key);
  o.collection = std::move(collection);
  o.ttl_s = ttl;
  o.timeparanoid = timeparanoid;
  o.maxoffset_s = maxoffset;
  o.allow_unsafe_server = allow_unsafe_server;
  o.allow_unbounded_calls = allow_unbounded(storage);
  me::Identity id = identity ? *identity : me::Identity::generate();
  py::gil_scoped_release nogil;
  return std::make_shared<Holder>(std::move(storage), std::move(o), nullptr, std::move(id));
}

// One slot as Python sees it: {uuid, host, pid, fence, ts_created, ts_expire}.
// Queue entries as Python shows them: [{uuid, ticket, ts_expire}], in the given order.
inline py::list queue_list(const std::vector<me::QueueEntry>& entries) {
  py::list out;
  for (const auto& e : entries) {
    py::dict entry;
    entry["uuid"] = e.uuid;
    entry["ticket"] = e.ticket;
    entry["ts_expire"] = datetime_from_ms(e.expire_ms);
    out.append(entry);
  }
  return out;
}

// The live fair waiters of `key` whose queue is in `collection` (core
// hold/queue_status.h: one read, judged at the earliest server time), as queue_list shows
// them; without the GIL while reading.
inline py::list read_waiting(me::SemaphoreStorage& storage, me::ServerClock& clock,
                             const std::string& collection, const std::string& key) {
  auto st = nogil<me::QueueStatus>(
      [&] { return me::read_queue_status(storage, collection, key, clock.estimate_sampling()); });
  return queue_list(st.waiting);
}

inline py::dict slot_dict(const me::SemaphoreSlot& s) {
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
inline std::optional<std::int64_t> live_fence(me::SlotHolder& s) {
  auto lease = s.lease();
  if (!lease || s.clock().mono_ms() >= lease->end_mono) return std::nullopt;
  return lease->fence;
}

// The SlotHolder's methods and properties on `cls` (every core call without the GIL).
template <class T>
void def_slot_holder(py::class_<T, std::shared_ptr<T>>& cls) {
  static_assert(std::is_base_of_v<me::SlotHolder, T>, "a hold on a slot document");
  cls.def(
         "release_if",
         [](T& s, std::int64_t fence) { return nogil<bool>([&] { return s.release_if(fence); }); },
         py::arg("fence"), "Locker.release_if for a slot.")
      .def("release", [](T& s) { nogil<void>([&] { s.release(); }); })
      .def(
          "leave_queue", [](T& s) { nogil<void>([&] { s.leave_queue(); }); },
          "Removes this instance's fair-queue entry, if any (fenced by uuid and ticket).")
      .def("touch",
           [](T& s) -> py::object {
             auto r = nogil<std::optional<std::int64_t>>([&] { return s.touch(); });
             return r ? datetime_from_ms(*r) : py::none();
           })
      .def("read",
           [](T& s) -> py::object {
             auto d = nogil<std::optional<me::SemaphoreDoc>>([&] { return s.read(); });
             if (!d) return py::none();
             py::dict out;
             out["_id"] = d->key;
             if (!d->kind.empty()) out["kind"] = d->kind;
             out["limit"] = d->limit;
             out["fence"] = d->fence;
             py::list slots;
             for (const auto& slot : d->slots) slots.append(slot_dict(slot));
             out["slots"] = slots;
             // fair queueing: the waiters, in arrival order
             if (!d->queue.empty()) out["queue"] = queue_list(d->queue);
             return py::object(out);
           })
      .def(
          "waiting",
          [](T& s) { return read_waiting(s.storage(), s.server_clock(), s.collection(), s.key()); },
          "The fair waiters still queued for the key, first in line first (one round trip).")
      .def("verify_time", [](T& s) { return nogil<double>([&] { return s.verify_time(); }); })
      .def_property_readonly("hold",
                             [](T& s) -> py::object {
                               auto h = nogil<std::optional<me::Hold>>([&] { return s.hold(); });
                               if (!h) return py::none();
                               return py::make_tuple(h->fence, h->slot,
                                                     datetime_from_ms(h->created_ms),
                                                     datetime_from_ms(h->expire_ms));
                             })
      .def_property_readonly(
          "fence",
          [](T& s) { return nogil<std::optional<std::int64_t>>([&] { return live_fence(s); }); })
      .def_property_readonly("lease_remaining",
                             [](T& s) {
                               return nogil<std::optional<double>>([&] {
                                 return seconds_until(s.lease_deadline_mono(), s.clock());
                               });
                             })
      .def_property_readonly("uuid", [](T& s) { return s.identity().uuid; })
      .def_property_readonly("host", [](T& s) { return s.identity().host; })
      .def_property_readonly("pid", [](T& s) { return s.identity().pid; })
      .def_property_readonly("key", [](T& s) { return s.key(); })
      .def_property_readonly("collection", [](T& s) { return s.collection(); })
      .def_property_readonly("ttl", [](T& s) { return s.ttl_s(); });
}

}  // namespace mongoelector_py
