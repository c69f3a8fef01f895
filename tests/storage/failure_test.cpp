// Failures: bad configuration is an InvalidArgument at construction; an unreachable,
// silent or stalled server is a StorageUnavailable within about op_timeout_ms, never a hang.
#include <gtest/gtest.h>

#include <mongoc/mongoc.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <set>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "storage_env.h"
#include "tcp_fixtures.h"

namespace mongoelector::storage_test {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<MongoStorage> storage_at(const std::string& uri, std::int64_t timeout_ms) {
  MongoStorageOptions o;
  o.uri = uri;
  o.database = test_database();  // dropped at the end, even what a stalled call wrote later
  o.op_timeout_ms = timeout_ms;
  return std::make_unique<MongoStorage>(o);
}

std::string loopback_uri(int port) { return "mongodb://127.0.0.1:" + std::to_string(port) + "/"; }

// Runs `op`, expects StorageUnavailable within the storage's own call bound (plus
// scheduling slack) and within `limit_ms`; returns the elapsed milliseconds.
long long expect_unavailable(const MongoStorage& s, long long limit_ms,
                             const std::function<void()>& op) {
  const auto start = Clock::now();
  EXPECT_THROW(op(), StorageUnavailable);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  std::cout << "  unavailable after " << ms << " ms (call bound " << s.call_bound_ms() << " ms)"
            << std::endl;
  EXPECT_LE(ms, s.call_bound_ms() + 300);
  EXPECT_LE(ms, limit_ms);
  return ms;
}

LockClaim some_claim() {
  LockClaim c;
  c.key = "k";
  c.uuid = "u";
  c.host = "h";
  c.pid = 1;
  c.now_ms = 1000;
  c.expire_ms = 2000;
  return c;
}

TEST(Configuration, MalformedUrisAreInvalidArguments) {
  for (const std::string uri : {"", "not-a-uri", "mongodb://", "http://127.0.0.1:27017/",
                                "mongodb://127.0.0.1:99999999/", "mongodb://a:b@c:d@e/"}) {
    EXPECT_THROW(storage_at(uri, 500), InvalidArgument) << uri;
  }
  EXPECT_THROW(storage_at(std::string("mongodb://127.0.0.1\0:1/", 24), 500), InvalidArgument);
}

TEST(Configuration, BadDatabaseNamesAndTimeoutsAreInvalidArguments) {
  MongoStorageOptions o;
  o.uri = "mongodb://127.0.0.1:1/";
  for (const std::string& db :
       std::vector<std::string>{"", "a.b", "a b", "a/b", "a$b", std::string(64, 'x')}) {
    o.database = db;
    EXPECT_THROW(MongoStorage{o}, InvalidArgument) << db;
  }
  o.database = "ok";
  for (std::int64_t t : {0LL, -5LL, 1LL << 40}) {
    o.op_timeout_ms = t;
    EXPECT_THROW(MongoStorage{o}, InvalidArgument) << t;
  }
}

TEST(Configuration, DatabaseMayComeFromTheUriAndNothingConnectsUpFront) {
  MongoStorageOptions o;
  o.uri = "mongodb://127.0.0.1:1/fromuri";  // nothing listens on port 1
  o.op_timeout_ms = 200;
  auto start = Clock::now();
  MongoStorage storage(o);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(storage.round_trips(), 0);
}

TEST(Configuration, CallBoundAddsSlotWaitSelectionConnectAndSocketTimeouts) {
  // 500 ms falls in the 400 ms class (sqrt(2) ladder: 100, 141, 200, 282, 400, 565).
  const std::int64_t cls = MongoClient::timeout_class_ms(500);
  EXPECT_EQ(cls, 400);
  // Slot wait cls/2 + selection, connect and socket cls each: never above 3.5 x 500.
  EXPECT_EQ(storage_at("mongodb://127.0.0.1:1/", 500)->call_bound_ms(), cls / 2 + 3 * cls);
  // Timeouts the URI sets win over the class.
  EXPECT_EQ(storage_at("mongodb://127.0.0.1:1/?socketTimeoutMS=100", 500)->call_bound_ms(),
            cls / 2 + cls + cls + 100);
  // libmongoc's retries repeat selection, connect and socket once; an infinite socket
  // timeout means no bound.
  EXPECT_EQ(storage_at("mongodb://127.0.0.1:1/?retryWrites=true", 500)->call_bound_ms(),
            cls / 2 + 2 * (3 * cls));
  EXPECT_EQ(storage_at("mongodb://127.0.0.1:1/?socketTimeoutMS=0", 500)->call_bound_ms(), 0);
}

TEST(Configuration, TimeoutClassesNeverExceedTheTimeoutAskedFor) {
  std::set<std::int64_t> classes;
  for (std::int64_t ms = 100; ms <= 5000; ms += 7) {
    const std::int64_t cls = MongoClient::timeout_class_ms(ms);
    EXPECT_LE(cls, ms);
    EXPECT_GE(cls * 10, ms * 7) << ms;  // at most 29 % shorter (sqrt(2) rungs)
    classes.insert(cls);
  }
  EXPECT_LE(classes.size(), 12u);  // every ttl from 1 s to 50 s: a dozen pools at most
}

TEST(Unavailable, UriTimeoutsOverrideOpTimeout) {
  ClosedPort closed;
  auto s = storage_at(loopback_uri(closed.port()) + "?serverSelectionTimeoutMS=200", 5000);
  EXPECT_LE(expect_unavailable(*s, 1000, [&] { s->read("c", "k"); }), 700);
}

TEST(Unavailable, ClosedPortFailsFastOnEveryOperation) {
  ClosedPort closed;
  auto s = storage_at(loopback_uri(closed.port()), 500);
  expect_unavailable(*s, 2000, [&] { s->claim("c", some_claim(), false); });
  expect_unavailable(*s, 2000, [&] { s->read("c", "k"); });
  expect_unavailable(*s, 2000, [&] { s->renew("c", "k", "u", 1, 0, 1); });
  expect_unavailable(*s, 2000, [&] { s->release("c", "k", std::nullopt, 0, 0, false); });
  expect_unavailable(*s, 2000, [&] { s->server_time_ms(); });
  expect_unavailable(*s, 2000, [&] { s->server_info(); });
  expect_unavailable(*s, 2000, [&] { s->ensure_lock_indexes("c"); });
  expect_unavailable(*s, 2000, [&] { s->list_status("c", "k"); });
}

TEST(Unavailable, ServerThatNeverAnswersTimesOut) {
  SilentServer silent;  // TCP connects, the handshake never gets a reply
  auto s = storage_at(loopback_uri(silent.port()), 500);
  expect_unavailable(*s, 2500, [&] { s->claim("c", some_claim(), false); });
  expect_unavailable(*s, 2500, [&] { s->server_time_ms(); });
}

TEST(Unavailable, ServerThatStallsMidConnectionTimesOutAndRecovers) {
  REQUIRE_TEST_SERVER();
  // Find the real server's address, then talk to it through a proxy we can freeze.
  bson_error_t error;
  mongoc_uri_t* uri = mongoc_uri_new_with_error(test_uri()->c_str(), &error);
  ASSERT_NE(uri, nullptr) << error.message;
  const mongoc_host_list_t* host = mongoc_uri_get_hosts(uri);
  ASSERT_NE(host, nullptr);
  FreezableProxy proxy(host->host, host->port);
  mongoc_uri_destroy(uri);

  auto s = storage_at(loopback_uri(proxy.port()), 500);
  ASSERT_NO_THROW(s->read("c", "k"));  // connected, handshake done

  proxy.set_frozen(true);
  expect_unavailable(*s, 2500, [&] { s->read("c", "k"); });
  expect_unavailable(*s, 2500, [&] { s->claim("c", some_claim(), false); });

  proxy.set_frozen(false);
  // Back: the next calls reconnect (serverSelectionTryOnce=false skips the cooldown).
  bool recovered = false;
  for (int i = 0; i < 10 && !recovered; ++i) {
    try {
      s->read("c", "k");
      recovered = true;
    } catch (const StorageUnavailable& e) {
      std::cout << "  retry " << i << ": " << e.what() << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  EXPECT_TRUE(recovered);
}

}  // namespace
}  // namespace mongoelector::storage_test
