// Fixture of the conformance tests: a MongoStorage on the test server, a collection named
// after the test, and the server's clock read once at the start.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "raw_client.h"
#include "storage_env.h"

namespace mongoelector::storage_test {

class StorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_TEST_SERVER();
    s = make_storage();
    coll = std::string("c_") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    now = s->server_time_ms();
  }

  LockClaim claim_by(const std::string& who, std::int64_t at_ms, std::int64_t ttl_ms = 10000,
                     const std::string& key = "k") const {
    LockClaim c;
    c.key = key;
    c.uuid = "uuid-" + who;
    c.host = "host-" + who;
    c.pid = 4242;
    c.now_ms = at_ms;
    c.expire_ms = at_ms + ttl_ms;
    return c;
  }

  RawClient raw() const { return RawClient(*test_uri(), test_database()); }

  std::unique_ptr<MongoStorage> s;
  std::string coll;
  std::int64_t now = 0;
};

}  // namespace mongoelector::storage_test
