// A renewal that timed out at the client may still run at the server AFTER a newer one
// (a frozen server resumes). Renewals are monotonic at the server -- an expiry only ever
// moves later -- so such a late renewal cannot give the lock away while its holder still
// counts on the newer lease: for the single renewal (Locker::renew, the elector), the
// batched one (Storage::renew_many, keep-alive leases) and semaphore slots. On a FakeClock
// and MemoryStorage, whose stall_next() keeps a call back and land_stalled() applies it
// later with the values it was sent with.
#include <memory>
#include <string>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fixtures.h"
#include "lease/keepalive.h"
#include "lease/lease.h"
#include "semaphore/semaphore.h"
#include "server_clock.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

class LateRenewalTest : public CoreTest {
 protected:
  std::int64_t expiry(const std::string& key = "k", const std::string& coll = "mongolocker") {
    auto d = storage->read(coll, key);
    return d && d->ts_expire ? d->ts_expire->ms : 0;
  }
};

TEST_F(LateRenewalTest, ALateRenewalDoesNotShortenTheLockUnderItsHolder) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  const std::int64_t t0 = storage->server_time_ms();
  clock->advance(2000);
  storage->stall_next("renew");
  EXPECT_THROW(a->renew(), StorageUnavailable);  // R1 (expiry t0 + 12 s) times out
  clock->advance(4000);
  const auto end = a->renew();  // R2 (expiry t0 + 16 s): the lease counts from here
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(*end, clock->mono_ms() + 10000);
  EXPECT_EQ(expiry(), t0 + 16000);
  ASSERT_EQ(storage->land_stalled(), 1);  // R1 runs at the server now: its filter matches
  EXPECT_EQ(expiry(), t0 + 16000) << "a late renewal never lowers the expiry";
  clock->advance(6000);  // R1's expiry: a still counts on its lease for 4 s
  ASSERT_LT(clock->mono_ms(), *a->lease_deadline_mono());
  EXPECT_FALSE(b->try_acquire().has_value()) << "taken while its holder still holds it";
  clock->advance(4000);
  EXPECT_TRUE(b->try_acquire().has_value()) << "free at R2's expiry";
}

TEST_F(LateRenewalTest, ALeaderKeepsItsLockWhenAnOlderRenewalLandsLate) {
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = 9;
  o.report_status = false;
  auto elector = [&](const std::string& name) {
    return std::make_unique<Elector>(storage, o, ElectorCallbacks{}, clock,
                                     Identity{"uuid-" + name, "host-" + name, 1});
  };
  auto a = elector("a");
  auto b = elector("b");
  a->poll();
  ASSERT_TRUE(a->is_leader());
  const std::int64_t start = clock->mono_ms();
  clock->advance(3000);
  storage->stall_next("renew");
  a->poll();  // R1 (lease to start + 12 s) times out at the client; retried
  ASSERT_TRUE(a->is_leader());
  clock->advance(2000);
  a->poll();  // R2 succeeds: the lease counts from start + 5 s
  ASSERT_TRUE(a->is_leader());
  const std::int64_t deadline = *a->renew_deadline_mono();
  ASSERT_GT(deadline, start + 12000);
  ASSERT_EQ(storage->land_stalled(), 1);             // R1 lands now
  clock->advance(start + 12000 - clock->mono_ms());  // R1's expiry, before a's deadline
  ASSERT_TRUE(a->is_leader());
  b->poll();
  EXPECT_FALSE(b->is_leader()) << "two leaders: a late renewal shortened the leader's lock";
  EXPECT_TRUE(a->is_leader());
}

TEST_F(LateRenewalTest, ALateBatchDoesNotShortenTheLeasesItCarried) {
  storage->set_clock_sample_board(std::make_shared<ClockSampleBoard>());
  Renewer renewer(clock, 0);  // steps run by run_due()
  std::vector<std::unique_ptr<KeepAliveLease>> leases;
  for (const char* key : {"p", "q"}) {  // two leases: one renew_many carries both
    KeepAliveOptions ko;
    ko.blocking = false;
    leases.push_back(KeepAliveLease::acquire(
        std::shared_ptr<Locker>(make_locker(std::string("me-") + key, 15, key)), ko, &renewer));
  }
  const std::int64_t t0 = storage->server_time_ms();
  clock->advance(5000);
  storage->stall_next("renew_many");
  renewer.run_due();  // the batch (expiry t0 + 20 s) times out at the client
  ASSERT_EQ(renewer.batches_sent(), 1u);
  clock->advance(3000);
  renewer.run_due();  // the retry (expiry t0 + 23 s) succeeds
  ASSERT_EQ(renewer.batches_sent(), 2u);
  for (const char* key : {"p", "q"}) ASSERT_EQ(expiry(key), t0 + 23000) << key;
  ASSERT_EQ(storage->land_stalled(), 1);  // the first batch lands now
  for (const char* key : {"p", "q"}) EXPECT_EQ(expiry(key), t0 + 23000) << key;
  // Just past the first batch's expiry (a thief's shared sample has a few ms of drift).
  clock->advance(12100);
  for (auto& l : leases) {
    ASSERT_FALSE(l->lost());
    ASSERT_LT(clock->mono_ms(), l->renew_deadline_mono());
    auto thief = make_locker("thief", 15, l->locker()->key());
    EXPECT_FALSE(thief->try_acquire().has_value())
        << l->locker()->key() << " taken while its lease runs";
  }
  for (auto& l : leases) l->close();
}

TEST_F(LateRenewalTest, ALateSlotRenewalDoesNotLetASecondHolderIn) {
  SemaphoreOptions so;
  so.key = "pool";
  so.limit = 1;
  so.ttl_s = 10;
  auto sem = [&](const std::string& name) {
    return std::make_unique<Semaphore>(storage, so, clock,
                                       Identity{"uuid-" + name, "host-" + name, 100});
  };
  auto a = sem("a");
  auto b = sem("b");
  ASSERT_TRUE(a->try_acquire().has_value());
  clock->advance(2000);
  storage->stall_next("renew_semaphore");
  EXPECT_THROW(a->renew(), StorageUnavailable);  // R1 (to +12 s) times out
  clock->advance(4000);
  ASSERT_TRUE(a->renew().has_value());  // R2 (to +16 s)
  ASSERT_EQ(storage->land_stalled(), 1);
  clock->advance(6000);  // R1's expiry
  ASSERT_LT(clock->mono_ms(), *a->lease_deadline_mono());
  EXPECT_FALSE(b->try_acquire().has_value()) << "two holders of a semaphore of limit 1";
  clock->advance(4000);
  EXPECT_TRUE(b->try_acquire().has_value());
}

// The memory backend's own operations: renew() and renew_many() never lower an expiry;
// set_expiry() (minimum-hold releases) sets it exactly, on the named unexpired hold.
TEST_F(LateRenewalTest, MemoryRenewalsAreMonotonicAndSetExpiryIsExact) {
  const std::int64_t now = storage->server_time_ms();
  ASSERT_TRUE(storage->claim("c", LockClaim{"k", "u", "h", 1, now, now + 10000}, false));
  EXPECT_TRUE(storage->renew("c", "k", "u", 1, now, now + 20000));
  EXPECT_TRUE(storage->renew("c", "k", "u", 1, now, now + 15000)) << "matched: still ours";
  EXPECT_EQ(expiry("k", "c"), now + 20000);
  EXPECT_EQ(
      storage->renew_many("c", {{"k", "u", 1, now + 12000}, {"k2", "u", 1, now + 12000}}, now),
      (std::vector<bool>{true, false}));
  EXPECT_EQ(expiry("k", "c"), now + 20000);
  EXPECT_FALSE(storage->set_expiry("c", "k", "u", 2, now, now + 5000, 0)) << "another hold";
  EXPECT_TRUE(storage->set_expiry("c", "k", "u", 1, now, now + 5000, 0));
  EXPECT_EQ(expiry("k", "c"), now + 5000);
  EXPECT_FALSE(storage->set_expiry("c", "k", "u", 1, now + 5000, now + 9000, 0)) << "expired";
  EXPECT_EQ(expiry("k", "c"), now + 5000);
}

// The read-back of a batch (MongoDB, pymongo) decides each request: a hold of ours whose
// expiry is already later than the request's counts as renewed (the server keeps it at
// least that long); another hold, or an earlier expiry, does not.
TEST(RenewedBy, AcceptsTheSameHoldWithAnExpiryAtLeastTheRequested) {
  LockDoc doc;
  doc.locked = true;
  doc.uuid = "u";
  doc.fence = 7;
  doc.ts_expire = DateTime{5000};
  const RenewRequest r{"k", "u", 7, 4000};
  EXPECT_TRUE(r.renewed_by(doc)) << "already later: renewed";
  doc.ts_expire = DateTime{4000};
  EXPECT_TRUE(r.renewed_by(doc));
  doc.ts_expire = DateTime{3999};
  EXPECT_FALSE(r.renewed_by(doc));
  doc.ts_expire = DateTime{9000};
  doc.fence = 8;
  EXPECT_FALSE(r.renewed_by(doc)) << "another hold";
  doc.fence = 7;
  doc.uuid = "v";
  EXPECT_FALSE(r.renewed_by(doc));
  doc.uuid = "u";
  doc.locked = false;
  EXPECT_FALSE(r.renewed_by(doc));
  doc.locked = true;
  doc.ts_expire.reset();
  EXPECT_FALSE(r.renewed_by(doc));
}

}  // namespace
