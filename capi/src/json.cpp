#include "json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>

#include "utf8.h"

namespace mongoelector::capi::json {

namespace {

void append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
  std::string text(buf, res.ptr);
  // Keep it recognisably a double for readers that distinguish ("1.0", not "1").
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  out += text;
}

}  // namespace

void append_string(std::string& out, const std::string& s) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7F) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      ++i;
      continue;
    }
    const std::size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD: keep the output valid UTF-8
      ++i;
      continue;
    }
    out.append(s, i, len);
    i += len;
  }
  out += '"';
}

void append_value(std::string& out, const Value& v) {
  if (std::holds_alternative<Null>(v)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&v)) {
    out += *b ? "true" : "false";
  } else if (const std::int64_t* i = std::get_if<std::int64_t>(&v)) {
    out += std::to_string(*i);
  } else if (const double* d = std::get_if<double>(&v)) {
    append_double(out, *d);
  } else if (const std::string* s = std::get_if<std::string>(&v)) {
    append_string(out, *s);
  } else if (const DateTime* t = std::get_if<DateTime>(&v)) {
    out += "{\"$date\": ";
    out += std::to_string(t->ms);
    out += '}';
  }
}

void append_document(std::string& out, const Document& doc) {
  out += '{';
  bool first = true;
  for (const auto& [name, value] : doc.fields()) {
    if (!first) out += ", ";
    first = false;
    append_string(out, name);
    out += ": ";
    append_value(out, value);
  }
  out += '}';
}

std::string to_json(const Document& doc) {
  std::string out;
  append_document(out, doc);
  return out;
}

char* malloc_copy(const std::string& s) {
  auto* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

}  // namespace mongoelector::capi::json
