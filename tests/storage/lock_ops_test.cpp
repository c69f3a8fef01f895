// Conformance of the lock operations (claim, renew, release, read, set_fence,
// bump_epoch) of MongoStorage against a real server.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "fixture.h"

namespace mongoelector::storage_test {
namespace {

using LockOps = StorageTest;

// Runs claim(client, i) at once on 4 clients of their own: how many won. A client that
// fails with an error fails the test.
template <class Claim>
int concurrent_winners(Claim claim) {
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<Storage>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(open_test_storage());
  std::atomic<int> winners{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      try {
        if (claim(*clients[i], i)) ++winners;
      } catch (const std::exception&) {
        ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  return winners.load();
}

TEST_F(LockOps, ClaimOnAbsentKeyCreatesTheDocumentWithFenceOne) {
  auto doc = s->claim(coll, claim_by("a", now, 10000), false);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->key, "k");
  EXPECT_TRUE(doc->locked);
  EXPECT_EQ(doc->uuid, "uuid-a");
  EXPECT_EQ(doc->host, "host-a");
  EXPECT_EQ(doc->pid, 4242);
  ASSERT_TRUE(doc->ts_created.has_value());
  EXPECT_EQ(doc->ts_created->ms, now);
  ASSERT_TRUE(doc->ts_expire.has_value());
  EXPECT_EQ(doc->ts_expire->ms, now + 10000);
  EXPECT_EQ(doc->fence, 1);

  // The stored document has the original's fields, in its order, plus fence. (FerretDB
  // stores the fields of an upserted document in its own order: only the set is checked.)
  auto stored = s->read(coll, "k");
  ASSERT_TRUE(stored.has_value());
  std::vector<std::string> names;
  for (const auto& f : stored->raw.fields()) names.push_back(f.first);
  const std::vector<std::string> expected{"_id", "locked",     "host",      "uuid",
                                          "pid", "ts_created", "ts_expire", "fence"};
  if (test_server_kind() == "ferretdb") {
    std::sort(names.begin(), names.end());
    auto sorted = expected;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(names, sorted);
  } else {
    EXPECT_EQ(names, expected);
  }
  EXPECT_TRUE(std::holds_alternative<DateTime>(*stored->raw.get("ts_expire")));
  EXPECT_TRUE(std::holds_alternative<std::int64_t>(*stored->raw.get("pid")));
}

TEST_F(LockOps, ClaimOfAHeldLockReturnsNulloptAndChangesNothing) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  EXPECT_FALSE(s->claim(coll, claim_by("b", now + 5000), false).has_value());
  // One millisecond before expiry it is still held.
  EXPECT_FALSE(s->claim(coll, claim_by("b", now + 9999), false).has_value());
  auto doc = s->read(coll, "k");
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->uuid, "uuid-a");
  EXPECT_EQ(doc->fence, 1);
  EXPECT_EQ(doc->ts_expire->ms, now + 10000);
}

TEST_F(LockOps, ClaimOfAnExpiredLockTakesItAndIncrementsFence) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 1000), false));
  // ts_expire <= now counts as expired: exactly at expiry it can be taken.
  auto doc = s->claim(coll, claim_by("b", now + 1000), false);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->uuid, "uuid-b");
  EXPECT_EQ(doc->host, "host-b");
  EXPECT_EQ(doc->fence, 2);
  EXPECT_EQ(doc->ts_created->ms, now + 1000);
  EXPECT_EQ(doc->ts_expire->ms, now + 1000 + 10000);
}

TEST_F(LockOps, ClaimOfAReleasedLockTakesIt) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  ASSERT_TRUE(s->release(coll, "k", std::string("uuid-a"), 0, now + 10, false));
  auto doc = s->claim(coll, claim_by("b", now + 20), false);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->uuid, "uuid-b");
  EXPECT_EQ(doc->fence, 2);
}

TEST_F(LockOps, ForcedClaimTakesAHeldLock) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  auto doc = s->claim(coll, claim_by("b", now + 1), true);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->uuid, "uuid-b");
  EXPECT_EQ(doc->fence, 2);
  // Force on an absent key creates it.
  auto other = s->claim(coll, claim_by("c", now, 10000, "other"), true);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->fence, 1);
}

// insert_claim: the upsert's document on an absent key, field for field; nothing when a
// document is there, whatever its state.
TEST_F(LockOps, InsertClaimWritesWhatTheClaimWouldOnAnAbsentKey) {
  LockClaim c = claim_by("a", now);
  c.payload = ClaimPayload{std::string(R"({"endpoint":"a:80"})"), 2};
  auto inserted = s->insert_claim(coll, c);
  ASSERT_TRUE(inserted.has_value());
  EXPECT_EQ(inserted->fence, 1);
  EXPECT_EQ(inserted->uuid, "uuid-a");
  c.key = "upserted";
  ASSERT_TRUE(s->claim(coll, c, false));
  Document a = s->read(coll, "k")->raw;
  Document b = s->read(coll, "upserted")->raw;
  a.set("_id", std::string("x"));
  b.set("_id", std::string("x"));
  // FerretDB stores an upserted document's fields in its own order: compare by name there.
  if (test_server_kind() == "ferretdb") {
    std::map<std::string, Value> by_name_a(a.fields().begin(), a.fields().end());
    std::map<std::string, Value> by_name_b(b.fields().begin(), b.fields().end());
    EXPECT_EQ(by_name_a, by_name_b);
  } else {
    EXPECT_EQ(a, b);
  }
  EXPECT_EQ(s->read(coll, "k")->payload, std::optional<std::string>(R"({"endpoint":"a:80"})"));
}

TEST_F(LockOps, InsertClaimOfAnExistingDocumentWritesNothing) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  ASSERT_TRUE(s->release(coll, "k", std::string("uuid-a"), 0, now + 10, false));
  const Document before = s->read(coll, "k")->raw;
  // Released, then expired: the claim would take it, the insert never does.
  EXPECT_FALSE(s->insert_claim(coll, claim_by("b", now + 20)).has_value());
  EXPECT_FALSE(s->insert_claim(coll, claim_by("b", now + 60000)).has_value());
  EXPECT_EQ(s->read(coll, "k")->raw, before);
  // After the insert failed, the claim decides as always.
  auto doc = s->claim(coll, claim_by("b", now + 20), false);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->fence, 2);
}

TEST_F(LockOps, ConcurrentInsertClaimsHaveExactlyOneWinner) {
  // Half insert, half upsert: one document, one winner whichever way it is claimed.
  EXPECT_EQ(concurrent_winners([&](Storage& client, int i) {
              const LockClaim c = claim_by("t" + std::to_string(i), now);
              return i % 2 == 0 ? client.insert_claim(coll, c).has_value()
                                : client.claim(coll, c, false).has_value();
            }),
            1);
  EXPECT_EQ(s->read(coll, "k")->fence, 1);
}

TEST_F(LockOps, ClaimsOfDifferentKeysAreIndependent) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000, "k1"), false));
  auto doc = s->claim(coll, claim_by("b", now, 10000, "k2"), false);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->key, "k2");
  EXPECT_EQ(doc->fence, 1);
}

TEST_F(LockOps, RenewMatchesOnlyTheUnexpiredHolderWithItsFence) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  EXPECT_TRUE(s->renew(coll, "k", "uuid-a", 1, now + 5000, now + 15000));
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 15000);
  // fence 0: fence not checked.
  EXPECT_TRUE(s->renew(coll, "k", "uuid-a", 0, now + 6000, now + 16000));
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 16000);

  EXPECT_FALSE(s->renew(coll, "k", "uuid-b", 1, now + 6000, now + 99000));   // not the holder
  EXPECT_FALSE(s->renew(coll, "k", "uuid-a", 2, now + 6000, now + 99000));   // stale fence
  EXPECT_FALSE(s->renew(coll, "k", "uuid-a", 1, now + 16000, now + 99000));  // expired (==)
  EXPECT_FALSE(s->renew(coll, "absent", "uuid-a", 1, now, now + 99000));
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 16000);
}

// Renewals are monotonic: one whose expiry is earlier than the stored one (it ran late at
// the server, after a newer renewal of the same hold) still matches -- the hold is ours
// -- and reports renewed, but never lowers the expiry.
TEST_F(LockOps, ARenewalNeverLowersTheExpiry) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  EXPECT_TRUE(s->renew(coll, "k", "uuid-a", 1, now + 2000, now + 16000));  // the newer one
  EXPECT_TRUE(s->renew(coll, "k", "uuid-a", 1, now + 1000, now + 12000)) << "the late one";
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 16000);
  EXPECT_TRUE(s->renew(coll, "k", "uuid-a", 0, now + 1000, now + 16000)) << "equal, unfenced";
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 16000);
  // Still only the unexpired holder with its fence.
  EXPECT_FALSE(s->renew(coll, "k", "uuid-a", 2, now + 1000, now + 12000));
  EXPECT_FALSE(s->renew(coll, "k", "uuid-b", 1, now + 1000, now + 12000));
  EXPECT_FALSE(s->renew(coll, "k", "uuid-a", 1, now + 16000, now + 12000));
  auto doc = s->read(coll, "k");
  EXPECT_EQ(doc->ts_expire->ms, now + 16000);
  EXPECT_TRUE(doc->locked);
  EXPECT_EQ(doc->fence, 1);
}

// set_expiry: the one write that may lower a held lock's expiry (a minimum-hold release),
// exactly, on the named unexpired hold only.
TEST_F(LockOps, SetExpiryMovesOnlyTheNamedUnexpiredHoldEitherWay) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  EXPECT_FALSE(s->set_expiry(coll, "k", "uuid-b", 1, now, now + 3000, 0));
  EXPECT_FALSE(s->set_expiry(coll, "k", "uuid-a", 2, now, now + 3000, 0));
  EXPECT_FALSE(s->set_expiry(coll, "absent", "uuid-a", 1, now, now + 3000, 0));
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 10000);
  EXPECT_TRUE(s->set_expiry(coll, "k", "uuid-a", 1, now + 1000, now + 3000, 0)) << "shortens";
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 3000);
  EXPECT_TRUE(s->set_expiry(coll, "k", "uuid-a", 1, now + 1000, now + 60000, 0)) << "extends";
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 60000);
  EXPECT_TRUE(s->set_expiry(coll, "k", "uuid-a", 1, now + 1000, now + 60000, 0)) << "unchanged";
  // An expired hold is not revived.
  EXPECT_FALSE(s->set_expiry(coll, "k", "uuid-a", 1, now + 60000, now + 90000, 0));
  auto doc = s->read(coll, "k");
  EXPECT_EQ(doc->ts_expire->ms, now + 60000);
  EXPECT_TRUE(doc->locked);
  EXPECT_EQ(doc->fence, 1);
  EXPECT_EQ(doc->ts_created->ms, now);
}

// A counter fence restarts with each incarnation of the document: set_expiry then names
// the claim's ts_created too, and a write meant for another incarnation matches nothing.
TEST_F(LockOps, SetExpiryOfACounterFenceNamesTheIncarnation) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  EXPECT_FALSE(s->set_expiry(coll, "k", "uuid-a", 1, now + 1, now + 3000, now - 5))
      << "another incarnation's write";
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 10000);
  EXPECT_TRUE(s->set_expiry(coll, "k", "uuid-a", 1, now + 1, now + 3000, now));
  EXPECT_EQ(s->read(coll, "k")->ts_expire->ms, now + 3000);
}

TEST_F(LockOps, RenewAfterReleaseFails) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  ASSERT_TRUE(s->release(coll, "k", std::string("uuid-a"), 0, now + 1, false));
  // ts_expire is now+1, so only `locked: false` stops this renewal.
  EXPECT_FALSE(s->renew(coll, "k", "uuid-a", 1, now, now + 20000));
}

TEST_F(LockOps, ReleaseByHolderKeepsTheDocumentAndItsFence) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  EXPECT_FALSE(s->release(coll, "k", std::string("uuid-b"), 0, now + 10, false));  // not holder
  auto doc = s->read(coll, "k");
  EXPECT_TRUE(doc->locked);
  EXPECT_EQ(doc->ts_expire->ms, now + 10000);

  EXPECT_TRUE(s->release(coll, "k", std::string("uuid-a"), 0, now + 10, false));
  doc = s->read(coll, "k");
  ASSERT_TRUE(doc.has_value());
  EXPECT_FALSE(doc->locked);
  EXPECT_EQ(doc->ts_expire->ms, now + 10);
  EXPECT_EQ(doc->fence, 1);
  EXPECT_EQ(doc->uuid, "uuid-a");
  EXPECT_FALSE(doc->held_at(now + 10));
}

TEST_F(LockOps, ForcedReleaseReleasesAnyHolder) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  EXPECT_TRUE(s->release(coll, "k", std::nullopt, 0, now + 10, false));
  EXPECT_FALSE(s->read(coll, "k")->locked);
  EXPECT_FALSE(s->release(coll, "absent", std::nullopt, 0, now, false));
  EXPECT_FALSE(s->read(coll, "absent").has_value());  // release never creates
}

TEST_F(LockOps, ReleaseWithDeleteRemovesTheDocumentOnlyForTheHolder) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000), false));
  EXPECT_FALSE(s->release(coll, "k", std::string("uuid-b"), 0, now, true));
  EXPECT_TRUE(s->read(coll, "k").has_value());
  EXPECT_TRUE(s->release(coll, "k", std::string("uuid-a"), 0, now, true));
  EXPECT_FALSE(s->read(coll, "k").has_value());
  EXPECT_FALSE(s->release(coll, "k", std::string("uuid-a"), 0, now, true));
  // Deleted: the next claim starts over at fence 1 (hence the epoch high-water mark).
  auto doc = s->claim(coll, claim_by("b", now), false);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->fence, 1);
  EXPECT_TRUE(s->release(coll, "k", std::nullopt, 0, now, true));  // forced delete
  EXPECT_FALSE(s->read(coll, "k").has_value());
}

// A release names the hold (uuid AND fence): one that timed out at the client and runs
// late at the server cannot free a newer hold of the same owner (issue #14.4).
TEST_F(LockOps, StaleFencedReleaseDoesNotFreeANewerHold) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 1000), false));          // fence 1
  ASSERT_TRUE(s->claim(coll, claim_by("a", now + 1000, 10000), false));  // fence 2
  for (bool del : {false, true}) {
    EXPECT_FALSE(s->release(coll, "k", std::string("uuid-a"), 1, now + 1500, del)) << del;
    auto doc = s->read(coll, "k");
    ASSERT_TRUE(doc.has_value());
    EXPECT_TRUE(doc->locked);
    EXPECT_EQ(doc->fence, 2);
    EXPECT_TRUE(doc->held_at(now + 1500));
  }
  EXPECT_TRUE(s->release(coll, "k", std::string("uuid-a"), 2, now + 1500, false));
  EXPECT_FALSE(s->read(coll, "k")->locked);
  // A forced release ignores the fence.
  ASSERT_TRUE(s->claim(coll, claim_by("b", now + 2000, 10000), false));  // fence 3
  EXPECT_TRUE(s->release(coll, "k", std::nullopt, 1, now + 2500, true));
  EXPECT_FALSE(s->read(coll, "k").has_value());
}

TEST_F(LockOps, BumpEpochStartsAtOneAndIncrementsPerKey) {
  EXPECT_EQ(s->bump_epoch(coll, "k"), 1);
  EXPECT_EQ(s->bump_epoch(coll, "k"), 2);
  EXPECT_EQ(s->bump_epoch(coll, "other"), 1);
  EXPECT_EQ(s->bump_epoch(coll, "k"), 3);
  // Epochs live in "<collection>.fences", not in the lock collection.
  EXPECT_FALSE(s->read(coll, "k").has_value());
  auto fences = s->read(coll + ".fences", "k");
  ASSERT_TRUE(fences.has_value());
  EXPECT_EQ(fences->raw.get_int("epoch"), 3);
  // They survive deletion of the lock document.
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  ASSERT_TRUE(s->release(coll, "k", std::nullopt, 0, now, true));
  EXPECT_EQ(s->bump_epoch(coll, "k"), 4);
}

// A fence change names the claim by its ts_created: after the document was deleted and
// re-created by the same owner (the counter restarts at 1), a late fence change of the
// earlier incarnation does not match.
TEST_F(LockOps, SetFenceNamesTheIncarnation) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  ASSERT_TRUE(s->release(coll, "k", std::string("uuid-a"), 1, now + 1, true));  // deleted
  ASSERT_EQ(s->claim(coll, claim_by("a", now + 5), false)->fence, 1);
  EXPECT_FALSE(s->set_fence(coll, "k", "uuid-a", 1, now, std::int64_t{1} << 32));
  EXPECT_EQ(s->read(coll, "k")->fence, 1);
  EXPECT_TRUE(s->set_fence(coll, "k", "uuid-a", 1, now + 5, std::int64_t{2} << 32));
  EXPECT_EQ(s->read(coll, "k")->fence, std::int64_t{2} << 32);
}

// A late release of an earlier incarnation (same uuid, same counter fence: the document
// was deleted and re-created) may free the new hold before its token is assigned: the
// fence change must then refuse, or a token is handed out for a hold that is gone.
TEST_F(LockOps, SetFenceRefusesAReleasedHold) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  ASSERT_TRUE(s->release(coll, "k", std::string("uuid-a"), 1, now + 1, false));
  EXPECT_FALSE(s->set_fence(coll, "k", "uuid-a", 1, now, std::int64_t{1} << 32));
  EXPECT_EQ(s->read(coll, "k")->fence, 1);
}

TEST_F(LockOps, SetFenceIsACompareAndSet) {
  ASSERT_TRUE(s->claim(coll, claim_by("a", now), false));
  EXPECT_FALSE(s->set_fence(coll, "k", "uuid-b", 1, now, 7));      // other uuid
  EXPECT_FALSE(s->set_fence(coll, "k", "uuid-a", 2, now, 7));      // wrong old fence
  EXPECT_FALSE(s->set_fence(coll, "k", "uuid-a", 1, now - 1, 7));  // another claim's
  EXPECT_EQ(s->read(coll, "k")->fence, 1);
  EXPECT_TRUE(s->set_fence(coll, "k", "uuid-a", 1, now, 7));
  EXPECT_EQ(s->read(coll, "k")->fence, 7);
  EXPECT_FALSE(s->set_fence(coll, "k", "uuid-a", 1, now, 8));  // already moved on
  EXPECT_FALSE(s->set_fence(coll, "absent", "uuid-a", 0, now, 1));
  // The next claim increments from the value set.
  ASSERT_TRUE(s->release(coll, "k", std::string("uuid-a"), 0, now, false));
  EXPECT_EQ(s->claim(coll, claim_by("b", now), false)->fence, 8);
}

TEST_F(LockOps, ReadOfAnAbsentKeyIsNullopt) {
  EXPECT_FALSE(s->read(coll, "absent").has_value());
  EXPECT_FALSE(s->read(coll + "_never_created", "k").has_value());
}

TEST_F(LockOps, ReadManyReadsEachKeyInTheOrderAsked) {
  EXPECT_TRUE(s->read_many(coll, {}).empty());
  ASSERT_TRUE(s->claim(coll, claim_by("a", now, 10000, "k1"), false));
  ASSERT_TRUE(s->claim(coll, claim_by("b", now, 10000, "k3"), false));
  const std::vector<std::string> keys = {"k3", "k2", "k1", "k3"};
  const std::vector<std::optional<LockDoc>> docs = s->read_many(coll, keys);
  ASSERT_EQ(docs.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::optional<LockDoc> one = s->read(coll, keys[i]);
    ASSERT_EQ(docs[i].has_value(), one.has_value()) << keys[i];
    if (!one) continue;
    EXPECT_EQ(docs[i]->key, keys[i]);
    EXPECT_EQ(docs[i]->uuid, one->uuid);
    EXPECT_EQ(docs[i]->fence, one->fence);
  }
  EXPECT_FALSE(docs[1].has_value());
  EXPECT_EQ(docs[0]->uuid, "uuid-b");
  EXPECT_EQ(docs[2]->uuid, "uuid-a");
  const auto none = s->read_many(coll + "_never_created", {"k1"});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_FALSE(none[0].has_value());
}

TEST_F(LockOps, OddTypedDocumentsReadWithDefaults) {
  raw().insert(
      coll,
      R"({"_id": "k", "locked": "yes", "host": 5, "uuid": {"$oid": "0123456789abcdef01234567"},
                   "pid": "123", "ts_created": null, "ts_expire": "tomorrow",
                   "fence": "x", "nested": {"a": 1}, "list": [1, 2], "ratio": 2.5})");
  std::optional<LockDoc> doc;
  ASSERT_NO_THROW(doc = s->read(coll, "k"));
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->key, "k");
  EXPECT_FALSE(doc->locked);
  EXPECT_EQ(doc->host, "");
  EXPECT_EQ(doc->uuid, "");
  EXPECT_EQ(doc->pid, 0);
  EXPECT_FALSE(doc->ts_created.has_value());
  EXPECT_FALSE(doc->ts_expire.has_value());
  EXPECT_EQ(doc->fence, 0);
  EXPECT_FALSE(doc->held_at(now));
  // Types a Value cannot hold are skipped; the others are kept as stored.
  EXPECT_FALSE(doc->raw.has("uuid"));
  EXPECT_FALSE(doc->raw.has("nested"));
  EXPECT_FALSE(doc->raw.has("list"));
  EXPECT_EQ(doc->raw.get_string("ts_expire"), "tomorrow");
  EXPECT_TRUE(std::holds_alternative<Null>(*doc->raw.get("ts_created")));
  EXPECT_EQ(std::get<double>(*doc->raw.get("ratio")), 2.5);

  // A claim neither crashes nor invents a state: the server cannot $inc a string fence,
  // which surfaces as a StorageError with the server's code.
  EXPECT_THROW(s->claim(coll, claim_by("a", now), true), StorageError);
}

TEST_F(LockOps, ClaimTreatsDocumentsThatReadAsNotHeldAsFree) {
  // claim's filter is the negation of LockDoc::held_at: what reads as "not held" can be
  // claimed, so a document with unusable fields cannot block its key forever.
  const std::string future =
      R"({"$date": {"$numberLong": ")" + std::to_string(now + 60000) + R"("}})";
  raw().insert(coll, R"({"_id": "odd_expiry", "locked": true, "ts_expire": "tomorrow"})");
  raw().insert(coll, R"({"_id": "no_expiry", "locked": true})");
  raw().insert(coll, R"({"_id": "odd_locked", "locked": 1, "ts_expire": )" + future + "}");
  raw().insert(coll, R"({"_id": "no_locked", "ts_expire": )" + future + "}");
  raw().insert(coll, R"({"_id": "held", "locked": true, "ts_expire": )" + future + "}");
  for (const std::string key : {"odd_expiry", "no_expiry", "odd_locked", "no_locked", "held"}) {
    const bool held = key == "held";
    auto before = s->read(coll, key);
    ASSERT_TRUE(before.has_value()) << key;
    EXPECT_EQ(before->held_at(now), held) << key;
    auto doc = s->claim(coll, claim_by("a", now, 10000, key), false);
    EXPECT_EQ(doc.has_value(), !held) << key;
    if (doc) {
      EXPECT_EQ(doc->fence, 1) << key;
    }
  }
}

TEST_F(LockOps, ClaimOfAnOriginalNodesDocumentWithoutFenceStartsAtOne) {
  // What an original (pure-Python) node writes: no fence field, int32 pid.
  raw().insert(coll, R"({"_id": "k", "locked": true, "host": "old", "uuid": "uuid-old",
                         "pid": 12, "ts_created": {"$date": {"$numberLong": ")" +
                         std::to_string(now - 20000) + R"("}},
                         "ts_expire": {"$date": {"$numberLong": ")" +
                         std::to_string(now - 10000) + R"("}}})");
  auto old = s->read(coll, "k");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->pid, 12);
  EXPECT_EQ(old->fence, 0);
  EXPECT_EQ(old->ts_expire->ms, now - 10000);
  auto doc = s->claim(coll, claim_by("a", now), false);  // expired: taken
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->fence, 1);
}

TEST_F(LockOps, ConcurrentClaimsOfAnAbsentKeyHaveExactlyOneWinner) {
  // Inserting a fresh _id is atomic on every server we support (FerretDB included).
  EXPECT_EQ(concurrent_winners([&](Storage& client, int i) {
              return client.claim(coll, claim_by("t" + std::to_string(i), now), false).has_value();
            }),
            1);
  EXPECT_EQ(s->read(coll, "k")->fence, 1);
}

TEST_F(LockOps, OneStorageIsSafeToShareBetweenThreads) {
  constexpr int kThreads = 4, kOps = 15;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const std::string key = "k" + std::to_string(t) + "_" + std::to_string(i);
        try {
          auto doc = s->claim(coll, claim_by("t", now, 10000, key), false);
          if (!doc || doc->key != key || !s->read(coll, key)) ++failures;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(LockOps, RoundTripsCountOneCommandPerOperation) {
  // A fresh storage: its connection handshake (hello/isMaster) is not an APM command,
  // so the first operation counts exactly one.
  auto fresh = open_test_storage();
  EXPECT_EQ(round_trips(*fresh), 0);
  ASSERT_FALSE(fresh->read(coll, "k").has_value());
  EXPECT_EQ(round_trips(*fresh), 1) << "the handshake must not be counted";

  auto step = [&](const char* what, auto&& op) {
    const auto before = round_trips(*fresh);
    op();
    EXPECT_EQ(round_trips(*fresh) - before, 1) << what;
  };
  step("claim", [&] { ASSERT_TRUE(fresh->claim(coll, claim_by("a", now), false)); });
  step("claim (held)", [&] { ASSERT_FALSE(fresh->claim(coll, claim_by("b", now), false)); });
  step("renew", [&] { ASSERT_TRUE(fresh->renew(coll, "k", "uuid-a", 1, now, now + 20000)); });
  step("read", [&] { ASSERT_TRUE(fresh->read(coll, "k")); });
  step("set_fence", [&] { ASSERT_TRUE(fresh->set_fence(coll, "k", "uuid-a", 1, now, 2)); });
  step("release",
       [&] { ASSERT_TRUE(fresh->release(coll, "k", std::string("uuid-a"), 0, now, false)); });
  step("release (delete)",
       [&] { ASSERT_TRUE(fresh->release(coll, "k", std::nullopt, 0, now, true)); });
  step("bump_epoch", [&] { ASSERT_EQ(fresh->bump_epoch(coll, "k"), 1); });
  step("put_status", [&] {
    fresh->put_status(coll + "_status", Document{{"_id", std::string("n")}});
  });
  // server_time_ms: the first call may need a fall-back (isMaster on servers without
  // hello); from then on it is one command.
  fresh->server_time_ms();
  step("server_time_ms", [&] { fresh->server_time_ms(); });
}

}  // namespace
}  // namespace mongoelector::storage_test
