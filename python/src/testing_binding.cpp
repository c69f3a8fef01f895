#include "testing_binding.h"

#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/stl.h>

#include "storage/memory_storage.h"
#include "storage/storage.h"
#include "testing/manual_clock.h"

namespace me = mongoelector;

namespace mongoelector_py {

namespace {
// A ManualClock and the memory:// backends attached to it: each lives as long as the
// Python FakeClock does (or longer, while lockers use it), so a name keeps its clock.
struct PyManualClock {
  std::shared_ptr<me::ManualClock> clock;
  std::mutex mu;
  std::vector<std::shared_ptr<me::MemoryClient>> attached;

  PyManualClock(std::int64_t wall_start_ms, std::int64_t settle_timeout_ms)
      : clock(std::make_shared<me::ManualClock>(wall_start_ms, settle_timeout_ms)) {}

  void attach(const std::string& uri) {
    auto client = me::MemoryClient::open(uri, clock);
    std::lock_guard<std::mutex> g(mu);
    attached.push_back(std::move(client));
  }
};
}  // namespace

void bind_testing(py::module_& m) {
  py::class_<PyManualClock>(m, "ManualClock")
      .def(py::init<std::int64_t, std::int64_t>(), py::arg("wall_start_ms"),
           py::arg("settle_timeout_ms"))
      // The threads this waits for may need the GIL (callbacks): released.
      .def(
          "advance",
          [](PyManualClock& c, std::int64_t ms) {
            py::gil_scoped_release nogil;
            return c.clock->advance(ms);
          },
          py::arg("ms"))
      .def("settle",
           [](PyManualClock& c) {
             py::gil_scoped_release nogil;
             return c.clock->settle();
           })
      .def("waiters", [](PyManualClock& c) { return c.clock->waiters(); })
      .def(
          "block_until_waiters",
          [](PyManualClock& c, std::size_t n, std::int64_t timeout_ms) {
            py::gil_scoped_release nogil;
            return c.clock->block_until_waiters(n, timeout_ms);
          },
          py::arg("n"), py::arg("timeout_ms"))
      .def("mono_ms", [](PyManualClock& c) { return c.clock->mono_ms(); })
      .def("wall_ms", [](PyManualClock& c) { return c.clock->wall_ms(); })
      .def(
          "jump_wall", [](PyManualClock& c, std::int64_t ms) { c.clock->jump_wall(ms); },
          py::arg("ms"))
      .def("attach", &PyManualClock::attach, py::arg("uri"),
           "Runs the memory:// backend `uri` on this clock (ValueError if it runs on another).");

  // A storage's renewal operations, called directly (tests of the storages themselves,
  // e.g. tests/python/test_storage_renewal.py). Times are server-time ms.
  m.def(
      "_storage_renew",
      [](me::Storage& s, const std::string& coll, const std::string& key, const std::string& uuid,
         std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms, bool exact) {
        py::gil_scoped_release nogil;
        return exact ? s.set_expiry(coll, key, uuid, fence, now_ms, expire_ms, 0)
                     : s.renew(coll, key, uuid, fence, now_ms, expire_ms);
      },
      py::arg("storage"), py::arg("collection"), py::arg("key"), py::arg("uuid"), py::arg("fence"),
      py::arg("now_ms"), py::arg("expire_ms"), py::arg("exact") = false,
      "Storage::renew, or with exact=True Storage::set_expiry.");
  m.def(
      "_storage_renew_many",
      [](me::Storage& s, const std::string& coll,
         const std::vector<std::tuple<std::string, std::string, std::int64_t, std::int64_t>>& rs,
         std::int64_t now_ms) {
        std::vector<me::RenewRequest> requests;
        for (const auto& [key, uuid, fence, expire] : rs)
          requests.push_back(me::RenewRequest{key, uuid, fence, expire});
        py::gil_scoped_release nogil;
        return s.renew_many(coll, requests, now_ms);
      },
      py::arg("storage"), py::arg("collection"), py::arg("requests"), py::arg("now_ms"));
  m.def(
      "_storage_renew_semaphore",
      [](me::Storage& s, const std::string& coll, const std::string& key, std::int64_t slot,
         const std::string& uuid, std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) {
        py::gil_scoped_release nogil;
        return s.renew_semaphore(coll, key, slot, uuid, fence, now_ms, expire_ms);
      },
      py::arg("storage"), py::arg("collection"), py::arg("key"), py::arg("slot"), py::arg("uuid"),
      py::arg("fence"), py::arg("now_ms"), py::arg("expire_ms"));
  m.def(
      "_storage_renew_semaphores",
      [](me::Storage& s, const std::string& coll,
         const std::vector<
             std::tuple<std::string, std::int64_t, std::string, std::int64_t, std::int64_t>>& rs,
         std::int64_t now_ms) {
        std::vector<me::SemaphoreRenewRequest> requests;
        for (const auto& [key, slot, uuid, fence, expire] : rs)
          requests.push_back(me::SemaphoreRenewRequest{key, slot, uuid, fence, expire});
        py::gil_scoped_release nogil;
        return s.renew_semaphores(coll, requests, now_ms);
      },
      py::arg("storage"), py::arg("collection"), py::arg("requests"), py::arg("now_ms"),
      "Storage::renew_semaphores; requests are (key, slot, uuid, fence, expire_ms).");
}

}  // namespace mongoelector_py
