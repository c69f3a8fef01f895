#include "csot_scope.h"

#include <time.h>

#include <algorithm>
#include <cmath>

namespace mongoelector_py {

namespace {
// time.monotonic() on the platforms where it is CLOCK_MONOTONIC (check_direct verifies).
double monotonic_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

PyObject* attr_or_null(PyObject* obj, const char* name) {
  PyObject* a = PyObject_GetAttrString(obj, name);
  if (a == nullptr) PyErr_Clear();
  return a;
}
}  // namespace

CsotTimeout::CsotTimeout(double seconds) : seconds_(seconds) {
  seconds_obj_ = PyFloat_FromDouble(seconds);
  zero_ = PyFloat_FromDouble(0.0);
  if (seconds_obj_ == nullptr || zero_ == nullptr) throw py::error_already_set();
  py::module_ pymongo = py::module_::import("pymongo");
  timeout_fn_ = attr_or_null(pymongo.ptr(), "timeout");
  PyObject* csot = PyImport_ImportModule("pymongo._csot");
  if (csot == nullptr) {
    PyErr_Clear();
    return;
  }
  const char* names[3] = {"TIMEOUT", "DEADLINE", "RTT"};
  bool all = true;
  for (int i = 0; i < 3; ++i) {
    vars_[i] = attr_or_null(csot, names[i]);
    all = all && vars_[i] != nullptr && PyContextVar_CheckExact(vars_[i]);
  }
  fast_ = all && check_direct(csot);
  Py_DECREF(csot);
}

CsotTimeout::~CsotTimeout() {
  // Python objects are released only while the interpreter lives (GIL held by the owner).
  if (Py_IsInitialized() == 0) return;
  Py_XDECREF(seconds_obj_);
  Py_XDECREF(zero_);
  for (PyObject* v : vars_) Py_XDECREF(v);
  Py_XDECREF(timeout_fn_);
}

// Enters a direct scope and asks pymongo what it sees: the timeout we set, and a
// remaining time within this scope's budget. Any other answer keeps pymongo.timeout().
bool CsotTimeout::check_direct(PyObject* csot) {
  fast_ = true;
  bool ok = false;
  {
    Scope scope(this);
    PyObject* t = PyObject_CallMethod(csot, "get_timeout", nullptr);
    PyObject* r = PyObject_CallMethod(csot, "remaining", nullptr);
    if (t != nullptr && r != nullptr && PyFloat_Check(t) && PyFloat_Check(r)) {
      const double got = PyFloat_AS_DOUBLE(r);
      ok = PyFloat_AS_DOUBLE(t) == seconds_ && got <= seconds_ && got > seconds_ - 0.5;
    }
    Py_XDECREF(t);
    Py_XDECREF(r);
    if (PyErr_Occurred()) PyErr_Clear();
  }
  fast_ = false;
  return ok;
}

CsotTimeout::Scope::Scope(const CsotTimeout* t) : t_(t) {
  if (t == nullptr) return;
  if (!t->fast_) {
    if (t->timeout_fn_ == nullptr) return;
    cm_ = PyObject_CallOneArg(t->timeout_fn_, t->seconds_obj_);
    if (cm_ == nullptr) throw py::error_already_set();
    PyObject* r = PyObject_CallMethod(cm_, "__enter__", nullptr);
    if (r == nullptr) {
      Py_CLEAR(cm_);
      throw py::error_already_set();
    }
    Py_DECREF(r);
    return;
  }
  // As pymongo's _TimeoutContext.__enter__: an inner scope never extends an outer
  // deadline.
  PyObject* outer = nullptr;
  if (PyContextVar_Get(t->vars_[1], nullptr, &outer) < 0) throw py::error_already_set();
  double deadline = monotonic_s() + t->seconds_;
  if (outer != nullptr) {
    if (PyFloat_Check(outer)) deadline = std::min(deadline, PyFloat_AS_DOUBLE(outer));
    Py_DECREF(outer);
  }
  PyObject* deadline_obj = PyFloat_FromDouble(deadline);
  if (deadline_obj == nullptr) throw py::error_already_set();
  PyObject* values[3] = {t->seconds_obj_, deadline_obj, t->zero_};
  for (int i = 0; i < 3; ++i) {
    tokens_[i] = PyContextVar_Set(t->vars_[i], values[i]);
    if (tokens_[i] == nullptr) {
      Py_DECREF(deadline_obj);
      py::error_already_set e;  // fetched before the variables set so far are reset
      reset();
      throw e;
    }
  }
  Py_DECREF(deadline_obj);
}

CsotTimeout::Scope::~Scope() { reset(); }

void CsotTimeout::Scope::reset() {
  if (cm_ != nullptr) {
    PyObject* r = PyObject_CallMethod(cm_, "__exit__", "OOO", Py_None, Py_None, Py_None);
    if (r == nullptr)
      PyErr_WriteUnraisable(cm_);
    else
      Py_DECREF(r);
    Py_CLEAR(cm_);
    return;
  }
  for (int i = 2; i >= 0; --i) {
    if (tokens_[i] == nullptr) continue;
    if (PyContextVar_Reset(t_->vars_[i], tokens_[i]) < 0) PyErr_WriteUnraisable(t_->vars_[i]);
    Py_DECREF(tokens_[i]);
    tokens_[i] = nullptr;
  }
}

}  // namespace mongoelector_py
