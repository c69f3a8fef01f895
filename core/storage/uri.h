// The storage URI: the one parser every entry point uses (the C API's client, the
// `mongoelector` command through it, the Python package through _native.parse_uri), so a
// URI means the same backend, database and path everywhere.
//
//   mongodb://[user[:password]@]host[:port][,host...][/database][?key=value&...]
//   mongodb+srv://[user[:password]@]host[/database][?key=value&...]
//   sqlite:///absolute/path/locks.db          (three slashes; no options)
//   memory://NAME                             (this process only, for tests; no options)
//
// Percent-escapes are decoded in the user, password, database, SQLite path and options.
// In the user and password an '@' or '/' must be written %40 / %2F (as the MongoDB URI
// specification asks); a raw '@' still works, the host list starting after the last one.
// Hosts are left as written ("[::1]:27017,h2"): libmongoc reads them (and the options'
// meaning) itself; this parser decides the backend, the database and the path.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mongoelector {

enum class UriBackend { MongoDB, Sqlite, Memory };

struct StorageUri {
  std::string scheme;  // "mongodb", "mongodb+srv", "sqlite" or "memory"
  UriBackend backend = UriBackend::MongoDB;
  std::string username, password;  // decoded; mongodb only
  bool has_password = false;       // "user:@h" names an empty one
  std::string hosts;               // mongodb: as written, "" for the others
  std::string database;            // mongodb: the path, decoded; "" when absent
  std::string path;                // sqlite: the file, decoded; memory: NAME as written
  std::vector<std::pair<std::string, std::string>> options;  // the query, decoded, in order

  // "mongodb" (both mongodb schemes), "sqlite" or "memory": StorageClient::backend().
  const char* backend_name() const;
};

// InvalidArgument naming the URI (password hidden) for: an empty URI, an unknown
// scheme, a mongodb URI without a host, a malformed percent-escape or option, a SQLite
// URI whose path is not absolute or names a directory, options on sqlite:// or memory://.
StorageUri parse_storage_uri(const std::string& uri);

// The database of a MongoDB client: `given` if not empty, else the URI's ("" when it
// names none: MongoClient then refuses, "no database name"). "" for the other backends.
// The library has no default database (the C API's tests hold it to that); the
// `mongoelector` command supplies its documented "mongoelector" itself.
std::string database_for(const StorageUri& uri, const std::string& given);

// The URI with its password replaced by "***" (for messages and status output).
std::string redact_uri(const std::string& uri);

// "a%20b" -> "a b". InvalidArgument naming `what` for a '%' not followed by two hex digits.
std::string percent_decode(std::string_view text, const std::string& what);

}  // namespace mongoelector
