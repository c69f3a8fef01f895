// Binds core/observe/leader_observer.h into _native (mongoelector.observe on top).
#pragma once

#include <pybind11/pybind11.h>

namespace mongoelector_py {

namespace py = pybind11;

void bind_observer(py::module_& m);

}  // namespace mongoelector_py
