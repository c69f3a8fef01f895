// Reads the C API's JSON (json.h).
#include "cli.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cli {

const Json* Json::get(const std::string& name) const {
  if (type != Object) return nullptr;
  for (const auto& [k, v] : obj)
    if (k == name) return &v;
  return nullptr;
}

namespace {
// "2026-11-23T17:38:28.123Z" (relaxed Extended JSON's date) -> ms since the epoch, UTC.
std::optional<int64_t> iso8601_ms(const std::string& s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0, n = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
    return std::nullopt;
  const char* rest = s.c_str() + n;
  if (*rest == '.') {
    int digits = 0;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, ++digits)
      if (digits < 3) ms = ms * 10 + (*rest - '0');
    for (; digits < 3; ++digits) ms *= 10;
  }
  if (std::strcmp(rest, "Z") != 0) return std::nullopt;
  // Days from 1970-01-01 to the civil date (proleptic Gregorian).
  const int yy = y - (mo <= 2);
  const int era = (yy >= 0 ? yy : yy - 399) / 400;
  const int yoe = yy - era * 400;
  const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = static_cast<int64_t>(era) * 146097 + doe - 719468;
  return ((days * 24 + h) * 60 + mi) * 60000 + static_cast<int64_t>(sec) * 1000 + ms;
}
}  // namespace

std::optional<int64_t> Json::as_date_ms() const {
  if (type == Number) return i;
  if (const Json* d = get("$date")) {
    if (d->type == Number) return d->i;
    if (d->type == String) return iso8601_ms(d->str);
    if (const Json* n = d->get("$numberLong"))
      if (n->type == String) return std::strtoll(n->str.c_str(), nullptr, 10);
  }
  return std::nullopt;
}

namespace {
struct Parser {
  const std::string& s;
  size_t p = 0;
  std::string err;
  void ws() {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\t' || s[p] == '\r')) ++p;
  }
  bool fail(const std::string& e) {
    if (err.empty()) err = e + " at offset " + std::to_string(p);
    return false;
  }
  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80)
      out += static_cast<char>(cp);
    else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool hex4(unsigned& v) {
    if (p + 4 > s.size()) return fail("short \\u escape");
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s[p++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        return fail("bad \\u escape");
    }
    return true;
  }
  bool string(std::string& out) {
    if (p >= s.size() || s[p] != '"') return fail("expected a string");
    ++p;
    while (p < s.size() && s[p] != '"') {
      char c = s[p++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p >= s.size()) return fail("bad escape");
      char e = s[p++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && p + 1 < s.size() && s[p] == '\\' && s[p + 1] == 'u') {
            p += 2;
            unsigned lo = 0;
            if (!hex4(lo)) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          return fail("bad escape");
      }
    }
    if (p >= s.size()) return fail("unterminated string");
    ++p;
    return true;
  }
  bool value(Json& v, int depth) {
    if (depth > 64) return fail("nested too deeply");
    ws();
    if (p >= s.size()) return fail("unexpected end");
    char c = s[p];
    if (c == '{') {
      v.type = Json::Object;
      ++p;
      ws();
      if (p < s.size() && s[p] == '}') return ++p, true;
      for (;;) {
        ws();
        std::string k;
        if (!string(k)) return false;
        ws();
        if (p >= s.size() || s[p] != ':') return fail("expected ':'");
        ++p;
        Json child;
        if (!value(child, depth + 1)) return false;
        v.obj.emplace_back(std::move(k), std::move(child));
        ws();
        if (p < s.size() && s[p] == ',') {
          ++p;
          continue;
        }
        if (p < s.size() && s[p] == '}') return ++p, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = Json::Array;
      ++p;
      ws();
      if (p < s.size() && s[p] == ']') return ++p, true;
      for (;;) {
        Json child;
        if (!value(child, depth + 1)) return false;
        v.arr.push_back(std::move(child));
        ws();
        if (p < s.size() && s[p] == ',') {
          ++p;
          continue;
        }
        if (p < s.size() && s[p] == ']') return ++p, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = Json::String;
      return string(v.str);
    }
    if (s.compare(p, 4, "true") == 0) {
      v.type = Json::Bool;
      v.b = true;
      p += 4;
      return true;
    }
    if (s.compare(p, 5, "false") == 0) {
      v.type = Json::Bool;
      p += 5;
      return true;
    }
    if (s.compare(p, 4, "null") == 0) {
      v.type = Json::Null;
      p += 4;
      return true;
    }
    size_t start = p;
    if (s[p] == '-') ++p;
    bool integral = true;
    while (p < s.size() && (isdigit(static_cast<unsigned char>(s[p])) || s[p] == '.' ||
                            s[p] == 'e' || s[p] == 'E' || s[p] == '+' || s[p] == '-')) {
      if (!isdigit(static_cast<unsigned char>(s[p]))) integral = false;
      ++p;
    }
    if (p == start) return fail("unexpected character");
    std::string num = s.substr(start, p - start);
    v.type = Json::Number;
    v.num = std::strtod(num.c_str(), nullptr);
    v.i = integral ? std::strtoll(num.c_str(), nullptr, 10) : static_cast<int64_t>(v.num);
    return true;
  }
};
}  // namespace

bool parse_json(const std::string& text, Json& out, std::string& error) {
  Parser parser{text, 0, {}};
  if (!parser.value(out, 0)) {
    error = parser.err;
    return false;
  }
  parser.ws();
  if (parser.p != text.size()) {
    error = "trailing characters at offset " + std::to_string(parser.p);
    return false;
  }
  return true;
}

std::string json_text(const Json& v) {
  switch (v.type) {
    case Json::Null:
      return "null";
    case Json::Bool:
      return v.b ? "true" : "false";
    case Json::Number: {
      if (static_cast<double>(v.i) == v.num) return std::to_string(v.i);
      char buf[40];
      snprintf(buf, sizeof buf, "%.17g", v.num);
      return buf;
    }
    case Json::String:
      return json_quote(v.str);
    case Json::Array: {
      std::string out = "[";
      for (std::size_t k = 0; k < v.arr.size(); ++k) out += (k ? ", " : "") + json_text(v.arr[k]);
      return out + "]";
    }
    case Json::Object: {
      std::string out = "{";
      for (std::size_t k = 0; k < v.obj.size(); ++k)
        out += (k ? ", " : "") + json_quote(v.obj[k].first) + ": " + json_text(v.obj[k].second);
      return out + "}";
    }
  }
  return "null";
}

}  // namespace cli
