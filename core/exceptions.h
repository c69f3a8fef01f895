// Exceptions thrown by core/. Bindings translate them: the C API into status codes,
// Python into LockExists / AcquireTimeout / TimeOffsetError / ValueError.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mongoelector {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad argument from the caller (empty key, ttl <= 0, ...).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A non-blocking acquire found the lock held: "<key> owned by <host> pid <pid>".
class LockExists : public Error {
 public:
  using Error::Error;
};

// A blocking acquire ran past its timeout.
class AcquireTimeout : public Error {
 public:
  using Error::Error;
};

// A write that needed this node's hold landed after the hold had ended at the server (it
// had expired, or another holder had taken the lock): release_min_hold could not keep the
// lock taken until its minimum hold. The hold is gone; nothing is left to retry.
class LockLost : public Error {
 public:
  using Error::Error;
};

// The host clock differs from the server's by more than maxoffset.
class TimeOffsetError : public Error {
 public:
  TimeOffsetError(const std::string& msg, double offset_s) : Error(msg), offset_s_(offset_s) {}
  double offset_s() const { return offset_s_; }

 private:
  double offset_s_;
};

// A blocking wait was cancelled by the caller (Ctrl-C in Python, context in Go).
class Cancelled : public Error {
 public:
  using Error::Error;
};

// What the backend said about a failure beyond its message: a MongoDB server error's
// code, codeName and errorLabels, or an SQLite extended result code (code only).
struct ServerErrorDetail {
  int code = 0;  // 0: none (no answer, or a failure of our own)
  std::string code_name;
  std::vector<std::string> labels;
};

// Base of the two storage failures below: carries the backend's detail, if any.
class StorageFailure : public Error {
 public:
  StorageFailure(const std::string& msg, ServerErrorDetail detail)
      : Error(msg), detail_(std::move(detail)) {}
  int code() const { return detail_.code; }
  const ServerErrorDetail& detail() const { return detail_; }

 private:
  ServerErrorDetail detail_;
};

// The database could not be reached or did not answer in time (also server answers
// that mean "not now": not primary, shutting down, ...; their code is kept).
class StorageUnavailable : public StorageFailure {
 public:
  explicit StorageUnavailable(const std::string& msg, ServerErrorDetail detail = {})
      : StorageFailure(msg, std::move(detail)) {}
};

// The database answered with an error we do not handle, or with a malformed document.
class StorageError : public StorageFailure {
 public:
  StorageError(const std::string& msg, int code = 0)
      : StorageFailure(msg, ServerErrorDetail{code, {}, {}}) {}
  StorageError(const std::string& msg, ServerErrorDetail detail)
      : StorageFailure(msg, std::move(detail)) {}
};

// The server cannot run the protocol safely (e.g. non-atomic findAndModify) and the
// user did not opt in.
class UnsafeServer : public Error {
 public:
  using Error::Error;
};

}  // namespace mongoelector
