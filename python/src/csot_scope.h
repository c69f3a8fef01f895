// pymongo's client-side operation timeout (CSOT), entered around ONE storage call so that
// a hung call cannot outlive the lease: it bounds server selection, connection checkout
// and the round trip (pymongo >= 4.2).
//
// Entering `pymongo.timeout(s)` costs four Python frames per call; on the drop-in path
// that is a measurable share of an acquire. pymongo's scope is three context variables
// (pymongo/_csot.py: TIMEOUT, DEADLINE = min(outer, now + s), RTT = 0), so CsotTimeout
// sets them through the C API instead. It does so only after checking, once, that the
// installed pymongo reads a scope set that way as its own (`_csot.get_timeout()` and
// `_csot.remaining()`); otherwise, or without those variables, it enters
// `pymongo.timeout(s)` as before. Either way every call is bounded the same.
#pragma once

#include <pybind11/pybind11.h>

namespace mongoelector_py {

namespace py = pybind11;

class CsotTimeout {
 public:
  // Reads pymongo's timeout API (GIL held). `seconds` > 0: the budget of each call.
  explicit CsotTimeout(double seconds);
  ~CsotTimeout();
  CsotTimeout(const CsotTimeout&) = delete;
  CsotTimeout& operator=(const CsotTimeout&) = delete;

  // False when pymongo has no client-side timeout (before 4.2): calls are unbounded.
  bool available() const { return fast_ || timeout_fn_ != nullptr; }
  // Whether scopes set pymongo's context variables directly (for tests and logs).
  bool direct() const { return fast_; }

  // One call's scope (GIL held for its whole life).
  class Scope {
   public:
    explicit Scope(const CsotTimeout* t);  // null: no scope
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    void reset();  // leaves the scope (what the destructor does)
    const CsotTimeout* t_ = nullptr;
    PyObject* tokens_[3] = {nullptr, nullptr, nullptr};  // direct: TIMEOUT, DEADLINE, RTT
    PyObject* cm_ = nullptr;                             // fallback: pymongo.timeout(s)
  };

 private:
  bool check_direct(PyObject* csot_module);

  double seconds_;
  PyObject* seconds_obj_ = nullptr;                  // float(seconds)
  PyObject* zero_ = nullptr;                         // 0.0, RTT's value in a fresh scope
  PyObject* vars_[3] = {nullptr, nullptr, nullptr};  // TIMEOUT, DEADLINE, RTT
  PyObject* timeout_fn_ = nullptr;                   // pymongo.timeout
  bool fast_ = false;
};

}  // namespace mongoelector_py
