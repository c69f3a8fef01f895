#include "testing_binding.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "storage/memory_storage.h"
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
      .def("jump_wall", [](PyManualClock& c, std::int64_t ms) { c.clock->jump_wall(ms); },
           py::arg("ms"))
      .def("attach", &PyManualClock::attach, py::arg("uri"),
           "Runs the memory:// backend `uri` on this clock (ValueError if it runs on another).");
}

}  // namespace mongoelector_py
