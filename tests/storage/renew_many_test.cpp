// Conformance of Storage::renew_many (batched renewal, issue #17) on every backend: a
// request is renewed exactly when renew() would have renewed it, the answer is per
// request, nothing it did not renew is touched, and the cost is fixed: on MongoDB one
// update per distinct expire_ms plus one find per chunk, on SQLite one transaction.
// Also batch_domain() and clock_sample_board(): shared by the storages of one client.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "exceptions.h"
#include "fixture.h"
#include "server_clock.h"
#include "tcp_fixtures.h"

namespace mongoelector::storage_test {
namespace {

using RenewMany = StorageTest;

std::string key_n(std::size_t i) { return "key-" + std::to_string(i); }

// Commands (MongoDB) or transactions (SQLite) that one renew_many of `expiries`
// distinct expire_ms values over at most max_renew_batch() keys costs.
std::int64_t expected_round_trips(std::int64_t expiries) {
  return sqlite_backend() ? 1 : expiries + 1;
}

TEST_F(RenewMany, EachRequestIsAnsweredAloneAndOnlyRenewedHoldsChange) {
  const std::int64_t ttl = 10000;
  // Held by a and renewable (fence checked, and not checked).
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, ttl, "ok-fenced"), false));
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, ttl, "ok-unfenced"), false));
  // Taken over by b (forced): uuid and fence changed.
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, ttl, "stolen"), false));
  ASSERT_TRUE(s->claim(coll, claim_by("b", now + 1, ttl, "stolen"), true));
  // Released by a (the document stays, locked false).
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, ttl, "released"), false));
  ASSERT_TRUE(s->release(coll, "released", std::string("uuid-a"), 1, now + 1, false));
  // Expired before now, and expiring exactly at now (ts_expire <= now is expired).
  ASSERT_TRUE(s->claim(coll, claim_by("a", now - 2 * ttl, ttl, "expired"), false));
  ASSERT_TRUE(s->claim(coll, claim_by("a", now - ttl, ttl, "expires-now"), false));
  // Re-fenced: still a's, but a newer hold (fence 1 -> 7).
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, ttl, "refenced"), false));
  ASSERT_TRUE(s->set_fence(coll, "refenced", "uuid-a", 1, now, 7));
  // "missing" has no document at all.

  const std::vector<std::string> keys{"ok-fenced",   "stolen",   "released", "expired",
                                      "expires-now", "refenced", "missing",  "ok-unfenced"};
  std::map<std::string, std::optional<LockDoc>> before;
  for (const auto& k : keys) before[k] = s->read(coll, k);

  const std::int64_t expire = now + 30000;
  std::vector<RenewRequest> requests;
  for (const auto& k : keys)
    requests.push_back(RenewRequest{k, "uuid-a", k == "ok-unfenced" ? 0 : 1, expire});

  const auto rt = round_trips(*s);
  const std::vector<bool> renewed = s->renew_many(coll, requests, now);
  // MongoDB: fenced and unfenced requests go in separate updates (the fence $in list
  // applies to the first only): 2 updates + 1 find.
  EXPECT_EQ(round_trips(*s) - rt, sqlite_backend() ? 1 : 3);
  const std::vector<bool> want{true, false, false, false, false, false, false, true};
  EXPECT_EQ(renewed, want);

  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string& k = keys[i];
    auto after = s->read(coll, k);
    if (!before[k]) {
      EXPECT_FALSE(after.has_value()) << k << ": a renewal must not create a document";
      continue;
    }
    ASSERT_TRUE(after.has_value()) << k;
    ASSERT_TRUE(after->ts_expire.has_value()) << k;
    if (want[i]) {
      EXPECT_EQ(after->ts_expire->ms, expire) << k;
    } else {
      EXPECT_EQ(after->ts_expire->ms, before[k]->ts_expire->ms) << k << ": not extended";
    }
    EXPECT_EQ(after->locked, before[k]->locked) << k;
    EXPECT_EQ(after->uuid, before[k]->uuid) << k;
    EXPECT_EQ(after->fence, before[k]->fence) << k;
    EXPECT_EQ(after->ts_created, before[k]->ts_created) << k;
  }
}

TEST_F(RenewMany, AgreesWithRenewRequestByRequest) {
  // The same situations renewed one by one in a twin collection give the same answers.
  const std::string twin = coll + "_twin";
  for (const std::string& c : {coll, twin}) {
    ASSERT_TRUE(s->claim(c, claim_by("a", now, 5000, "held"), false));
    ASSERT_TRUE(s->claim(c, claim_by("b", now, 5000, "other"), false));
    ASSERT_TRUE(s->claim(c, claim_by("a", now - 9000, 5000, "old"), false));
  }
  std::vector<RenewRequest> requests{{"held", "uuid-a", 1, now + 7000},
                                     {"other", "uuid-a", 1, now + 7000},
                                     {"old", "uuid-a", 1, now + 8000},
                                     {"held-too", "uuid-a", 0, now + 8000}};
  const std::vector<bool> batched = s->renew_many(coll, requests, now);
  std::vector<bool> single;
  for (const auto& r : requests)
    single.push_back(s->renew(twin, r.key, r.uuid, r.fence, now, r.expire_ms));
  EXPECT_EQ(batched, single);
  EXPECT_EQ(batched, (std::vector<bool>{true, false, false, false}));
}

// A request whose hold already expires later than asked (a newer renewal of it landed
// first) is renewed -- the server keeps it at least that long -- and keeps its expiry;
// the same later expiry on another's hold is not ours.
TEST_F(RenewMany, AnAlreadyLaterHoldIsRenewedAndNothingIsLowered) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000, "later"), false));
  ASSERT_TRUE(s->renew(coll, "later", "uuid-a", 1, now, now + 30000));
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000, "plain"), false));
  ASSERT_TRUE(s->claim(coll, claim_by("b", now, 30000, "theirs"), false));
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000, "later-unfenced"), false));
  ASSERT_TRUE(s->renew(coll, "later-unfenced", "uuid-a", 1, now, now + 30000));
  const std::vector<RenewRequest> requests{{"later", "uuid-a", 1, now + 20000},
                                           {"plain", "uuid-a", 1, now + 20000},
                                           {"theirs", "uuid-a", 1, now + 20000},
                                           {"later-unfenced", "uuid-a", 0, now + 20000}};
  EXPECT_EQ(s->renew_many(coll, requests, now), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(s->read(coll, "later")->ts_expire->ms, now + 30000);
  EXPECT_EQ(s->read(coll, "plain")->ts_expire->ms, now + 20000);
  EXPECT_EQ(s->read(coll, "theirs")->ts_expire->ms, now + 30000);
  EXPECT_EQ(s->read(coll, "theirs")->uuid, "uuid-b");
  EXPECT_EQ(s->read(coll, "later-unfenced")->ts_expire->ms, now + 30000);
}

TEST_F(RenewMany, OneExpiryCostsTwoCommandsTwoExpiriesThreeSqliteOneTransaction) {
  const std::size_t n = 20;
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000, key_n(i)), false));

  std::vector<RenewRequest> one;
  for (std::size_t i = 0; i < n; ++i) one.push_back({key_n(i), "uuid-a", 1, now + 20000});
  auto rt = round_trips(*s);
  EXPECT_EQ(s->renew_many(coll, one, now), std::vector<bool>(n, true));
  EXPECT_EQ(round_trips(*s) - rt, expected_round_trips(1)) << "N keys, one ttl";

  // Two ttls interleaved: one update each, still one find.
  std::vector<RenewRequest> two;
  for (std::size_t i = 0; i < n; ++i)
    two.push_back({key_n(i), "uuid-a", 1, now + (i % 2 ? 25000 : 26000)});
  rt = round_trips(*s);
  EXPECT_EQ(s->renew_many(coll, two, now + 1), std::vector<bool>(n, true));
  EXPECT_EQ(round_trips(*s) - rt, expected_round_trips(2)) << "N keys, two ttls";
  for (std::size_t i = 0; i < n; ++i) {
    auto doc = s->read(coll, key_n(i));
    ASSERT_TRUE(doc && doc->ts_expire);
    EXPECT_EQ(doc->ts_expire->ms, two[i].expire_ms) << key_n(i);
  }

  // Nothing to do costs nothing.
  rt = round_trips(*s);
  EXPECT_TRUE(s->renew_many(coll, {}, now).empty());
  EXPECT_EQ(round_trips(*s) - rt, 0);
}

TEST_F(RenewMany, AThousandKeysInOneBatchAndLargerBatchesInChunks) {
  // A call bound that lets this test measure rather than time out on a slow server.
  s = open_test_storage(30000);
  // FerretDB's batches are smaller (Storage::renew_batch_for), once the server is known.
  const bool ferretdb = s->server_info().name == "FerretDB";
  const std::size_t max = s->max_renew_batch();
  ASSERT_EQ(max, ferretdb ? 50u : 1000u);
  const std::size_t n = max + 1;
  if (sqlite_backend()) {
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_TRUE(s->claim(coll, claim_by("a", now, 60000, key_n(i)), false));
  } else {
    // One insert instead of n claims (what claim() writes, fence 1).
    std::string docs;
    for (std::size_t i = 0; i < n; ++i) {
      if (i) docs += ",";
      docs += R"({"_id": ")" + key_n(i) +
              R"(", "locked": true, "host": "host-a", "uuid": "uuid-a", "pid": 4242, )"
              R"("ts_created": {"$date": {"$numberLong": ")" +
              std::to_string(now) + R"("}}, "ts_expire": {"$date": {"$numberLong": ")" +
              std::to_string(now + 60000) + R"("}}, "fence": {"$numberLong": "1"}})";
    }
    raw().insert(coll, docs);
  }

  std::vector<RenewRequest> requests;
  for (std::size_t i = 0; i < max; ++i) requests.push_back({key_n(i), "uuid-a", 1, now + 70000});
  auto rt = round_trips(*s);
  auto start = std::chrono::steady_clock::now();
  const std::vector<bool> renewed = s->renew_many(coll, requests, now);
  const auto ms = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count() /
                  1000.0;
  const auto used = round_trips(*s) - rt;
  std::cout << "  renew_many of " << max << " keys on " << s->server_info().name << ": " << used
            << " round trips, " << ms << " ms" << std::endl;
  EXPECT_EQ(renewed, std::vector<bool>(max, true));
  EXPECT_EQ(used, expected_round_trips(1));
  for (std::size_t i : {std::size_t{0}, max / 2, max - 1}) {
    auto doc = s->read(coll, key_n(i));
    ASSERT_TRUE(doc && doc->ts_expire);
    EXPECT_EQ(doc->ts_expire->ms, now + 70000);
  }
  auto last = s->read(coll, key_n(max));
  ASSERT_TRUE(last && last->ts_expire);
  EXPECT_EQ(last->ts_expire->ms, now + 60000) << "not in the batch: not renewed";

  // One more than the limit: split into chunks (MongoDB: update + find per chunk).
  requests.push_back({key_n(max), "uuid-a", 1, now + 70000});
  for (auto& r : requests) r.expire_ms = now + 80000;
  requests[3].uuid = "uuid-b";  // one wrong request among them
  rt = round_trips(*s);
  std::vector<bool> want(n, true);
  want[3] = false;
  EXPECT_EQ(s->renew_many(coll, requests, now), want);
  EXPECT_EQ(round_trips(*s) - rt, sqlite_backend() ? 1 : 4);
}

TEST_F(RenewMany, BadKeysAreRefusedBeforeAnythingIsSent) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000, "good"), false));
  const auto before = s->read(coll, "good");
  std::vector<RenewRequest> requests{{"good", "uuid-a", 1, now + 20000},
                                     {std::string("bad\xff", 4), "uuid-a", 1, now + 30000}};
  const auto rt = round_trips(*s);
  EXPECT_THROW(s->renew_many(coll, requests, now), InvalidArgument);
  EXPECT_EQ(round_trips(*s) - rt, 0);
  EXPECT_EQ(s->read(coll, "good")->ts_expire, before->ts_expire);
}

TEST(RenewManyFailure, AnUnreachableServerFailsTheWholeCall) {
  REQUIRE_TEST_SERVER();
  ClosedPort closed;
  MongoStorageOptions o;
  o.uri = "mongodb://127.0.0.1:" + std::to_string(closed.port()) + "/";
  o.database = test_database();
  o.op_timeout_ms = 200;
  MongoStorage storage(o);
  EXPECT_THROW(storage.renew_many("c", {{"k", "u", 1, 5000}, {"j", "u", 1, 5000}}, 1000),
               StorageUnavailable);
}

// ---- batch_domain() and clock_sample_board() ----

TEST(RenewManyDomain, MongoStoragesOfOneClientShareOneDomainAndBoard) {
  REQUIRE_TEST_SERVER();
  auto client = MongoClient::open(*test_uri(), test_database());
  MongoStorage a(client, 5000), b(client, 300);  // different pools, one client
  EXPECT_EQ(a.batch_domain(), b.batch_domain());
  ASSERT_NE(a.clock_sample_board(), nullptr);
  EXPECT_EQ(a.clock_sample_board(), b.clock_sample_board());
  EXPECT_NE(a.batch_domain(), static_cast<const void*>(&a));

  // Same database through another client, and another database: other domains.
  auto other_client = MongoClient::open(*test_uri(), test_database());
  MongoStorage c(other_client, 5000);
  auto other_db = MongoClient::open(*test_uri(), test_database() + "_other");
  MongoStorage d(other_db, 5000);
  EXPECT_NE(c.batch_domain(), a.batch_domain());
  EXPECT_NE(d.batch_domain(), a.batch_domain());
  EXPECT_NE(d.batch_domain(), c.batch_domain());
  EXPECT_NE(d.clock_sample_board(), a.clock_sample_board());
  ASSERT_NE(d.clock_sample_board(), nullptr);

  // The domain outlives any one storage of the client.
  const void* domain = a.batch_domain();
  {
    MongoStorage e(client, 5000);
    EXPECT_EQ(e.batch_domain(), domain);
  }
  EXPECT_EQ(MongoStorage(client, 1000).batch_domain(), domain);
}

TEST(RenewManyDomain, SqliteStoragesOfOneClientShareOneDomainAndBoard) {
  REQUIRE_TEST_BACKEND();
  if (!sqlite_backend()) GTEST_SKIP() << "SQLite-specific; the backend is a server";
  auto client = SqliteClient::open(test_sqlite_uri());
  auto a = client->open_storage(1000), b = client->open_storage(200);
  EXPECT_EQ(a->batch_domain(), b->batch_domain());
  ASSERT_NE(a->clock_sample_board(), nullptr);
  EXPECT_EQ(a->clock_sample_board(), b->clock_sample_board());
  // Another client (another connection) of the same file: another domain.
  auto other = SqliteClient::open(test_sqlite_uri())->open_storage(1000);
  EXPECT_NE(other->batch_domain(), a->batch_domain());
  EXPECT_NE(other->clock_sample_board(), a->clock_sample_board());
}

TEST_F(RenewMany, OneStorageRenewsWhatAnotherOfItsDomainClaimed) {
  // What batching relies on: any storage of the domain may carry the others' renewals.
  std::shared_ptr<Storage> a, b;
  if (sqlite_backend()) {
    auto client = SqliteClient::open(test_sqlite_uri());
    a = client->open_storage(1000);
    b = client->open_storage(2000);
  } else {
    auto client = MongoClient::open(*test_uri(), test_database());
    a = std::make_shared<MongoStorage>(client, 1000);
    b = std::make_shared<MongoStorage>(client, 2000);
  }
  ASSERT_EQ(a->batch_domain(), b->batch_domain());
  ASSERT_TRUE(a->claim(coll, claim_by("a", now, 10000, "x"), false));
  ASSERT_TRUE(b->claim(coll, claim_by("b", now, 10000, "y"), false));
  EXPECT_EQ(
      b->renew_many(coll, {{"x", "uuid-a", 1, now + 20000}, {"y", "uuid-b", 1, now + 20000}}, now),
      (std::vector<bool>{true, true}));
  EXPECT_EQ(a->read(coll, "x")->ts_expire->ms, now + 20000);
}

}  // namespace
}  // namespace mongoelector::storage_test
