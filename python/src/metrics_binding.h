// Binds the core's metrics snapshot into _native.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace mongoelector_py {
void bind_metrics(py::module_& m);
}  // namespace mongoelector_py
