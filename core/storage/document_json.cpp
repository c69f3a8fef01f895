// See document_json.h. A small recursive-descent JSON reader with a depth limit; the
// writer emits canonical Extended JSON v2 for the Value types.
#include "document_json.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "../exceptions.h"
#include "../utf8.h"

namespace mongoelector::document_json {

namespace {

// ------------------------------------------------------------------ writer ------

void put_string(std::string& out, const std::string& s, const char* what) {
  if (!is_valid_utf8(s)) throw InvalidArgument(std::string(what) + " is not valid UTF-8");
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string format_double(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);  // round-trips every double
  std::string s = buf;
  // Keep it recognisably a double ("1.0", not "1"), as the canonical form does.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

void put_value(std::string& out, const Value& v, const std::string& name) {
  if (std::holds_alternative<Null>(v)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&v)) {
    out += *b ? "true" : "false";
  } else if (const std::int64_t* i = std::get_if<std::int64_t>(&v)) {
    out += "{\"$numberLong\":\"" + std::to_string(*i) + "\"}";
  } else if (const double* d = std::get_if<double>(&v)) {
    out += "{\"$numberDouble\":\"" + format_double(*d) + "\"}";
  } else if (const std::string* s = std::get_if<std::string>(&v)) {
    put_string(out, *s, ("value of " + name).c_str());
  } else if (const DateTime* t = std::get_if<DateTime>(&v)) {
    out += "{\"$date\":{\"$numberLong\":\"" + std::to_string(t->ms) + "\"}}";
  }
}

// ------------------------------------------------------------------ reader ------

// A parsed JSON value, reduced to what a Document needs: a Value, or "skip" (an object
// or array that is no Extended JSON scalar), or an object of members (only while
// recognising the $-wrappers).
struct Parsed {
  std::optional<Value> value;  // nullopt: not representable, the field is skipped
};

class Reader {
 public:
  Reader(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  Document document() {
    skip_ws();
    if (peek() != '{') fail("expected an object");
    Document doc;
    object_members(
        [&](std::string name, Parsed p) {
          if (name.find('\0') != std::string::npos) return;  // cannot be a field name
          if (p.value) doc.set(name, std::move(*p.value));
        },
        0);
    skip_ws();
    if (pos_ != s_.size()) fail("trailing characters");
    return doc;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void fail(const std::string& why) const {
    throw StorageError("malformed stored " + what_ + " at offset " + std::to_string(pos_) + ": " +
                       why);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }
  void skip_ws() {
    while (!at_end() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool literal(const char* word) {
    std::string_view w(word);
    if (s_.substr(pos_, w.size()) == w) {
      pos_ += w.size();
      return true;
    }
    return false;
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail("bad \\u escape");
    }
    return v;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::string string() {
    skip_ws();
    if (peek() != '"') fail("expected a string");
    ++pos_;
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (at_end()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!literal("\\u")) fail("lone high surrogate");
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("lone low surrogate");
          }
          put_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
    if (!is_valid_utf8(out)) fail("string is not valid UTF-8");
    return out;
  }

  Value number() {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    bool integral = true;
    auto digits = [&] {
      std::size_t n = 0;
      while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_, ++n;
      if (n == 0) fail("bad number");
    };
    digits();
    if (peek() == '.') {
      integral = false;
      ++pos_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    const std::string text(s_.substr(start, pos_ - start));
    if (integral) {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0') return static_cast<std::int64_t>(v);
    }
    return std::strtod(text.c_str(), nullptr);
  }

  static std::optional<std::int64_t> parse_int64(const std::string& s) {
    if (s.empty()) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || end == nullptr || *end != '\0') return std::nullopt;
    return static_cast<std::int64_t>(v);
  }

  static std::optional<double> parse_double(const std::string& s) {
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end == nullptr || *end != '\0') return std::nullopt;
    return d;
  }

  template <class F>
  void object_members(F&& on_member, int depth) {
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      std::string name = string();
      expect(':');
      Parsed p = value(depth + 1);
      on_member(std::move(name), std::move(p));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return;
    }
  }

  // An object: an Extended JSON wrapper ({"$numberLong": "1"}, {"$date": ...}) becomes
  // its Value; anything else is skipped.
  Parsed object(int depth) {
    std::vector<std::pair<std::string, Parsed>> members;
    object_members(
        [&](std::string name, Parsed p) { members.emplace_back(std::move(name), std::move(p)); },
        depth);
    if (members.size() != 1) return Parsed{};
    const std::string& name = members[0].first;
    const std::optional<Value>& v = members[0].second.value;
    if (!v) return Parsed{};
    const std::string* text = std::get_if<std::string>(&*v);
    if (name == "$numberLong" || name == "$numberInt") {
      if (text) {
        if (auto i = parse_int64(*text)) return Parsed{Value{*i}};
      }
      fail(name + " needs a decimal string");
    }
    if (name == "$numberDouble") {
      if (text) {
        if (auto d = parse_double(*text)) return Parsed{Value{*d}};
      }
      fail("$numberDouble needs a number string");
    }
    if (name == "$date") {
      // {"$date": {"$numberLong": "ms"}} arrives here already reduced to an int64.
      if (const std::int64_t* ms = std::get_if<std::int64_t>(&*v))
        return Parsed{Value{DateTime{*ms}}};
      if (const double* d = std::get_if<double>(&*v)) {
        // [-2^63, 2^63): the doubles an int64 can hold (converting any other is undefined).
        if (*d >= -9223372036854775808.0 && *d < 9223372036854775808.0)
          return Parsed{Value{DateTime{static_cast<std::int64_t>(*d)}}};
        fail("$date out of range");
      }
      return Parsed{};  // ISO-8601 strings are not written by us: skipped
    }
    return Parsed{};
  }

  Parsed array(int depth) {
    expect('[');
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return Parsed{};
    }
    for (;;) {
      (void)value(depth + 1);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return Parsed{};
    }
  }

  Parsed value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    skip_ws();
    char c = peek();
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Parsed{Value{string()}};
    if (c == '-' || (c >= '0' && c <= '9')) return Parsed{number()};
    if (literal("true")) return Parsed{Value{true}};
    if (literal("false")) return Parsed{Value{false}};
    if (literal("null")) return Parsed{Value{Null{}}};
    fail("unexpected character");
  }

  std::string_view s_;
  std::string what_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string encode_value(const Value& v) {
  std::string out;
  put_value(out, v, "value");
  return out;
}

std::string encode(const Document& doc) {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : doc.fields()) {
    if (name.find('\0') != std::string::npos)
      throw InvalidArgument("document field names cannot contain NUL characters");
    if (!first) out.push_back(',');
    first = false;
    put_string(out, name, "field name");
    out.push_back(':');
    put_value(out, value, name);
  }
  out.push_back('}');
  return out;
}

Document decode(std::string_view text, const std::string& what) {
  return Reader(text, what).document();
}

}  // namespace mongoelector::document_json
