// GIL and interpreter-lifetime helpers shared by the extension's sources.
//
// Rules every native->Python entry follows (elector thread, storage calls, callbacks,
// logging):
//  * take the GIL only for the Python call itself, never while sleeping or waiting;
//  * never touch Python once the interpreter is finalizing: a thread that asks for the
//    GIL then is killed by CPython (pthread_exit) in the middle of our C++ frames.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <utility>

namespace mongoelector_py {

namespace py = pybind11;

// Safe to call without the GIL (reads one runtime field).
inline bool interpreter_finalizing() {
  if (!Py_IsInitialized()) return true;
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// A Python reference that may be dropped on any thread, with or without the GIL: the
// last owner takes the GIL to decref it, or leaks it when the interpreter is going away
// (decref'ing then would crash).
class SharedPyObject {
 public:
  SharedPyObject() = default;
  explicit SharedPyObject(py::object obj)
      : p_(new py::object(std::move(obj)), [](py::object* o) {
          if (interpreter_finalizing()) return;  // leak on purpose
          py::gil_scoped_acquire gil;
          delete o;
        }) {}

  // Caller holds the GIL.
  const py::object& get() const { return *p_; }
  explicit operator bool() const { return p_ && *p_ && !p_->is_none(); }

 private:
  std::shared_ptr<py::object> p_;
};

}  // namespace mongoelector_py
