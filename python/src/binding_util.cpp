#include "binding_util.h"

#include <string>

#include "log.h"
#include "pymongo_storage.h"

namespace mongoelector_py {

namespace {

// ---------------------------------------------------------------- errors ----

py::object& errors_module() {
  static py::object* m = new py::object(py::module_::import("mongoelector.errors"));
  return *m;
}

void set_error(const char* cls, const std::string& msg) {
  py::object type = errors_module().attr(cls);
  PyErr_SetObject(type.ptr(), py::str(msg).ptr());
}

}  // namespace

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const me::InvalidArgument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const me::LockExists& e) {
    set_error("LockExists", e.what());
  } catch (const me::AcquireTimeout& e) {
    set_error("AcquireTimeout", e.what());
  } catch (const me::TimeOffsetError& e) {
    // The message is built where the Python path (_verifytime) builds it, so both read
    // the same.
    py::object exc = errors_module().attr("_time_offset_error")(e.offset_s());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (const me::Cancelled& e) {
    PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
  } catch (const me::UnsafeServer& e) {
    set_error("UnsafeServerError", e.what());
  } catch (const me::LockLost& e) {
    set_error("LeaseLost", e.what());
  } catch (const me::StorageUnavailable& e) {
    set_error("StorageUnavailable", e.what());
  } catch (const me::StorageError& e) {
    py::object type = errors_module().attr("StorageError");
    py::object exc = type(e.what(), e.code());
    PyErr_SetObject(type.ptr(), exc.ptr());
  }
}

bool allow_unbounded(const std::shared_ptr<me::Storage>& storage) {
  if (storage->call_bound_ms() > 0) return false;
  if (dynamic_cast<PyMongoStorage*>(storage.get()) == nullptr) return false;
  me::log(me::LogLevel::Warning,
          "calls through this Database object cannot be time-bounded (not pymongo >= 4.2 or "
          "mongomock): a hung call could outlive a lease");
  return true;
}

std::function<void()> on_lost_function(py::object on_lost, const char* what) {
  if (on_lost.is_none()) return {};
  SharedPyObject cb(std::move(on_lost));
  return [cb, what] {
    if (interpreter_finalizing()) return;
    py::gil_scoped_acquire gil;
    if (interpreter_finalizing()) return;
    try {
      cb.get()();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(what);
    }
  };
}

me::KeepAliveOptions keep_alive_options(bool blocking, std::optional<double> timeout, double step,
                                        py::object on_lost, const char* what,
                                        const SignalCancel& cancel) {
  me::KeepAliveOptions o;
  o.blocking = blocking;
  o.timeout_s = timeout;
  o.step_s = step;
  if (blocking) o.cancel = cancel.fn();  // Ctrl-C ends the wait
  o.on_lost = on_lost_function(std::move(on_lost), what);
  return o;
}

}  // namespace mongoelector_py
