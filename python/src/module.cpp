// mongoelector._native: the pybind11 bindings of core/ (private; the public API is the
// pure-Python package around it).
//
// GIL discipline: every binding that enters core/ releases the GIL first. The core
// then runs without it; only PyMongoStorage, callbacks and the log bridge take it back,
// each for its own Python call. So no core mutex is ever waited for while holding the
// GIL, and no thread holding a core mutex ever waits for the GIL for long.
//
// Each core type is bound in its own file (<type>_binding.cpp, declared in bindings.h);
// helpers they share are in binding_util.h. This file assembles them, in the order in
// which types refer to each other, and binds the process-wide functions.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "binding_util.h"
#include "bindings.h"
#include "convert.h"
#include "log_bridge.h"
#include "metrics_binding.h"
#include "observer_binding.h"
#include "storage/client.h"
#include "storage/memory_storage.h"
#include "testing_binding.h"
#include "uri_binding.h"

namespace py = pybind11;
namespace me = mongoelector;
using namespace mongoelector_py;

PYBIND11_MODULE(_native, m) {
  m.doc() = "Native core of mongoelector (private: use the mongoelector package).";
  py::register_exception_translator(translate);
  install_log_bridge();
  bind_metrics(m);
  bind_testing(m);
  bind_observer(m);
  bind_uri(m);
  bind_storage(m);
  bind_acquire_run(m);
  bind_locker(m);
  bind_lease(m);
  bind_elector(m);
  bind_semaphore(m);
  bind_rwlock(m);
  bind_partitioner(m);

  m.def(
      "op_timeout_for_ttl",
      [](double ttl_s) { return static_cast<double>(me::op_timeout_ms_for_ttl(ttl_s)) / 1000.0; },
      "The default per-call timeout of a locker or elector with this ttl (seconds): ttl/10 "
      "in [0.1 s, 5 s], as in every binding.");
  m.def(
      "setup_timeout_for",
      [](double op_timeout_s, double selection_timeout_s) {
        return static_cast<double>(me::setup_timeout_ms(ms_from_seconds(op_timeout_s),
                                                        ms_from_seconds(selection_timeout_s))) /
               1000.0;
      },
      py::arg("op_timeout_s"), py::arg("selection_timeout_s") = 0.0,
      "The bound of a storage's one-time setup calls (index creation, asking what the "
      "server is) for this per-call timeout (seconds): the larger of it and the lesser of "
      "5 s and the client's server-selection timeout (0: none given).");
  // mongoelector.testing: the in-process memory:// backend's test levers.
  m.def(
      "memory_expire",
      [](const std::string& uri, const std::string& collection, const std::string& key) {
        auto client = me::MemoryClient::open(uri);
        return client->storage()->expire_lock(collection, key);
      },
      py::arg("uri"), py::arg("collection"), py::arg("key"));
  m.def(
      "memory_set_unavailable",
      [](const std::string& uri, bool down) {
        me::MemoryClient::open(uri)->storage()->set_unavailable(down);
      },
      py::arg("uri"), py::arg("down"));
  m.def("flush_log", &flush_log_bridge, "Wait until queued core log messages reached logging.");
  m.def("shutdown_log", &shutdown_log_bridge, "Flush and stop the log bridge (interpreter exit).");
  m.def("finalizing", &interpreter_finalizing);
  m.def(
      "_spin_with_gil",
      [](double seconds) {
        // Test helper: a long C call that keeps the GIL, like a heavy C extension.
        auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds));
        volatile std::uint64_t n = 0;
        while (std::chrono::steady_clock::now() < end) n = n + 1;
        return static_cast<std::uint64_t>(n);
      },
      py::arg("seconds"), "Busy-wait for `seconds` holding the GIL (tests only).");
}
