// Fixture of the conformance tests: a Storage of the backend under test (MongoDB or
// SQLite, storage_env.h), a collection named after the test, and the server's clock read
// once at the start.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "raw_client.h"
#include "storage/document_json.h"
#include "storage_env.h"

namespace mongoelector::storage_test {

class StorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_TEST_BACKEND();
    s = open_test_storage();
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

  // Writes documents the backend would never write (odd types, the original's schema)
  // and, on MongoDB only, inspects indexes and runs commands.
  class Raw {
   public:
    explicit Raw(Storage& s) : s_(s) {}
    // An Extended JSON document: through libmongoc on MongoDB; on SQLite decoded like a
    // stored row (types a Value cannot hold are dropped, as on reading from MongoDB).
    void insert(const std::string& collection, const std::string& json) {
      if (auto* q = dynamic_cast<SqliteStorage*>(&s_)) {
        q->put_document(collection, document_json::decode(json, "test document"));
      } else {
        mongo().insert(collection, json);
      }
    }
    std::vector<RawClient::Index> indexes(const std::string& collection) {
      return mongo().indexes(collection);
    }
    std::string command(const std::string& json) { return mongo().command(json); }

   private:
    RawClient& mongo() {
      if (!client_) client_ = std::make_unique<RawClient>(*test_uri(), test_database());
      return *client_;
    }
    Storage& s_;
    std::unique_ptr<RawClient> client_;
  };
  Raw raw() const { return Raw(*s); }

  std::unique_ptr<Storage> s;
  std::string coll;
  std::int64_t now = 0;
};

}  // namespace mongoelector::storage_test
