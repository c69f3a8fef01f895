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
#include "hold/acquire_run.h"
#include "lock_queue.h"
#include "locker.h"
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

SemaphoreRenewRequest slot_renewal(const std::string& key, std::int64_t slot,
                                   const std::string& who, std::int64_t fence,
                                   std::int64_t expire_ms) {
  return SemaphoreRenewRequest{key, slot, "uuid-" + who, fence, expire_ms};
}

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

// ---- clear_slots: a claim that empties other slots in the same write ----------------

TEST_P(SemaphoreOps, AClaimEmptiesItsClearSlotsInTheSameWrite) {
  // Slots 0 and 1 taken, both expired by now + 2000; slot 2 empty.
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now, 1000)));
  SemaphoreClaim c = by("w", 2, kEpoch + 1, kEpoch + 2, now + 2000);
  c.clear_slots = {SlotClear{0, 0}, SlotClear{1, 0}};
  ASSERT_TRUE(s->claim_semaphore(coll, c));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.fence, kEpoch + 2);
  EXPECT_EQ(d.slots[2].uuid, "uuid-w");
  for (std::size_t i : {0u, 1u}) {
    EXPECT_EQ(d.slots[i].uuid, "") << i;
    EXPECT_EQ(d.slots[i].fence, 0) << i;
    EXPECT_TRUE(semaphore_doc::is_empty(d.slots[i])) << i;
  }
  // A late renewal of an emptied hold (its renewer's now is before the old expiry)
  // matches nothing: the hold is not revived next to the claim.
  EXPECT_FALSE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now + 500, now + 10500));
  EXPECT_EQ(
      s->renew_semaphores(coll, {slot_renewal("pool", 1, "b", kEpoch + 1, now + 10500)}, now + 500),
      std::vector<bool>{false});
  d = must_read();
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[0]));
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[1]));
}

TEST_P(SemaphoreOps, AClaimWhoseClearSlotIsHeldWritesNothing) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  ASSERT_TRUE(s->claim_semaphore(coll, by("b", 1, kEpoch, kEpoch + 1, now, 5000)));
  // Slot 1 is held until now + 5000: a claim at now + 2000 relying on it is refused...
  SemaphoreClaim c = by("w", 2, kEpoch + 1, kEpoch + 2, now + 2000);
  c.clear_slots = {SlotClear{0, 0}, SlotClear{1, 0}};
  EXPECT_FALSE(s->claim_semaphore(coll, c));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.fence, kEpoch + 1);
  EXPECT_EQ(d.slots[0].uuid, "uuid-a") << "nothing emptied";
  EXPECT_EQ(d.slots[1].uuid, "uuid-b");
  EXPECT_EQ(d.slots[2].uuid, "");
  // ... and so is one whose clear slot was renewed after the claimant's read (the
  // compare-and-set on the fence does not see renewals; the clear filter does).
  ASSERT_TRUE(s->renew_semaphore(coll, "pool", 0, "uuid-a", kEpoch, now + 500, now + 3000));
  c.now_ms = now + 2000;
  c.clear_slots = {SlotClear{0, 0}};
  EXPECT_FALSE(s->claim_semaphore(coll, c));
  EXPECT_EQ(must_read().slots[0].ts_expire->ms, now + 3000);
  c.now_ms = c.expire_ms = now + 3000;  // free at its expiry
  c.expire_ms += 10000;
  EXPECT_TRUE(s->claim_semaphore(coll, c));
  EXPECT_TRUE(semaphore_doc::is_empty(must_read().slots[0]));
}

TEST_P(SemaphoreOps, AClaimMayEmptyTheClaimantsOwnLiveHoldNamedByItsFence) {
  // The read-write lock's waiting mark: slot 2 held by w itself, emptied by w's claim.
  ASSERT_TRUE(s->create_semaphore(coll, by("w", 2, 0, kEpoch, now, 10000)));
  SemaphoreClaim c = by("w", 0, kEpoch, kEpoch + 1, now + 100);
  c.clear_slots = {SlotClear{2, kEpoch + 7}};  // not its fence: the live slot is not ours
  EXPECT_FALSE(s->claim_semaphore(coll, c));
  SemaphoreClaim other = by("x", 0, kEpoch, kEpoch + 1, now + 100);
  other.clear_slots = {SlotClear{2, kEpoch}};  // its fence, another uuid
  EXPECT_FALSE(s->claim_semaphore(coll, other));
  EXPECT_EQ(must_read().slots[2].uuid, "uuid-w");
  c.clear_slots = {SlotClear{2, kEpoch}, SlotClear{1, 0}};
  ASSERT_TRUE(s->claim_semaphore(coll, c));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.slots[0].uuid, "uuid-w");
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[2]));
  // Own or free: once expired, any claimant may empty it (two $or conditions at once).
  ASSERT_TRUE(s->claim_semaphore(coll, by("w", 2, kEpoch + 1, kEpoch + 2, now + 200, 1000)));
  SemaphoreClaim y = by("y", 1, kEpoch + 2, kEpoch + 3, now + 5000);
  y.clear_slots = {SlotClear{2, kEpoch + 99}, SlotClear{0, kEpoch + 98}};
  EXPECT_FALSE(s->claim_semaphore(coll, y)) << "slot 0 is w's, live until now + 10100";
  y.now_ms = now + 10100;
  y.expire_ms = y.now_ms + 10000;
  ASSERT_TRUE(s->claim_semaphore(coll, y));
  d = must_read();
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[0]));
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[2]));
  EXPECT_EQ(d.slots[1].uuid, "uuid-y");
}

TEST_P(SemaphoreOps, BadClearSlotsAreRefused) {
  ASSERT_TRUE(s->create_semaphore(coll, by("a", 0, 0, kEpoch, now, 1000)));
  SemaphoreClaim c = by("w", 2, kEpoch, kEpoch + 1, now + 2000);
  c.clear_slots = {SlotClear{2, 0}};  // the claimed slot itself
  EXPECT_THROW(s->claim_semaphore(coll, c), InvalidArgument);
  c.clear_slots = {SlotClear{0, 0}, SlotClear{0, 0}};  // twice
  EXPECT_THROW(s->claim_semaphore(coll, c), InvalidArgument);
  c.clear_slots = {SlotClear{-1, 0}};
  EXPECT_THROW(s->claim_semaphore(coll, c), InvalidArgument);
  EXPECT_EQ(must_read().fence, kEpoch);
  EXPECT_EQ(must_read().slots[0].uuid, "uuid-a");
}

TEST_P(SemaphoreOps, ARwLockDocumentHasItsKindAndTwoMoreSlots) {
  SemaphoreClaim c = by("w", 3, 0, kEpoch, now);  // limit 3: readers 0..2, writer 3, mark 4
  c.kind = semaphore_doc::kRwLockKind;
  ASSERT_TRUE(s->create_semaphore(coll, c));
  SemaphoreDoc d = must_read();
  EXPECT_EQ(d.kind, "rwlock");
  EXPECT_EQ(d.limit, 3);
  ASSERT_EQ(d.slots.size(), 5u);
  EXPECT_EQ(d.slots[3].uuid, "uuid-w");
  EXPECT_EQ(semaphore_doc::malformed(d), "");
  // Claims of its slots as of any other document's (limit is the readers').
  EXPECT_TRUE(s->claim_semaphore(coll, by("m", 4, kEpoch, kEpoch + 1, now)));
  // A semaphore's document has no kind.
  auto sem = by("a", 0, 0, kEpoch, now);
  sem.key = "plain";
  ASSERT_TRUE(s->create_semaphore(coll, sem));
  EXPECT_EQ(s->read_semaphore(coll, "plain")->kind, "");
  EXPECT_EQ(s->read_semaphore(coll, "plain")->slots.size(), 3u);
  if (!memory() && !sqlite_backend()) {  // the BSON documents
    const std::string rw = raw_command(R"({"find": ")" + coll + R"(", "filter": {"_id": "pool"}})");
    EXPECT_NE(rw.find(R"("kind" : "rwlock")"), std::string::npos) << rw;
    const std::string plain =
        raw_command(R"({"find": ")" + coll + R"(", "filter": {"_id": "plain"}})");
    EXPECT_EQ(plain.find(R"("kind")"), std::string::npos) << plain;
  }
  // A slot beyond the document's: refused before anything is sent.
  c.key = "other";
  c.slot = 5;
  EXPECT_THROW(s->create_semaphore(coll, c), InvalidArgument);
  c.slot = 0;
  c.kind = "queue";
  EXPECT_THROW(s->create_semaphore(coll, c), InvalidArgument);
  EXPECT_FALSE(s->read_semaphore(coll, "other").has_value());
}

// ---- renew_semaphores: the batched renewal of semaphore slots ----------------------

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

// Fair queueing (semaphore_storage.h): an enqueue is a compare-and-set that appends an
// entry whose ticket is the new fence; a claim passes only entries expired at its time,
// named by uuid and ticket, and removes them with its own; renewals ($max) and leaves
// name uuid AND ticket.
SemaphoreClaim enqueue_of(SemaphoreClaim c) {
  c.enqueue = true;
  return c;
}

TEST_P(SemaphoreOps, FairQueueEnqueueClaimRenewAndLeave) {
  // FerretDB 1.x also lacks $pull with a condition, which leaving the queue sends.
  if (test_server_kind() == "ferretdb" && !memory())
    GTEST_SKIP() << "FerretDB's updates are not atomic (semaphores refuse it by default)";
  ASSERT_TRUE(s->create_semaphore(coll, by("h", 0, 0, kEpoch, now, 1000, 1)));
  // Two waiters enqueue, each a compare-and-set on the fence.
  ASSERT_TRUE(s->claim_semaphore(coll, enqueue_of(by("a", 0, kEpoch, kEpoch + 1, now, 1000, 1))));
  EXPECT_FALSE(s->claim_semaphore(coll, enqueue_of(by("b", 0, kEpoch, kEpoch + 2, now, 1000, 1))))
      << "an old copy";
  ASSERT_TRUE(
      s->claim_semaphore(coll, enqueue_of(by("b", 0, kEpoch + 1, kEpoch + 2, now, 5000, 1))));
  SemaphoreDoc d = must_read();
  ASSERT_EQ(d.queue.size(), 2u);
  EXPECT_EQ(d.fence, kEpoch + 2);
  EXPECT_EQ(d.queue[0].uuid, "uuid-a");
  EXPECT_EQ(d.queue[0].ticket, kEpoch + 1);
  EXPECT_EQ(d.queue[0].expire_ms, now + 1000);
  EXPECT_EQ(d.queue[1].ticket, kEpoch + 2);
  EXPECT_EQ(d.slots[0].uuid, "uuid-h") << "an enqueue claims no slot";
  // Renewals: by index, uuid and ticket, unexpired, never lowering.
  EXPECT_FALSE(s->renew_queue_entry(coll, "pool", 0, "uuid-a", kEpoch + 2, now, now + 2000));
  EXPECT_FALSE(s->renew_queue_entry(coll, "pool", 1, "uuid-a", kEpoch + 1, now, now + 2000));
  EXPECT_TRUE(s->renew_queue_entry(coll, "pool", 0, "uuid-a", kEpoch + 1, now, now + 2000));
  EXPECT_TRUE(s->renew_queue_entry(coll, "pool", 0, "uuid-a", kEpoch + 1, now, now + 1500));
  EXPECT_EQ(must_read().queue[0].expire_ms, now + 2000);
  EXPECT_FALSE(s->renew_queue_entry(coll, "pool", 0, "uuid-a", kEpoch + 1, now + 2000, now + 9000))
      << "expired";
  // b's claim of the (expired) slot 0 at now + 3000 passes a (expired) and owns b.
  SemaphoreClaim claim = by("b", 0, kEpoch + 2, kEpoch + 3, now + 3000, 10000, 1);
  claim.queue_passed = {QueueEntry{"uuid-a", kEpoch + 1, 0}};
  claim.queue_own = QueueEntry{"uuid-b", kEpoch + 2, 0};
  SemaphoreClaim too_early = claim;
  too_early.now_ms = now + 1999;  // a still live then: nothing written
  too_early.expire_ms = too_early.now_ms + 10000;
  too_early.slot = 0;
  EXPECT_FALSE(s->claim_semaphore(coll, too_early));
  EXPECT_EQ(must_read().queue.size(), 2u);
  SemaphoreClaim misnamed = claim;
  misnamed.queue_own->ticket = kEpoch + 9;
  EXPECT_FALSE(s->claim_semaphore(coll, misnamed));
  ASSERT_TRUE(s->claim_semaphore(coll, claim));
  d = must_read();
  EXPECT_TRUE(d.queue.empty()) << "the passed entry and its own left with the claim";
  EXPECT_EQ(d.slots[0].uuid, "uuid-b");
  EXPECT_EQ(d.fence, kEpoch + 3);
  // Leave: by uuid and ticket, wherever the entry is.
  ASSERT_TRUE(
      s->claim_semaphore(coll, enqueue_of(by("c", 0, kEpoch + 3, kEpoch + 4, now, 9000, 1))));
  ASSERT_TRUE(
      s->claim_semaphore(coll, enqueue_of(by("e", 0, kEpoch + 4, kEpoch + 5, now, 9000, 1))));
  EXPECT_FALSE(s->leave_queue(coll, "pool", "uuid-e", kEpoch + 4));
  EXPECT_TRUE(s->leave_queue(coll, "pool", "uuid-e", kEpoch + 5));
  EXPECT_FALSE(s->leave_queue(coll, "pool", "uuid-e", kEpoch + 5)) << "once";
  d = must_read();
  ASSERT_EQ(d.queue.size(), 1u);
  EXPECT_EQ(d.queue[0].uuid, "uuid-c");
  EXPECT_FALSE(s->leave_queue(coll, "absent", "uuid-c", kEpoch + 4));
}

// Fair plain locks (core/lock_queue.h): the queue in a semaphore-shaped document of the
// lock's key in "<lock collection>.queue", written with the operations above, beside a
// lock whose claims stay the plain ones.
TEST_P(SemaphoreOps, FairLocksServeTheirQueueInArrivalOrder) {
  if (test_server_kind() == "ferretdb" && !memory())
    GTEST_SKIP() << "FerretDB's updates are not atomic (semaphores refuse it by default)";
  auto make = [&](const std::string& who) {
    LockerOptions o;
    o.key = "pool";
    o.collection = coll;
    o.ttl_s = 30;
    o.timeparanoid = false;
    o.fair = true;
    o.allow_unbounded_calls = true;
    return std::make_shared<Locker>(s, o, nullptr, Identity{"uuid-" + who, "host-" + who, 1});
  };
  // One attempt of a fair blocking acquire (a new run each time: the place is the
  // locker's): true when it took the lock.
  auto attempt = [](Locker& l) {
    return l.start_acquire(true, std::nullopt, 0)->attempt().kind == AcquireStep::Kind::Acquired;
  };
  const std::string qcoll = LockQueue::collection_for(coll);
  auto queue = [&] {
    std::vector<std::string> who;
    if (auto d = s->read_semaphore(qcoll, "pool"))
      for (const QueueEntry& e : d->queue) who.push_back(e.uuid);
    return who;
  };
  auto a = make("a"), b = make("b"), c = make("c");
  ASSERT_TRUE(attempt(*a));
  EXPECT_FALSE(attempt(*b));
  EXPECT_FALSE(attempt(*c));
  EXPECT_EQ(queue(), (std::vector<std::string>{"uuid-b", "uuid-c"}));
  const SemaphoreDoc d = *s->read_semaphore(qcoll, "pool");
  EXPECT_EQ(semaphore_doc::malformed(d), "");
  EXPECT_EQ(d.limit, 1);
  EXPECT_FALSE(d.slots.at(0).held_at(now)) << "the queue document's slot is never held";
  EXPECT_LT(d.queue[0].ticket, d.queue[1].ticket);
  a->release();
  EXPECT_FALSE(attempt(*c)) << "b is the live head";
  EXPECT_FALSE(a->try_acquire()) << "a fair newcomer waits for the live queue too";
  EXPECT_TRUE(attempt(*b));
  EXPECT_EQ(queue(), (std::vector<std::string>{"uuid-c"})) << "the winner left";
  EXPECT_EQ(s->read(coll, "pool")->uuid, "uuid-b") << "the lock document holds the hold";
  b->release();
  EXPECT_TRUE(attempt(*c));
  EXPECT_TRUE(queue().empty());
  // A waiter that gives up leaves by uuid and ticket.
  EXPECT_FALSE(attempt(*a));
  EXPECT_EQ(queue(), (std::vector<std::string>{"uuid-a"}));
  a->leave_queue();
  EXPECT_TRUE(queue().empty());
  c->release();
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Backends, SemaphoreOps, ::testing::Values("env", "memory"), name_of);

}  // namespace
}  // namespace mongoelector::storage_test
