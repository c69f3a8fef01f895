// Where the conformance suite finds its backend, and a per-run database on it.
//   MONGOELECTOR_TEST_URI     mongodb://... of a running server, or sqlite:///dir/name.db
//                             for the embedded backend (no server; the run uses its own
//                             file dir/name.db.<pid>_<ms>, removed at the end). Tests skip
//                             when it is unset.
//   MONGOELECTOR_TEST_SERVER  java | ferretdb | mongodb (what testserver.sh started) | sqlite
//
// The shared suite (fixture.h: lock_ops_test, server_ops_test) runs on every backend
// through open_test_storage(); tests of MongoDB-only machinery (pools, libmongoc
// timeouts, TCP fixtures, BSON) use REQUIRE_TEST_SERVER(), which skips on SQLite.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

#include "storage/mongo_storage.h"
#include "storage/sqlite_storage.h"

namespace mongoelector::storage_test {

inline std::optional<std::string> test_uri() {
  const char* uri = std::getenv("MONGOELECTOR_TEST_URI");
  if (uri == nullptr || *uri == '\0') return std::nullopt;
  return std::string(uri);
}

inline std::string test_server_kind() {
  const char* kind = std::getenv("MONGOELECTOR_TEST_SERVER");
  return kind ? kind : "";
}

// One database per test process, so runs never see each other's documents.
inline const std::string& test_database() {
  static const std::string name = [] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    return "metest_" + std::to_string(::getpid()) + "_" + std::to_string(ms);
  }();
  return name;
}

inline bool sqlite_backend() {
  auto uri = test_uri();
  return uri && is_sqlite_uri(*uri);
}

// The per-run SQLite file: next to the one the URI names.
inline const std::string& test_sqlite_uri() {
  static const std::string uri = *test_uri() + "." + test_database();
  return uri;
}

// A storage of the backend under test (a connection of its own on SQLite, a client of
// its own on MongoDB).
inline std::unique_ptr<Storage> open_test_storage(std::int64_t op_timeout_ms = 5000) {
  if (sqlite_backend())
    return std::make_unique<SqliteStorage>(SqliteClient::open(test_sqlite_uri()), op_timeout_ms);
  MongoStorageOptions o;
  o.uri = *test_uri();
  o.database = test_database();
  o.op_timeout_ms = op_timeout_ms;
  return std::make_unique<MongoStorage>(o);
}

// Calls counted by the backend: MongoDB commands sent, SQLite calls made.
inline std::int64_t round_trips(const Storage& s) {
  if (auto* m = dynamic_cast<const MongoStorage*>(&s)) return m->round_trips();
  if (auto* q = dynamic_cast<const SqliteStorage*>(&s)) return q->round_trips();
  return -1;
}

// A MongoStorage on the test server (MongoDB-only tests).
inline std::unique_ptr<MongoStorage> make_storage(std::int64_t op_timeout_ms = 5000) {
  MongoStorageOptions o;
  o.uri = *test_uri();
  o.database = test_database();
  o.op_timeout_ms = op_timeout_ms;
  return std::make_unique<MongoStorage>(o);
}

}  // namespace mongoelector::storage_test

// Any backend (the shared conformance suite).
#define REQUIRE_TEST_BACKEND()                                                        \
  do {                                                                                \
    if (!::mongoelector::storage_test::test_uri()) {                                  \
      GTEST_SKIP() << "MONGOELECTOR_TEST_URI is not set; run with a server, e.g. "    \
                      "tests/servers/testserver.sh run java -- ctest -L integration"; \
    }                                                                                 \
  } while (0)

// A MongoDB-protocol server (tests of MongoDB-only machinery).
#define REQUIRE_TEST_SERVER()                          \
  do {                                                 \
    REQUIRE_TEST_BACKEND();                            \
    SKIP_ON_SQLITE("needs a MongoDB-protocol server"); \
  } while (0)

#define SKIP_ON_SQLITE(why)                                                      \
  do {                                                                           \
    if (::mongoelector::storage_test::sqlite_backend())                          \
      GTEST_SKIP() << "MongoDB-specific (" << why << "); the backend is SQLite"; \
  } while (0)
