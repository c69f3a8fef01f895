// Helpers shared by the libFuzzer targets in tests/fuzz (see run.sh).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "clock.h"
#include "identity.h"
#include "log.h"
#include "mongoelector.h"
#include "utf8.h"
#include "value.h"

namespace fuzz {

// A property the target checks failed: crash so that libFuzzer records the input.
[[noreturn]] inline void fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz property violated: %s %s\n", what, detail.c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, detail)                \
  do {                                          \
    if (!(cond)) ::fuzz::fail(#cond, (detail)); \
  } while (0)

// The library's logging goes nowhere (libmongoc warnings, clock-jump warnings, ...).
inline void silence_logs() {
  static bool done = [] {
    mongoelector::set_log_sink([](const mongoelector::LogRecord&) {});
    return true;
  }();
  (void)done;
}

// A double that is often one of the values that break arithmetic.
inline double odd_double(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      return std::numeric_limits<double>::quiet_NaN();
    case 1:
      return std::numeric_limits<double>::infinity();
    case 2:
      return -std::numeric_limits<double>::infinity();
    case 3:
      return 0.0;
    case 4:
      return -0.0;
    case 5:
      return std::numeric_limits<double>::max();
    case 6:
      return std::numeric_limits<double>::lowest();
    case 7:
      return std::numeric_limits<double>::denorm_min();
    case 8:
      return 1e9;
    case 9:
      return 1e9 + 1;
    case 10:
      return 9.3e15;
    case 11:
      return static_cast<double>(p.ConsumeIntegral<std::int64_t>());
    case 12:
      return p.ConsumeFloatingPointInRange<double>(-1.0, 1.0);
    case 13:
      return p.ConsumeFloatingPointInRange<double>(0.0, 100.0);
    default:
      return p.ConsumeFloatingPoint<double>();
  }
}

// An int64 that is often an edge value.
inline std::int64_t odd_int64(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return std::numeric_limits<std::int64_t>::max();
    case 1:
      return std::numeric_limits<std::int64_t>::min();
    case 2:
      return 0;
    case 3:
      return -1;
    case 4:
      return std::int64_t{1} << 32;
    case 5:
      return (std::int64_t{1} << 62) + p.ConsumeIntegralInRange<std::int64_t>(-5, 5);
    case 6:
      return 1700000000000 + p.ConsumeIntegralInRange<std::int64_t>(-100000, 100000);
    default:
      return p.ConsumeIntegral<std::int64_t>();
  }
}

// A deterministic identity: Identity::generate() would resolve this host's FQDN.
inline mongoelector::Identity identity(const std::string& uuid,
                                       const std::string& host = "fuzzhost",
                                       std::int64_t pid = 4242) {
  return mongoelector::Identity{uuid, host, pid};
}

// ---- strict JSON (RFC 8259) checker for the library's JSON output ----------------------

class JsonChecker {
 public:
  explicit JsonChecker(const char* s) : s_(s), n_(std::strlen(s)) {}
  bool valid() {
    ws();
    if (!value(0)) return false;
    ws();
    return i_ == n_;
  }

 private:
  bool value(int depth) {
    if (depth > 64 || i_ >= n_) return false;
    switch (s_[i_]) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return lit("true");
      case 'f':
        return lit("false");
      case 'n':
        return lit("null");
      default:
        return number();
    }
  }
  bool object(int depth) {
    ++i_;
    ws();
    if (peek('}')) return ++i_, true;
    for (;;) {
      ws();
      if (!string()) return false;
      ws();
      if (!peek(':')) return false;
      ++i_;
      ws();
      if (!value(depth + 1)) return false;
      ws();
      if (peek('}')) return ++i_, true;
      if (!peek(',')) return false;
      ++i_;
    }
  }
  bool array(int depth) {
    ++i_;
    ws();
    if (peek(']')) return ++i_, true;
    for (;;) {
      ws();
      if (!value(depth + 1)) return false;
      ws();
      if (peek(']')) return ++i_, true;
      if (!peek(',')) return false;
      ++i_;
    }
  }
  bool string() {
    if (!peek('"')) return false;
    ++i_;
    while (i_ < n_) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= n_) return false;
        const char e = s_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k)
            if (i_ + k >= n_ || !std::isxdigit(static_cast<unsigned char>(s_[i_ + k])))
              return false;
          i_ += 5;
          continue;
        }
        if (!std::strchr("\"\\/bfnrt", e)) return false;
        ++i_;
        continue;
      }
      ++i_;
    }
    return false;
  }
  bool number() {
    const std::size_t start = i_;
    if (peek('-')) ++i_;
    if (peek('0')) {
      ++i_;
    } else {
      if (!digits()) return false;
    }
    if (peek('.')) {
      ++i_;
      if (!digits()) return false;
    }
    if (peek('e') || peek('E')) {
      ++i_;
      if (peek('+') || peek('-')) ++i_;
      if (!digits()) return false;
    }
    return i_ > start;
  }
  bool digits() {
    const std::size_t start = i_;
    while (i_ < n_ && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool lit(const char* w) {
    const std::size_t l = std::strlen(w);
    if (n_ - i_ < l || std::strncmp(s_ + i_, w, l) != 0) return false;
    i_ += l;
    return true;
  }
  bool peek(char c) const { return i_ < n_ && s_[i_] == c; }
  void ws() {
    while (i_ < n_ && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }

  const char* s_;
  std::size_t n_;
  std::size_t i_ = 0;
};

// JSON the library returned must be strict JSON and valid UTF-8.
inline void check_json(const char* json) {
  FUZZ_CHECK(json != nullptr, "");
  FUZZ_CHECK(mongoelector::is_valid_utf8(json), json);
  FUZZ_CHECK(JsonChecker(json).valid(), json);
}

// After a failed call: a known status, a NUL-terminated message.
inline void check_status(mongoelector_status st) {
  switch (st) {
    case MONGOELECTOR_OK:
    case MONGOELECTOR_ERR_INVALID_ARGUMENT:
    case MONGOELECTOR_ERR_LOCK_EXISTS:
    case MONGOELECTOR_ERR_TIMEOUT:
    case MONGOELECTOR_ERR_TIME_OFFSET:
    case MONGOELECTOR_ERR_CANCELLED:
    case MONGOELECTOR_ERR_UNAVAILABLE:
    case MONGOELECTOR_ERR_SERVER:
    case MONGOELECTOR_ERR_UNSAFE_SERVER:
    case MONGOELECTOR_ERR_LOST:
      break;
    case MONGOELECTOR_ERR_INTERNAL:
      // A bug in the library by its own definition.
      fail("MONGOELECTOR_ERR_INTERNAL", mongoelector_last_error());
    default:
      fail("unknown status", std::to_string(static_cast<int>(st)));
  }
  const char* msg = mongoelector_last_error();
  FUZZ_CHECK(msg != nullptr, "");
  if (st != MONGOELECTOR_OK) FUZZ_CHECK(std::strlen(msg) > 0, mongoelector_status_name(st));
  FUZZ_CHECK(std::strcmp(mongoelector_status_name(st), "unknown") != 0, "");
}

}  // namespace fuzz
