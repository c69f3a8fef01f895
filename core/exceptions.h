// Exceptions thrown by core/. Bindings translate them: the C API into status codes,
// Python into LockExists / AcquireTimeout / TimeOffsetError / ValueError.
#pragma once

#include <stdexcept>
#include <string>

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

// The database could not be reached or did not answer in time.
class StorageUnavailable : public Error {
 public:
  using Error::Error;
};

// The database answered with an error we do not handle, or with a malformed document.
class StorageError : public Error {
 public:
  StorageError(const std::string& msg, int code = 0) : Error(msg), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// The server cannot run the protocol safely (e.g. non-atomic findAndModify) and the
// user did not opt in.
class UnsafeServer : public Error {
 public:
  using Error::Error;
};

}  // namespace mongoelector
