// Process-wide set-up for the suite: counts the backend's TTL warnings (they are logged
// once per process) and drops the per-run database at the end.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <iostream>

#include "log.h"
#include "log_capture.h"
#include "raw_client.h"
#include "storage_env.h"

namespace mongoelector::storage_test {

std::atomic<int> g_ttl_warnings{0};

namespace {

class SuiteEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    set_log_sink([](const LogRecord& r) {
      if (r.level == LogLevel::Warning && r.message.find("TTL index") != std::string::npos) {
        g_ttl_warnings.fetch_add(1);
      }
      if (r.level >= LogLevel::Warning) std::cerr << "[log] " << r.message << "\n";
    });
    if (auto uri = test_uri()) {
      std::cout << "storage conformance: server " << *uri
                << " (MONGOELECTOR_TEST_SERVER=" << test_server_kind() << "), database "
                << test_database() << std::endl;
    }
  }
  void TearDown() override {
    if (sqlite_backend()) {
      const std::string path = SqliteClient::path_from_uri(test_sqlite_uri());
      for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
    } else if (auto uri = test_uri()) {
      RawClient(*uri, test_database()).drop_database();
    }
    set_log_sink(nullptr);
  }
};

const auto* const g_environment =
    ::testing::AddGlobalTestEnvironment(new SuiteEnvironment());  // owned by gtest

}  // namespace
}  // namespace mongoelector::storage_test
