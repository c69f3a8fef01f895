// Conformance of the server-level operations: server_info, server_time_ms, the indexes
// and the status collection.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "exceptions.h"
#include "fixture.h"
#include "log_capture.h"

namespace mongoelector::storage_test {
namespace {

using ServerOps = StorageTest;

std::int64_t host_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const RawClient::Index* find_index(const std::vector<RawClient::Index>& all,
                                   const std::string& name) {
  for (const auto& i : all) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

TEST_F(ServerOps, ServerInfoNamesTheServer) {
  ServerInfo info = s->server_info();
  std::cout << "server_info: name=\"" << info.name << "\" version=\"" << info.version
            << "\" atomic_find_and_modify=" << std::boolalpha << info.atomic_find_and_modify
            << std::endl;
  EXPECT_FALSE(info.name.empty());
  EXPECT_FALSE(info.version.empty());
  const std::string kind = test_server_kind();
  if (kind == "java") {
    EXPECT_EQ(info.name, "mongo-java-server");
    EXPECT_TRUE(info.atomic_find_and_modify);
  } else if (kind == "ferretdb") {
    EXPECT_EQ(info.name, "FerretDB");
    EXPECT_EQ(info.version.rfind("v", 0), 0u) << "FerretDB's own version, e.g. v1.24.0";
    EXPECT_FALSE(info.atomic_find_and_modify);
  } else if (kind == "mongodb") {
    EXPECT_EQ(info.name, "MongoDB");
    EXPECT_TRUE(info.atomic_find_and_modify);
  }
  if (sqlite_backend()) {
    EXPECT_EQ(info.name, "SQLite");
    EXPECT_TRUE(info.atomic_find_and_modify);
  }
}

TEST_F(ServerOps, ServerTimeIsCloseToTheHostClock) {
  // The servers under test run on this machine, so their clock is the host's.
  const std::int64_t before = host_now_ms();
  const std::int64_t server = s->server_time_ms();
  const std::int64_t after = host_now_ms();
  EXPECT_GT(server, before - 3000);
  EXPECT_LT(server, after + 3000);
  const std::int64_t later = s->server_time_ms();
  EXPECT_GE(later, server - 1000);  // moves forward (modulo clock steps)
}

TEST_F(ServerOps, LockIndexesAreIdempotentAndTolerated) {
  const int warnings_before = g_ttl_warnings.load();
  ASSERT_NO_THROW(s->ensure_lock_indexes(coll));
  ASSERT_NO_THROW(s->ensure_lock_indexes(coll));
  // Still usable afterwards.
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  // SQLite keeps no indexes to inspect (and needs no TTL index: claim takes over expired
  // rows; see sqlite_storage.h).
  if (sqlite_backend()) {
    EXPECT_EQ(g_ttl_warnings.load(), warnings_before);
    return;
  }

  const std::string kind = test_server_kind();
  auto indexes = raw().indexes(coll);
  const auto* ttl = find_index(indexes, "ts_expire_1");
  if (kind == "ferretdb") {
    // TTL refused (NotImplemented): one warning per process, never an error.
    EXPECT_EQ(g_ttl_warnings.load(), 1);
    EXPECT_EQ(ttl, nullptr);
  } else {
    EXPECT_EQ(g_ttl_warnings.load(), warnings_before);
    ASSERT_NE(ttl, nullptr);
    EXPECT_EQ(ttl->expire_after_s, 0);
    EXPECT_NE(ttl->key_json.find("ts_expire"), std::string::npos);
  }
}

TEST_F(ServerOps, StatusIndexesAreIdempotentAndTolerated) {
  ASSERT_NO_THROW(s->ensure_status_indexes(coll, 15));
  ASSERT_NO_THROW(s->ensure_status_indexes(coll, 15));
  EXPECT_THROW(s->ensure_status_indexes(coll, -1), InvalidArgument);
  if (sqlite_backend()) return;  // no index to inspect; the TTL is applied by put_status
  auto indexes = raw().indexes(coll);
  EXPECT_NE(find_index(indexes, "key_1"), nullptr) << "the key index is made even without TTL";
  const auto* ttl = find_index(indexes, "timestamp_1");
  if (test_server_kind() == "ferretdb") {
    EXPECT_EQ(ttl, nullptr);
    EXPECT_EQ(g_ttl_warnings.load(), 1) << "one warning per process, however many calls";
  } else {
    ASSERT_NE(ttl, nullptr);
    EXPECT_EQ(ttl->expire_after_s, 15);
  }
}

TEST_F(ServerOps, ConflictingIndexIsDroppedAndCreatedAgain) {
  SKIP_ON_SQLITE("index specifications");
  if (s->server_info().name == "mongo-java-server") {
    GTEST_SKIP() << "mongo-java-server accepts conflicting index specs, so there is no "
                    "conflict to recover from";
  }
  // An index named like ours on another key spec: createIndexes answers 86
  // (IndexKeySpecsConflict); the backend drops the indexes and retries once.
  raw().command(R"({"createIndexes": ")" + coll +
                R"(", "indexes": [{"key": {"key": -1}, "name": "key_1"}]})");
  ASSERT_NO_THROW(s->ensure_status_indexes(coll, 30));
  auto indexes = raw().indexes(coll);
  const auto* key = find_index(indexes, "key_1");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->key_json.find("-1"), std::string::npos) << key->key_json;
}

TEST_F(ServerOps, TtlIndexWithAnotherExpiryIsReplaced) {
  SKIP_ON_SQLITE("TTL index options");
  if (s->server_info().name != "MongoDB") {
    GTEST_SKIP() << "only MongoDB both keeps TTL options and reports their conflicts";
  }
  ASSERT_NO_THROW(s->ensure_status_indexes(coll, 30));
  ASSERT_NO_THROW(s->ensure_status_indexes(coll, 60));  // 85 IndexOptionsConflict -> drop
  const auto* ttl = find_index(raw().indexes(coll), "timestamp_1");
  ASSERT_NE(ttl, nullptr);
  EXPECT_EQ(ttl->expire_after_s, 60);
}

Document status_doc(const std::string& id, const std::string& key, std::int64_t ts) {
  return Document{{"_id", id},
                  {"key", key},
                  {"timestamp", DateTime{ts}},
                  {"is_leader", false},
                  {"pid", std::int64_t{77}},
                  {"ttl", 15.5},
                  {"app_version", Null{}}};
}

TEST_F(ServerOps, StatusDocumentsAreUpsertedAndListedNewestFirst) {
  s->put_status(coll, status_doc("n1", "k", now - 3000));
  s->put_status(coll, status_doc("n2", "k", now - 1000));
  s->put_status(coll, status_doc("n3", "k", now - 2000));
  s->put_status(coll, status_doc("x1", "other", now));

  auto list = s->list_status(coll, "k");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].get_string("_id"), "n2");
  EXPECT_EQ(list[1].get_string("_id"), "n3");
  EXPECT_EQ(list[2].get_string("_id"), "n1");
  // Every Value type comes back as written.
  EXPECT_EQ(list[0], status_doc("n2", "k", now - 1000));

  // Replace, not merge: a field left out disappears; a newer timestamp moves it first.
  Document replaced{
      {"_id", std::string("n1")}, {"key", std::string("k")}, {"timestamp", DateTime{now}}};
  s->put_status(coll, replaced);
  list = s->list_status(coll, "k");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0], replaced);
  EXPECT_FALSE(list[0].has("is_leader"));

  EXPECT_TRUE(s->list_status(coll, "nobody").empty());
}

TEST_F(ServerOps, StatusDocumentWithoutIdIsRejected) {
  EXPECT_THROW(s->put_status(coll, Document{{"key", std::string("k")}}), InvalidArgument);
}

TEST_F(ServerOps, BadNamesAreInvalidArguments) {
  EXPECT_THROW(s->read("", "k"), InvalidArgument);
  EXPECT_THROW(s->read("a$b", "k"), InvalidArgument);
  EXPECT_THROW(s->read(std::string("a\0b", 3), "k"), InvalidArgument);
  EXPECT_THROW(s->claim(coll, claim_by("\xff\xfe", now), false), InvalidArgument);
  EXPECT_THROW(
      s->put_status(coll, Document{{"_id", std::string("n")}, {std::string("a\0b", 3), true}}),
      InvalidArgument);
}

}  // namespace
}  // namespace mongoelector::storage_test
