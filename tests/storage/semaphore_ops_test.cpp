// Conformance of the semaphore operations of the Storage interface (read_semaphore,
// create_semaphore, claim_semaphore, renew_semaphore, release_semaphore) on every
// backend: the one MONGOELECTOR_TEST_URI names (MongoDB through libmongoc, or SQLite)
// and MemoryStorage (always). The pymongo transport runs the same operations from
// tests/python/test_semaphore.py.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "fixture.h"
#include "storage/memory_storage.h"
#include "storage/semaphore_doc.h"

namespace mongoelector::storage_test {
namespace {

constexpr std::int64_t kEpoch = std::int64_t{1} << 32;

class SemaphoreOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (memory()) {
      auto m = std::make_shared<MemoryStorage>();
      m->set_server_time(1700000000000);
      s = m;
    } else {
      REQUIRE_TEST_BACKEND();
      s = open_test_storage();
    }
    coll = std::string("sem_") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (auto& c : coll)
      if (c == '/') c = '_';
    now = s->server_time_ms();
  }
  bool memory() const { return GetParam() == "memory"; }
  std::int64_t trips() const {
    if (auto* m = dynamic_cast<const MemoryStorage*>(s.get())) return m->round_trips();
    return round_trips(*s);
  }

  SemaphoreClaim by(const std::string& who, std::int64_t slot, std::int64_t old_fence,
                    std::int64_t new_fence, std::int64_t at_ms, std::int64_t ttl_ms = 10000,
                    std::int64_t limit = 3) const {
    SemaphoreClaim c;
    c.key = "pool";
    c.limit = limit;
    c.slot = slot;
    c.old_fence = old_fence;
    c.new_fence = new_fence;
    c.uuid = "uuid-" + who;
    c.host = "host-" + who;
    c.pid = 4242;
    c.now_ms = at_ms;
    c.expire_ms = at_ms + ttl_ms;
    return c;
  }
  // Documents written by someone else: through libmongoc, or as a stored SQLite row.
  void raw_insert(const std::string& json) {
    if (auto* q = dynamic_cast<SqliteStorage*>(s.get())) {
      q->put_document(coll, document_json::decode(json, "test document"));
    } else {
      RawClient(*test_uri(), test_database()).insert(coll, json);
    }
  }
  std::string raw_command(const std::string& json) {
    return RawClient(*test_uri(), test_database()).command(json);
  }
  SemaphoreDoc must_read() {
    auto d = s->read_semaphore(coll, "pool");
    if (!d) throw std::runtime_error("no semaphore document");
    return *d;
  }

  std::shared_ptr<Storage> s;
  std::string coll;
  std::int64_t now = 0;
};

TEST_P(SemaphoreOps, ReadOfAnAbsentKeyIsNullopt) {
  EXPECT_FALSE(s->read_semaphore(coll, "pool").has_value());
}

TEST_P(SemaphoreOps, CreateWritesLimitSlotsWithTheClaimInItsSlot) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 1, 0, kEpoch, now)));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.key, "pool");
  EXPECT_EQ(d.limit, 3);
  EXPECT_EQ(d.fence, kEpoch);
  ASSERT_EQ(d.slots.size(), 3u);
  const SemaphoreSlot& a = d.slots[1];
  EXPECT_EQ(a.uuid, "uuid-a");
  EXPECT_EQ(a.host, "host-a");
  EXPECT_EQ(a.pid, 4242);
  EXPECT_EQ(a.fence, kEpoch);
  ASSERT_TRUE(a.ts_created && a.ts_expire);
  EXPECT_EQ(a.ts_created->ms, now);
  EXPECT_EQ(a.ts_expire->ms, now + 10000);
  for (std::size_t i : {0u, 2u}) {
    EXPECT_EQ(d.slots[i].uuid, "");
    EXPECT_EQ(d.slots[i].fence, 0);
    EXPECT_FALSE(d.slots[i].held_at(0)) << "an empty slot is free at any time";
  }
}

TEST_P(SemaphoreOps, CreateOfAnExistingKeyReturnsFalseAndChangesNothing) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now)));
  EXPECT_FALSE(s->create_semaphore(coll, by("b", 0, 0, 2 * kEpoch, now, 10000, 5)));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.limit, 3);
  EXPECT_EQ(d.fence, kEpoch);
  EXPECT_EQ(d.slots[0].uuid, "uuid-a");
}

TEST_P(SemaphoreOps, ClaimFillsAFreeSlotAndMovesTheFence) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now)));
  EXPECT_TRUE(s->claim_semaphore(coll, by("b", 2, kEpoch, kEpoch + 1, now + 5)));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.fence, kEpoch + 1);
  EXPECT_EQ(d.slots[0].uuid, "uuid-a");
  EXPECT_EQ(d.slots[0].fence, kEpoch);
  EXPECT_EQ(d.slots[2].uuid, "uuid-b");
  EXPECT_EQ(d.slots[2].host, "host-b");
  EXPECT_EQ(d.slots[2].fence, kEpoch + 1);
  EXPECT_EQ(d.slots[2].ts_created->ms, now + 5);
  EXPECT_EQ(d.slots[2].ts_expire->ms, now + 10005);
  EXPECT_EQ(d.slots[1].uuid, "") << "other slots untouched";
}

TEST_P(SemaphoreOps, ClaimIsACompareAndSetOnTheFenceAndTheLimit) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now)));
  // A claimant whose copy is old (someone claimed since): no match, nothing written.
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now)));
  EXPECT_FALSE(s->claim_semaphore(coll, by("c", 2, kEpoch, kEpoch + 1, now)));
  // Another limit: no match.
  EXPECT_FALSE(s->claim_semaphore(coll, by("c", 2, kEpoch + 1, kEpoch + 2, now, 10000, 4)));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.fence, kEpoch + 1);
  EXPECT_EQ(d.slots[2].uuid, "");
  EXPECT_TRUE(s->claim_semaphore(coll, by("c", 2, kEpoch + 1, kEpoch + 2, now)));
  // No document: no match (and none created).
  SemaphoreClaim other = by("d", 0, 0, 1, now);
  other.key = "other";
  EXPECT_FALSE(s->claim_semaphore(coll, other));
  EXPECT_FALSE(s->read_semaphore(coll, "other").has_value());
}

TEST_P(SemaphoreOps, AHeldSlotIsClaimedOnlyFromItsExpiry) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  EXPECT_FALSE(s->claim_semaphore(coll, by("b", 0, kEpoch, kEpoch + 1, now + 999)));
  EXPECT_EQ(must_read().slots[0].uuid, "uuid-a");
  // ts_expire <= now is free: exactly at expiry it can be taken.
  EXPECT_TRUE(s->claim_semaphore(coll, by("b", 0, kEpoch, kEpoch + 1, now + 1000)));
  EXPECT_EQ(must_read().slots[0].uuid, "uuid-b");
}

TEST_P(SemaphoreOps, RenewNamesSlotUuidAndFenceAndNeedsAnUnexpiredSlot) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  EXPECT_FALSE(s->renew_semaphore(coll, "pool", 0, "uuid-x", kEpoch, now, now + 5000));
  EXPECT_FALSE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch + 1, now, now + 5000));
  EXPECT_FALSE(s->renew_semaphore(coll, "pool", 1, "uuid-a", kEpoch, now, now + 5000));
  EXPECT_FALSE(s->renew_semaphore(coll, "other", 0, "uuid-a", kEpoch, now, now + 5000));
  EXPECT_EQ(must_read().slots[0].ts_expire->ms, now + 1000);
  EXPECT_TRUE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now + 500, now + 5000));
  EXPECT_EQ(must_read().slots[0].ts_expire->ms, now + 5000);
  // An expired slot is not revived.
  EXPECT_FALSE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now + 5000, now + 9000));
  EXPECT_EQ(must_read().slots[0].ts_expire->ms, now + 5000);
}

// Monotonic, as for locks: a late renewal of the same hold matches and lowers nothing.
TEST_P(SemaphoreOps, ARenewalNeverLowersASlotsExpiry) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now, 1000)));
  EXPECT_TRUE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now + 500, now + 9000));
  EXPECT_TRUE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now + 200, now + 5000))
      << "the late one: still our hold";
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.slots[0].ts_expire->ms, now + 9000);
  EXPECT_EQ(d.slots[1].ts_expire->ms, now + 1000) << "other slots untouched";
  EXPECT_FALSE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch + 1, now + 200, now + 5000));
  EXPECT_EQ(must_read().slots[0].ts_expire->ms, now + 9000);
}

TEST_P(SemaphoreOps, ReleaseNamesSlotUuidAndFenceAndEmptiesTheSlot) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now)));
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now)));
  EXPECT_FALSE(s->release_semaphore(coll, "pool", 0, "uuid-b", kEpoch + 1));  // wrong slot
  EXPECT_FALSE(s->release_semaphore(coll, "pool", 0, "uuid-a", kEpoch + 1));  // wrong fence
  EXPECT_FALSE(s->release_semaphore(coll, "pool", 0, "uuid-b", kEpoch));      // wrong uuid
  EXPECT_FALSE(s->release_semaphore(coll, "nope", 0, "uuid-a", kEpoch));
  EXPECT_TRUE(s->release_semaphore(coll, "pool", 0, "uuid-a", kEpoch));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.slots[0].uuid, "");
  EXPECT_EQ(d.slots[0].fence, 0);
  EXPECT_FALSE(d.slots[0].held_at(now));
  EXPECT_EQ(d.slots[1].uuid, "uuid-b");
  EXPECT_EQ(d.fence, kEpoch + 1) << "the counter survives releases";
  // A second (late) release of the same hold finds nothing.
  EXPECT_FALSE(s->release_semaphore(coll, "pool", 0, "uuid-a", kEpoch));
  // A released slot is free at once, whatever the claimant's clock.
  EXPECT_TRUE(s->claim_semaphore(coll, by("c", 0, kEpoch + 1, kEpoch + 2, now - 60000)));
}

TEST_P(SemaphoreOps, OneRoundTripPerOperation) {
  std::int64_t before = trips();
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now)));
  EXPECT_EQ(trips() - before, 1);
  before = trips();
  ASSERT_TRUE(s->read_semaphore(coll, "pool"));
  EXPECT_EQ(trips() - before, 1);
  before = trips();
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now)));
  EXPECT_EQ(trips() - before, 1);
  before = trips();
  ASSERT_TRUE(s->renew_semaphore(coll, "pool", 1, "uuid-b", kEpoch + 1, now, now + 20000));
  EXPECT_EQ(trips() - before, 1);
  before = trips();
  ASSERT_TRUE(s->release_semaphore(coll, "pool", 1, "uuid-b", kEpoch + 1));
  EXPECT_EQ(trips() - before, 1);
  before = trips();
  EXPECT_FALSE(s->create_semaphore(coll, by("c", 0, 0, kEpoch, now)));  // E11000
  EXPECT_EQ(trips() - before, 1);
}

TEST_P(SemaphoreOps, ConcurrentClaimsOfOneVersionHaveExactlyOneWinner) {
  if (test_server_kind() == "ferretdb" && !memory())
    GTEST_SKIP() << "FerretDB's updates are not atomic (semaphores refuse it by default)";
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now)));
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<Storage>> stores;
  for (int i = 0; i < kThreads; ++i)
    stores.push_back(memory() ? s : std::shared_ptr<Storage>(open_test_storage()));
  for (int round = 0; round < 5; ++round) {
    const std::int64_t f = must_read().fence;
    std::atomic<int> wins{0}, go{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        ++go;
        while (go.load() < kThreads) std::this_thread::yield();
        // Every thread aims at a free slot of the same version (slots 1 and 2 alternate).
        SemaphoreClaim c =
            by("t" + std::to_string(i), 1 + (i + round) % 2, f, f + 1, now + 100000 * (round + 1));
        if (stores[static_cast<std::size_t>(i)]->claim_semaphore(coll, c)) ++wins;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(must_read().fence, f + 1);
  }
}

TEST_P(SemaphoreOps, NumbersWrittenAsInt32ByOtherClientsStillMatch) {
  if (memory()) GTEST_SKIP() << "a stored document of another client: database backends only";
  // What pymongo writes for small Python ints (int32), as Extended JSON.
  const std::string slot0 =
      R"({"uuid": "uuid-a", "host": "h", "pid": 7, "fence": {"$numberLong": "4294967296"},)"
      R"( "ts_created": {"$date": {"$numberLong": "0"}},)"
      R"( "ts_expire": {"$date": {"$numberLong": ")" +
      std::to_string(now + 10000) + R"("}}})";
  const std::string empty =
      R"({"uuid": "", "host": "", "pid": 0, "fence": 0, "ts_created": {"$date": {"$numberLong": "0"}},)"
      R"( "ts_expire": {"$date": {"$numberLong": "0"}}})";
  if (sqlite_backend()) {
    // The SQLite row is the flat form: write it as such.
    SemaphoreDoc d;
    d.key = "pool";
    d.limit = 2;
    d.fence = kEpoch;
    SemaphoreSlot a;
    a.uuid = "uuid-a";
    a.host = "h";
    a.pid = 7;
    a.fence = kEpoch;
    a.ts_created = DateTime{0};
    a.ts_expire = DateTime{now + 10000};
    d.slots = {a, semaphore_doc::empty_slot()};
    raw_insert(document_json::encode(semaphore_doc::to_flat(d)));
  } else {
    raw_insert(R"({"_id": "pool", "limit": 2, "fence": {"$numberLong": "4294967296"},)"
               R"( "slots": [)" +
               slot0 + ", " + empty + "]}");
  }
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.limit, 2);
  EXPECT_EQ(d.slots[0].pid, 7);
  EXPECT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now, 10000, 2)));
  EXPECT_TRUE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now, now + 20000));
}

TEST_P(SemaphoreOps, StoredShapeOnMongoDB) {
  if (memory() || sqlite_backend()) GTEST_SKIP() << "the BSON document: MongoDB only";
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now)));
  const std::string reply =
      raw_command(R"({"find": ")" + coll + R"(", "filter": {"_id": "pool"}})");
  for (const char* want : {R"("limit" : 3)", R"("slots" : [ { "uuid" : "uuid-a")",
                           R"("fence" : 4294967296)", R"("ts_expire" : { "$date")"})
    EXPECT_NE(reply.find(want), std::string::npos) << want << " not in " << reply;
}

TEST_P(SemaphoreOps, InvalidClaimsAreRefusedBeforeAnythingIsSent) {
  EXPECT_THROW(s->create_semaphore(coll, by("a", 3, 0, kEpoch, now)), InvalidArgument);
  EXPECT_THROW(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000, 0)), InvalidArgument);
  EXPECT_FALSE(s->read_semaphore(coll, "pool").has_value());
}

// ---- renew_semaphores: the batched renewal of semaphore slots ----------------------

SemaphoreRenewRequest slot_renewal(const std::string& key, std::int64_t slot,
                                   const std::string& who, std::int64_t fence,
                                   std::int64_t expire_ms) {
  return SemaphoreRenewRequest{key, slot, "uuid-" + who, fence, expire_ms};
}

TEST_P(SemaphoreOps, RenewSemaphoresRenewsEachNamedSlot) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now, 1000)));
  auto other = by("c", 0, 0, kEpoch, now, 1000);
  other.key = "other";
  ASSERT_TRUE(s->create_semaphore(coll, other));
  const std::vector<bool> r = s->renew_semaphores(
      coll,
      {slot_renewal("pool", 0, "a", kEpoch, now + 5000),  // two slots of one key
       slot_renewal("pool", 1, "b", kEpoch + 1, now + 6000),
       slot_renewal("other", 0, "c", kEpoch, now + 7000)},
      now + 500);
  EXPECT_EQ(r, (std::vector<bool>{true, true, true}));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.slots[0].ts_expire->ms, now + 5000);
  EXPECT_EQ(d.slots[1].ts_expire->ms, now + 6000);
  EXPECT_EQ(s->read_semaphore(coll, "other")->slots[0].ts_expire->ms, now + 7000);
}

TEST_P(SemaphoreOps, RenewSemaphoresNeedsSlotUuidFenceAndAnUnexpiredSlot) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now, 1000)));
  const std::vector<bool> r = s->renew_semaphores(
      coll,
      {slot_renewal("pool", 1, "a", kEpoch, now + 5000),       // another slot
       slot_renewal("pool", 0, "x", kEpoch, now + 5000),       // another uuid
       slot_renewal("pool", 0, "a", kEpoch + 1, now + 5000),   // another fence
       slot_renewal("nope", 0, "a", kEpoch, now + 5000),       // no document
       slot_renewal("pool", 1, "b", kEpoch + 1, now + 5000)},  // this one is fine
      now + 500);
  EXPECT_EQ(r, (std::vector<bool>{false, false, false, false, true}));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.slots[0].ts_expire->ms, now + 1000) << "slot 0 untouched";
  EXPECT_EQ(d.slots[1].ts_expire->ms, now + 5000);
  // An expired slot is not revived.
  EXPECT_EQ(
      s->renew_semaphores(coll, {slot_renewal("pool", 0, "a", kEpoch, now + 9000)}, now + 1000),
      std::vector<bool>{false});
  EXPECT_EQ(must_read().slots[0].ts_expire->ms, now + 1000);
}

TEST_P(SemaphoreOps, RenewSemaphoresNeverLowersAnExpiry) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  ASSERT_TRUE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now, now + 9000));
  // A late batch of the same hold: matched, lowers nothing, and reported renewed (the
  // slot is kept at least as long as it asked).
  EXPECT_EQ(
      s->renew_semaphores(coll, {slot_renewal("pool", 0, "a", kEpoch, now + 5000)}, now + 200),
      std::vector<bool>{true});
  EXPECT_EQ(must_read().slots[0].ts_expire->ms, now + 9000);
}

TEST_P(SemaphoreOps, RenewSemaphoresOfAnEmptyBatchSendsNothing) {
  const std::int64_t before = trips();
  EXPECT_TRUE(s->renew_semaphores(coll, {}, now).empty());
  EXPECT_EQ(trips() - before, 0);
}

TEST_P(SemaphoreOps, RenewSemaphoresIsTwoRoundTripsForManySlots) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 10000)));
  std::vector<SemaphoreRenewRequest> batch{slot_renewal("pool", 0, "a", kEpoch, now + 20000)};
  for (std::int64_t i = 1; i < 3; ++i) {
    ASSERT_TRUE(s->claim_semaphore(
        coll, by("s" + std::to_string(i), i, kEpoch + i - 1, kEpoch + i, now, 10000)));
    batch.push_back(slot_renewal("pool", i, "s" + std::to_string(i), kEpoch + i, now + 20000));
  }
  const std::int64_t before = trips();
  EXPECT_EQ(s->renew_semaphores(coll, batch, now + 1), (std::vector<bool>{true, true, true}));
  // One bulk update and one find on a server; one call (one transaction) elsewhere.
  if (memory() || dynamic_cast<SqliteStorage*>(s.get()) != nullptr)
    EXPECT_LE(trips() - before, 1);
  else
    EXPECT_EQ(trips() - before, 2);
  for (const auto& slot : must_read().slots) EXPECT_EQ(slot.ts_expire->ms, now + 20000);
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Backends, SemaphoreOps, ::testing::Values("env", "memory"), name_of);

}  // namespace
}  // namespace mongoelector::storage_test
