#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "binding_util.h"
#include "bindings.h"
#include "exceptions.h"
#include "hold/acquire_run.h"

namespace mongoelector_py {

namespace {

// A step as Python sees it: ("try", None), ("wait", seconds from now), ("acquired",
// token), ("cancelled", None); the other final steps raise what the blocking acquire
// raises (LockExists, AcquireTimeout, the claim's error).
py::tuple step_tuple(me::AcquireRun& run, const me::AcquireStep& s) {
  using Kind = me::AcquireStep::Kind;
  switch (s.kind) {
    case Kind::TryNow:
      return py::make_tuple("try", py::none());
    case Kind::Wait:
      return py::make_tuple(
          "wait",
          static_cast<double>(std::max<std::int64_t>(0, s.wake_mono - run.now_ms())) / 1000.0);
    case Kind::Acquired:
      return py::make_tuple("acquired", s.token);
    case Kind::Cancelled:
      return py::make_tuple("cancelled", py::none());
    default:
      run.result();  // throws
      return py::make_tuple("failed", py::none());
  }
}

}  // namespace

void bind_acquire_run(py::module_& m) {
  py::class_<me::AcquireRun, std::shared_ptr<me::AcquireRun>>(
      m, "AcquireRun",
      "The core's acquire loop as steps its caller drives (Locker.start_acquire, "
      "_Semaphore.start_acquire): next() says what to do now, attempt() makes one claim "
      "(a round trip, without the GIL), cancel() ends the run; a claim that lands after "
      "cancel() is released by its attempt, fenced.")
      .def("next", [](me::AcquireRun& r) { return step_tuple(r, r.next()); })
      .def("attempt",
           [](me::AcquireRun& r) {
             const me::AcquireStep s = nogil<me::AcquireStep>([&] { return r.attempt(); });
             return step_tuple(r, s);
           })
      .def("cancel", [](me::AcquireRun& r) { r.cancel(); })
      .def(
          "give_up", [](me::AcquireRun& r) { nogil<void>([&] { (void)r.give_up(); }); },
          "The caller stops waiting without the hold: ends the run (as cancel()) and "
          "undoes what its waiting wrote -- a fair waiter's queue entry, a waiting "
          "writer's mark -- once (round trips: on a thread). An attempt in flight does it "
          "as it ends, after its own writes.")
      .def(
          "abandon", [](me::AcquireRun& r) { return nogil<bool>([&] { return r.abandon(); }); },
          "The run acquired but its caller will not take the hold (cancelled before it "
          "resumed): releases it, fenced (round trips: on a thread). Whether it released.")
      .def(
          "begin_attempt",
          [](me::AcquireRun& r) -> py::object {
            const std::optional<me::AcquireStep> s = r.begin_attempt(/*round_trips=*/false);
            if (!s) return py::none();
            return step_tuple(r, *s);
          },
          "attempt() in parts, for a caller that claims itself: None when an attempt has "
          "begun (end_attempt or fail_attempt must follow); otherwise the step to act on, "
          "(\"try\", None) meaning that this attempt needs round trips: attempt() on a "
          "thread.")
      .def(
          "end_attempt",
          [](me::AcquireRun& r, std::optional<std::pair<std::int64_t, std::int64_t>> got,
             std::string held) {
            std::optional<me::Claimed> c;
            if (got) c = me::Claimed{got->first, got->second};
            const me::AcquireStep s =
                nogil<me::AcquireStep>([&] { return r.end_attempt(c, std::move(held)); });
            return step_tuple(r, s);
          },
          py::arg("got"), py::arg("held") = "",
          "The begun attempt took (token, fence), or None (held by another; `held` names "
          "the holder when not blocking). The step, as attempt()'s.")
      .def(
          "fail_attempt",
          [](me::AcquireRun& r, const std::string& error) {
            r.fail_attempt(std::make_exception_ptr(me::StorageError(error)));
          },
          py::arg("error"), "The begun attempt failed (or was cancelled): nothing is reported.");
}

}  // namespace mongoelector_py
