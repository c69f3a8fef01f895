// Binds the core's storage URI parser (core/storage/uri.h) into _native: the Python
// package reads URIs with it instead of a parser of its own.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace mongoelector_py {
void bind_uri(py::module_& m);
}  // namespace mongoelector_py
