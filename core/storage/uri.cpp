// parse_storage_uri and its helpers (uri.h).
#include "uri.h"

#include "../exceptions.h"

namespace mongoelector {

namespace {

constexpr std::string_view kMongo = "mongodb://";
constexpr std::string_view kMongoSrv = "mongodb+srv://";
constexpr std::string_view kSqlite = "sqlite://";
constexpr std::string_view kMemory = "memory://";
constexpr const char* kForms =
    "mongodb://host/database, mongodb+srv://host/database, sqlite:///absolute/path.db or "
    "memory://NAME";

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

[[noreturn]] void refuse(const std::string& uri, const std::string& why) {
  throw InvalidArgument("invalid storage URI '" + redact_uri(uri) + "': " + why);
}

// percent_decode, its error naming the whole URI (password hidden) rather than the part.
std::string decode(const std::string& uri, std::string_view part, const char* what) {
  try {
    return percent_decode(part, what);
  } catch (const InvalidArgument&) {
    refuse(uri, std::string("bad percent-escape in ") + what +
                    " (a '%' must be followed by two hex digits; write %25 for '%')");
  }
}

void parse_options(const std::string& uri, std::string_view query, StorageUri& out) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.empty()) continue;  // "?a=1&" or "?&a=1"
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      refuse(uri, "option '" + std::string(item) + "' is not key=value");
    out.options.emplace_back(decode(uri, item.substr(0, eq), "an option"),
                             decode(uri, item.substr(eq + 1), "an option"));
  }
}

void parse_mongodb(const std::string& uri, std::string_view rest, StorageUri& out) {
  out.backend = UriBackend::MongoDB;
  const auto q = rest.find('?');
  if (q != std::string_view::npos) parse_options(uri, rest.substr(q + 1), out);
  rest = rest.substr(0, q);
  // Hosts and user end at the first '/' (a '/' in a password must be %2F); the user ends
  // at the last '@' before it, so a raw '@' in a password still reads as meant.
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos)
    out.database = decode(uri, rest.substr(slash + 1), "the database name");
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view user = authority.substr(0, at);
    const auto colon = user.find(':');
    out.username = decode(uri, user.substr(0, colon), "the user name");
    if (colon != std::string_view::npos) {
      out.has_password = true;
      out.password = decode(uri, user.substr(colon + 1), "the password");
    }
    authority = authority.substr(at + 1);
  }
  if (authority.empty()) refuse(uri, "no host (as in mongodb://host:27017/database)");
  out.hosts = std::string(authority);
}

void parse_sqlite(const std::string& uri, std::string_view rest, StorageUri& out) {
  out.backend = UriBackend::Sqlite;
  if (rest.find_first_of("?#") != std::string_view::npos)
    refuse(uri, "a SQLite URI takes no options (form: sqlite:///absolute/path/locks.db)");
  if (rest.empty() || rest[0] != '/')
    refuse(uri,
           "a SQLite URI names an absolute path, as in sqlite:///absolute/path/locks.db "
           "(three slashes)");
  out.path = decode(uri, rest, "the SQLite path");
  if (out.path.find('\0') != std::string::npos) refuse(uri, "the SQLite path contains NUL");
  if (out.path.size() < 2 || out.path.back() == '/')
    refuse(uri, "the SQLite path names a directory, not a file");
}

}  // namespace

const char* StorageUri::backend_name() const {
  switch (backend) {
    case UriBackend::Sqlite:
      return "sqlite";
    case UriBackend::Memory:
      return "memory";
    case UriBackend::MongoDB:
      break;
  }
  return "mongodb";
}

std::string percent_decode(std::string_view s, const std::string& what) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const int hi = i + 2 < s.size() ? hex_digit(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      throw InvalidArgument("bad percent-escape in " + what + " '" + std::string(s) +
                            "' (a '%' must be followed by two hex digits; write %25 for '%')");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

StorageUri parse_storage_uri(const std::string& uri) {
  if (uri.empty()) throw InvalidArgument(std::string("empty storage URI: use ") + kForms);
  StorageUri out;
  const std::string_view u = uri;
  if (starts_with(u, kMongoSrv)) {
    out.scheme = "mongodb+srv";
    parse_mongodb(uri, u.substr(kMongoSrv.size()), out);
  } else if (starts_with(u, kMongo)) {
    out.scheme = "mongodb";
    parse_mongodb(uri, u.substr(kMongo.size()), out);
  } else if (starts_with(u, kSqlite)) {
    out.scheme = "sqlite";
    parse_sqlite(uri, u.substr(kSqlite.size()), out);
  } else if (starts_with(u, "sqlite:")) {  // "sqlite:/path", "sqlite:path"
    refuse(uri,
           "a SQLite URI names an absolute path, as in sqlite:///absolute/path/locks.db "
           "(three slashes)");
  } else if (starts_with(u, kMemory)) {
    out.scheme = "memory";
    out.backend = UriBackend::Memory;
    const std::string_view name = u.substr(kMemory.size());
    if (name.find_first_of("?#") != std::string_view::npos)
      refuse(uri, "memory://NAME takes no options");
    out.path = std::string(name);  // a name, not a path: kept as written
  } else {
    refuse(uri, std::string("unknown scheme: use ") + kForms);
  }
  return out;
}

std::string database_for(const StorageUri& uri, const std::string& given) {
  if (uri.backend != UriBackend::MongoDB) return "";
  if (!given.empty()) return given;
  return uri.database;
}

std::string redact_uri(const std::string& uri) {
  const auto scheme = uri.find("://");
  if (scheme == std::string::npos) return uri;
  const auto host_start = scheme + 3;
  const auto end = uri.find_first_of("/?", host_start);
  const auto at = uri.rfind('@', end == std::string::npos ? std::string::npos : end - 1);
  if (at == std::string::npos || at < host_start) return uri;
  const auto colon = uri.find(':', host_start);
  if (colon == std::string::npos || colon > at) return uri;
  return uri.substr(0, colon + 1) + "***" + uri.substr(at);
}

}  // namespace mongoelector
