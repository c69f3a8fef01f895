// Where the conformance suite finds its server, and a per-run database on it.
//   MONGOELECTOR_TEST_URI     mongodb://... of a running server (tests skip when unset)
//   MONGOELECTOR_TEST_SERVER  java | ferretdb | mongodb (what testserver.sh started)
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

#include "storage/mongo_storage.h"

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

inline std::unique_ptr<MongoStorage> make_storage(std::int64_t op_timeout_ms = 5000) {
  MongoStorageOptions o;
  o.uri = *test_uri();
  o.database = test_database();
  o.op_timeout_ms = op_timeout_ms;
  return std::make_unique<MongoStorage>(o);
}

}  // namespace mongoelector::storage_test

#define REQUIRE_TEST_SERVER()                                                            \
  do {                                                                                   \
    if (!::mongoelector::storage_test::test_uri()) {                                     \
      GTEST_SKIP() << "MONGOELECTOR_TEST_URI is not set; run with a server, e.g. "       \
                      "tests/servers/testserver.sh run java -- ctest -L integration";    \
    }                                                                                    \
  } while (0)
