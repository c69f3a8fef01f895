// Conversions between core's Value/Document and Python objects. All functions need the
// GIL. Datetimes are timezone-aware UTC on the way out (as the original returns them);
// naive datetimes coming in are read as UTC (pymongo's default decoding).
#pragma once

#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <optional>

#include "storage/commands.h"
#include "value.h"

namespace mongoelector_py {

namespace py = pybind11;

// Seconds (Python float options) -> whole milliseconds, rounded.
inline std::int64_t ms_from_seconds(double s) { return std::llround(s * 1000.0); }

py::object datetime_from_ms(std::int64_t ms);
// datetime (aware or naive UTC) or bson DatetimeMS -> ms since the epoch; nullopt for
// anything else.
std::optional<std::int64_t> ms_from_datetime(py::handle obj);
py::object utcnow();

py::object to_py(const mongoelector::Value& v);
py::dict to_py(const mongoelector::Document& doc);
// A command's filter/update tree (storage/commands.h): documents become dicts, arrays
// lists. Cheap on purpose (every storage call encodes one or two): field names are
// interned Python strings made once, values go through the C API.
py::object to_py(const mongoelector::commands::Node& node);

// Values of types core cannot hold (ObjectId, sub-documents, ...) give nullopt; the
// document conversion skips such fields, exactly as the libmongoc backend does.
std::optional<mongoelector::Value> value_from_py(py::handle obj);
mongoelector::Document doc_from_py(py::handle mapping);

}  // namespace mongoelector_py
