#include "convert.h"

#include <datetime.h>

#include <string>
#include <unordered_map>

namespace mongoelector_py {

namespace me = mongoelector;

namespace {
// Python objects cached for the life of the process. Deliberately leaked: destroying
// them at static-destruction time, after the interpreter is gone, would crash.
struct DateTypes {
  py::object datetime_type;
  py::object timedelta;
  py::object utc;
  py::object epoch;
  py::object one_ms;
  py::object datetime_ms_type;  // bson.datetime_ms.DatetimeMS, or None
};

DateTypes& types() {
  static DateTypes* t = [] {
    auto* d = new DateTypes;
    py::module_ dt = py::module_::import("datetime");
    d->datetime_type = dt.attr("datetime");
    d->timedelta = dt.attr("timedelta");
    d->utc = dt.attr("timezone").attr("utc");
    d->epoch = d->datetime_type(1970, 1, 1, py::arg("tzinfo") = d->utc);
    d->one_ms = d->timedelta(py::arg("milliseconds") = 1);
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == nullptr) throw py::error_already_set();
    d->datetime_ms_type = py::none();
    try {
      d->datetime_ms_type = py::module_::import("bson.datetime_ms").attr("DatetimeMS");
    } catch (py::error_already_set&) {
      // pymongo < 4.3 has no DatetimeMS: nothing to convert from.
    }
    return d;
  }();
  return *t;
}
}  // namespace

namespace {
// Days since 1970-01-01 of a proleptic Gregorian date, and back (the algorithms of Howard
// Hinnant's "chrono-compatible low-level date algorithms"): integer arithmetic instead
// of timedelta objects, which cost more than the rest of a conversion.
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2);
}
}  // namespace

py::object datetime_from_ms(std::int64_t ms) {
  DateTypes& t = types();
  constexpr std::int64_t kDay = 86400000;
  std::int64_t days = ms / kDay, rest = ms % kDay;
  if (rest < 0) {
    rest += kDay;
    days -= 1;
  }
  std::int64_t year = 0;
  unsigned month = 0, day = 0;
  civil_from_days(days, year, month, day);
  if (year >= 1 && year <= 9999) {  // datetime's range: built from its fields directly
    PyObject* dt = PyDateTimeAPI->DateTime_FromDateAndTime(
        static_cast<int>(year), static_cast<int>(month), static_cast<int>(day),
        static_cast<int>(rest / 3600000), static_cast<int>(rest / 60000 % 60),
        static_cast<int>(rest / 1000 % 60), static_cast<int>(rest % 1000) * 1000, t.utc.ptr(),
        PyDateTimeAPI->DateTimeType);
    if (dt == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(dt);
  }
  // Out of datetime's range: epoch + timedelta raises what timedelta(milliseconds=ms)
  // would.
  if (days > 999999999 || days < -999999999) {  // as timedelta(milliseconds=ms) would
    PyErr_SetString(PyExc_OverflowError, "date value out of range");
    throw py::error_already_set();
  }
  py::object delta = py::reinterpret_steal<py::object>(PyDelta_FromDSU(
      static_cast<int>(days), static_cast<int>(rest / 1000), static_cast<int>(rest % 1000) * 1000));
  if (!delta) throw py::error_already_set();
  return t.epoch + delta;
}

py::object utcnow() {
  DateTypes& t = types();
  return t.datetime_type.attr("now")(t.utc);
}

std::optional<std::int64_t> ms_from_datetime(py::handle obj) {
  DateTypes& t = types();
  if (PyDateTime_CheckExact(obj.ptr())) {
    PyObject* tz = PyDateTime_DATE_GET_TZINFO(obj.ptr());
    if (tz == Py_None || tz == t.utc.ptr()) {  // naive (UTC, as BSON) or datetime's UTC
      PyObject* o = obj.ptr();
      const std::int64_t days =
          days_from_civil(PyDateTime_GET_YEAR(o), static_cast<unsigned>(PyDateTime_GET_MONTH(o)),
                          static_cast<unsigned>(PyDateTime_GET_DAY(o)));
      return days * 86400000 + PyDateTime_DATE_GET_HOUR(o) * std::int64_t{3600000} +
             PyDateTime_DATE_GET_MINUTE(o) * std::int64_t{60000} +
             PyDateTime_DATE_GET_SECOND(o) * std::int64_t{1000} +
             PyDateTime_DATE_GET_MICROSECOND(o) / 1000;
    }
  }
  if (py::isinstance(obj, t.datetime_type)) {  // another tzinfo, or a subclass
    py::object dt = py::reinterpret_borrow<py::object>(obj);
    if (dt.attr("tzinfo").is_none()) dt = dt.attr("replace")(py::arg("tzinfo") = t.utc);
    // Floor division, as BSON encoding truncates to milliseconds.
    return (dt - t.epoch).attr("__floordiv__")(t.one_ms).cast<std::int64_t>();
  }
  if (!t.datetime_ms_type.is_none() && py::isinstance(obj, t.datetime_ms_type))
    return py::int_(py::reinterpret_borrow<py::object>(obj)).cast<std::int64_t>();
  return std::nullopt;
}

py::object to_py(const me::Value& v) {
  struct Visitor {
    py::object operator()(const me::Null&) const { return py::none(); }
    py::object operator()(bool b) const { return py::bool_(b); }
    py::object operator()(std::int64_t i) const { return py::int_(i); }
    py::object operator()(double d) const { return py::float_(d); }
    py::object operator()(const std::string& s) const { return py::str(s); }
    py::object operator()(const me::DateTime& d) const { return datetime_from_ms(d.ms); }
  };
  return std::visit(Visitor{}, v);
}

namespace {
PyObject* field_name(const std::string& name);
}  // namespace

py::dict to_py(const me::Document& doc) {
  py::dict d;
  for (const auto& f : doc.fields()) {
    py::object key = py::reinterpret_steal<py::object>(field_name(f.first));
    py::object value = to_py(f.second);
    if (PyDict_SetItem(d.ptr(), key.ptr(), value.ptr()) != 0) throw py::error_already_set();
  }
  return d;
}

namespace {
// Interned field names by C++ name. Bounded: field names are the protocol's plus slot
// paths ("slots.<i>.ts_expire"), so the table stays small; beyond the bound names are
// made per call. Leaked like the types above.
PyObject* field_name(const std::string& name) {
  static auto* names = new std::unordered_map<std::string, PyObject*>();
  auto it = names->find(name);
  if (it != names->end()) {
    Py_INCREF(it->second);
    return it->second;
  }
  PyObject* s = PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), nullptr);
  if (s == nullptr) throw py::error_already_set();
  PyUnicode_InternInPlace(&s);
  if (names->size() < 4096) {
    Py_INCREF(s);
    names->emplace(name, s);
  }
  return s;
}

py::object scalar_to_py(const me::Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    PyObject* o = PyUnicode_DecodeUTF8(s->data(), static_cast<Py_ssize_t>(s->size()), nullptr);
    if (o == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(o);
  }
  if (const auto* i = std::get_if<std::int64_t>(&v)) {
    return py::reinterpret_steal<py::object>(PyLong_FromLongLong(*i));
  }
  return to_py(v);
}
}  // namespace

py::object to_py(const me::commands::Node& node) {
  using Kind = me::commands::Node::Kind;
  if (node.kind == Kind::scalar) return scalar_to_py(node.value);
  if (node.kind == Kind::array) {
    py::list list(node.children.size());
    for (std::size_t i = 0; i < node.children.size(); ++i)
      PyList_SET_ITEM(list.ptr(), static_cast<Py_ssize_t>(i),
                      to_py(node.children[i]).release().ptr());
    return std::move(list);
  }
  py::dict d;
  for (const me::commands::Node& c : node.children) {
    py::object key = py::reinterpret_steal<py::object>(field_name(c.name));
    py::object value = to_py(c);
    if (PyDict_SetItem(d.ptr(), key.ptr(), value.ptr()) != 0) throw py::error_already_set();
  }
  return std::move(d);
}

namespace {
std::string utf8_of(PyObject* str) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &size);
  if (data == nullptr) throw py::error_already_set();
  return std::string(data, static_cast<std::size_t>(size));
}
}  // namespace

std::optional<me::Value> value_from_py(py::handle obj) {
  // The exact types pymongo decodes to first, without pybind11's casters.
  PyObject* o = obj.ptr();
  if (PyUnicode_CheckExact(o)) return me::Value(utf8_of(o));
  if (PyBool_Check(o)) return me::Value(o == Py_True);
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) return std::nullopt;  // beyond int64: BSON cannot hold it either
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return me::Value(static_cast<std::int64_t>(v));
  }
  if (PyFloat_CheckExact(o)) return me::Value(PyFloat_AS_DOUBLE(o));
  if (obj.is_none()) return me::Value(me::Null{});
  if (py::isinstance<py::bool_>(obj)) return me::Value(obj.cast<bool>());
  if (py::isinstance<py::int_>(obj)) {
    try {
      return me::Value(obj.cast<std::int64_t>());
    } catch (py::cast_error&) {
      return std::nullopt;  // beyond int64: BSON cannot hold it either
    }
  }
  if (py::isinstance<py::float_>(obj)) return me::Value(obj.cast<double>());
  if (py::isinstance<py::str>(obj)) return me::Value(obj.cast<std::string>());
  if (auto ms = ms_from_datetime(obj)) return me::Value(me::DateTime{*ms});
  return std::nullopt;
}

me::Document doc_from_py(py::handle mapping) {
  me::Document doc;
  if (PyDict_CheckExact(mapping.ptr())) {  // what pymongo returns by default
    PyObject *key = nullptr, *value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(mapping.ptr(), &pos, &key, &value)) {
      if (!PyUnicode_Check(key)) continue;
      // value_from_py may run Python code (a datetime subclass): hold the pair.
      py::object k = py::reinterpret_borrow<py::object>(key);
      py::object v = py::reinterpret_borrow<py::object>(value);
      if (auto converted = value_from_py(v)) doc.set(utf8_of(k.ptr()), std::move(*converted));
    }
    return doc;
  }
  for (py::handle item : mapping.attr("items")()) {
    py::tuple kv = py::reinterpret_borrow<py::tuple>(item);
    if (!py::isinstance<py::str>(kv[0])) continue;
    if (auto v = value_from_py(kv[1])) doc.set(kv[0].cast<std::string>(), *v);
  }
  return doc;
}

}  // namespace mongoelector_py
