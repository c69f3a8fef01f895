// The fenced partitioner (core/partition/) for Python: mongoelector.Partitioner.
//
// Callbacks run on the core's callback dispatcher threads (one at a time per partitioner),
// each taking the GIL only for its Python call; every core call below releases the GIL.
// A partitioner whose last reference goes away inside one of its own callbacks is
// destroyed by a reaper thread (the callback's thread cannot wait for itself), as the
// elector's is (elector_binding.cpp).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "binding_util.h"
#include "bindings.h"
#include "convert.h"
#include "partition/members.h"
#include "partition/partitioner.h"
#include "partition/rendezvous.h"

namespace mongoelector_py {

namespace {

// The Python callable `fn` (None: nothing) as a callback of the core. An exception it
// raises is reported as unraisable (the Python wrapper logs its callbacks' errors first).
template <class... Args>
std::function<void(Args...)> py_callback(py::object fn, const char* what) {
  if (fn.is_none()) return {};
  SharedPyObject cb(std::move(fn));
  return [cb, what](Args... args) {
    if (interpreter_finalizing()) return;
    py::gil_scoped_acquire gil;
    if (interpreter_finalizing()) return;
    try {
      cb.get()(args...);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(what);
    }
  };
}

class PyPartitioner {
 public:
  PyPartitioner(std::shared_ptr<me::Storage> storage, std::string group, std::int64_t partitions,
                double ttl, std::optional<double> poll, py::object on_assigned,
                py::object on_revoked, std::string locks_collection, std::string members_collection,
                std::optional<me::Identity> identity) {
    me::PartitionerOptions o;
    o.group = std::move(group);
    o.partitions = partitions;
    o.ttl_s = ttl;
    o.poll_s = poll;
    o.collections.locks = std::move(locks_collection);
    o.collections.members = std::move(members_collection);
    o.allow_unbounded_calls = allow_unbounded(storage);
    me::PartitionerCallbacks cb;
    cb.on_assigned = py_callback<std::int64_t, std::int64_t>(
        std::move(on_assigned), "mongoelector Partitioner on_assigned");
    cb.on_revoked =
        py_callback<std::int64_t>(std::move(on_revoked), "mongoelector Partitioner on_revoked");
    me::Identity id = identity ? *identity : me::Identity::generate();
    py::gil_scoped_release nogil;
    p_ = std::make_unique<me::Partitioner>(std::move(storage), std::move(o), std::move(cb), nullptr,
                                           std::move(id));
  }

  ~PyPartitioner() {
    if (!p_) return;
    if (p_->in_callback()) {  // last reference dropped in a callback: a reaper destroys it
      auto* raw = p_.release();
      raw->request_stop();
      std::thread([raw] { delete raw; }).detach();
      return;
    }
    py::gil_scoped_release nogil;
    p_.reset();
  }

  me::Partitioner& get() {
    if (!p_)
      throw std::runtime_error(
          "this partitioner was inherited through fork(); create a new one in the child");
    return *p_;
  }
  // In a forked child the loop thread does not exist: forget it (leaked on purpose).
  void abandon() { (void)p_.release(); }

 private:
  std::unique_ptr<me::Partitioner> p_;
};

py::dict status_dict(const me::PartitionStatus& st) {
  py::list members;
  for (const auto& m : st.members) {
    py::dict d;
    d["uuid"] = m.report.uuid;
    d["host"] = m.report.host;
    d["pid"] = m.report.pid;
    d["live"] = m.live;
    d["running"] = m.report.running;
    d["expires"] = m.report.expire_ms ? datetime_from_ms(*m.report.expire_ms) : py::none();
    d["owned"] = m.owned;
    d["assigned"] = m.assigned;
    members.append(d);
  }
  py::list parts;
  for (const auto& o : st.owners) {
    py::dict d;
    d["partition"] = o.partition;
    d["key"] = o.key;
    d["owner"] = o.owner ? py::cast(*o.owner) : py::none();
    d["host"] = o.owner ? py::cast(o.host) : py::none();
    d["pid"] = o.owner ? py::cast(o.pid) : py::none();
    d["token"] = o.token;
    d["expires"] = o.expire_ms ? datetime_from_ms(*o.expire_ms) : py::none();
    d["assigned"] = o.assigned ? py::cast(*o.assigned) : py::none();
    d["conflict"] = o.conflict.empty() ? py::none() : py::cast(o.conflict);
    parts.append(d);
  }
  py::dict out;
  out["group"] = st.group;
  out["partitions"] = st.partitions;
  out["timestamp"] = datetime_from_ms(st.server_now_ms);
  out["members"] = members;
  out["owners"] = parts;
  out["conflicts"] = py::cast(st.conflicts);
  out["settled"] = st.settled;
  return out;
}

}  // namespace

void bind_partitioner(py::module_& m) {
  py::class_<PyPartitioner>(m, "Partitioner")
      .def(py::init<std::shared_ptr<me::Storage>, std::string, std::int64_t, double,
                    std::optional<double>, py::object, py::object, std::string, std::string,
                    std::optional<me::Identity>>(),
           py::arg("storage"), py::arg("group"), py::arg("partitions"), py::arg("ttl"),
           py::arg("poll") = py::none(), py::arg("on_assigned") = py::none(),
           py::arg("on_revoked") = py::none(),
           py::arg("locks_collection") = me::PartitionerCollections::kLocks,
           py::arg("members_collection") = me::PartitionerCollections::kMembers,
           py::arg("identity") = py::none())
      .def("start", [](PyPartitioner& p) { nogil<void>([&] { p.get().start(); }); })
      .def("stop", [](PyPartitioner& p) { nogil<void>([&] { p.get().stop(); }); })
      .def("request_stop", [](PyPartitioner& p) { nogil<void>([&] { p.get().request_stop(); }); })
      .def("poll", [](PyPartitioner& p) { nogil<void>([&] { p.get().poll(); }); })
      .def("check_group", [](PyPartitioner& p) { nogil<void>([&] { p.get().check_group(); }); })
      .def("owned",
           [](PyPartitioner& p) {
             return nogil<std::map<std::int64_t, std::int64_t>>([&] { return p.get().owned(); });
           })
      .def(
          "token",
          [](PyPartitioner& p, std::int64_t partition) {
            return nogil<std::optional<std::int64_t>>([&] { return p.get().token(partition); });
          },
          py::arg("partition"))
      .def("assignment",
           [](PyPartitioner& p) {
             return nogil<std::vector<std::string>>([&] { return p.get().assignment(); });
           })
      .def("members",
           [](PyPartitioner& p) {
             return nogil<std::vector<std::string>>([&] { return p.get().members(); });
           })
      .def("status",
           [](PyPartitioner& p) {
             return status_dict(nogil<me::PartitionStatus>([&] { return p.get().status(); }));
           })
      .def_property_readonly(
          "running",
          [](PyPartitioner& p) { return nogil<bool>([&] { return p.get().running(); }); })
      .def_property_readonly("uuid", [](PyPartitioner& p) { return p.get().identity().uuid; })
      .def_property_readonly("poll_interval",
                             [](PyPartitioner& p) { return p.get().poll_ms() / 1000.0; })
      .def("_abandon", &PyPartitioner::abandon);
  m.def(
      "partition_status",
      [](std::shared_ptr<me::Storage> storage, const std::string& group,
         std::optional<std::int64_t> partitions, const std::string& locks_collection,
         const std::string& members_collection) {
        me::PartitionerCollections c;
        c.locks = locks_collection;
        c.members = members_collection;
        auto st = nogil<me::PartitionStatus>([&] {
          me::ServerClock sc(me::clock_or_storage_clock(nullptr, storage), *storage);
          return me::partition_status(*storage, c, group, partitions, sc.estimate_sampling());
        });
        return status_dict(st);
      },
      py::arg("storage"), py::arg("group"), py::arg("partitions") = py::none(),
      py::arg("locks_collection") = me::PartitionerCollections::kLocks,
      py::arg("members_collection") = me::PartitionerCollections::kMembers,
      "The assignment of a group as its documents show it (one read per partition).");
  m.def(
      "rendezvous_owner",
      [](const std::vector<std::string>& members, std::int64_t partition) {
        return me::rendezvous_owner(members, partition);
      },
      py::arg("members"), py::arg("partition"),
      "The member rendezvous hashing gives `partition` (None without members).");
  m.def(
      "rendezvous_score",
      [](const std::string& uuid, std::int64_t partition) {
        return me::rendezvous_score(uuid, partition);
      },
      py::arg("uuid"), py::arg("partition"));
}

}  // namespace mongoelector_py
