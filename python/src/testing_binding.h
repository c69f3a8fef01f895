// Binds the testing kit's ManualClock (core/testing/manual_clock.h) into _native.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace mongoelector_py {
void bind_testing(py::module_& m);
}  // namespace mongoelector_py
