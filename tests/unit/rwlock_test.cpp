// RwLock (core/semaphore/rwlock.h) on a FakeClock and MemoryStorage: readers together up
// to max_readers, a writer alone with a token above every earlier one, writer
// preference (the waiting mark: refuses new readers, renewed only past half its ttl,
// emptied by the writer's claim, released when the writer gives up, at most one ttl when
// the writer dies), late renewals that cannot revive a hold next to the other side (the
// claims' clear_slots), mixed kinds refused without writes, the acquire loop
// (non-blocking, timeout, cancel), and keep-alive leases renewed in batches.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exceptions.h"
#include "fixtures.h"
#include "hold/acquire_run.h"
#include "lease/keepalive.h"
#include "lease/lease.h"
#include "renewer_steps.h"
#include "semaphore/rwlock.h"
#include "semaphore/semaphore.h"
#include "storage/semaphore_doc.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

constexpr std::int64_t kEpoch = std::int64_t{1} << 32;
constexpr const char* kColl = "mongorwlock";
using Kind = AcquireStep::Kind;

class RwLockTest : public CoreTest {
 protected:
  std::shared_ptr<RwLock> rw(const std::string& name, std::int64_t readers = 3, double ttl_s = 10,
                             bool preference = true, const std::string& key = "db") {
    RwLockOptions o;
    o.key = key;
    o.max_readers = readers;
    o.ttl_s = ttl_s;
    o.writer_preference = preference;
    return std::make_shared<RwLock>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }
  std::optional<SemaphoreDoc> doc(const std::string& key = "db") {
    return storage->read_semaphore(kColl, key);
  }
  // True while `h` believes it holds: a hold whose lease has not ended on its clock.
  bool believes(const RwLock& h) {
    const std::optional<Lease> l = h.lease();
    return l && clock->mono_ms() < l->end_mono;
  }
  // The storage operations (round trips) made while `f` runs.
  std::vector<std::string> ops_during(const std::function<void()>& f) {
    std::vector<std::string> ops;
    storage->set_fault_hook([&](const std::string& op, bool applied) {
      if (!applied) ops.push_back(op);
    });
    f();
    storage->set_fault_hook({});
    return ops;
  }
  // The mark slot of `d` (max_readers + 1), live at server time `at`.
  static bool mark_live(const SemaphoreDoc& d, std::int64_t at) {
    return d.slots[static_cast<std::size_t>(d.limit + 1)].held_at(at);
  }
};

TEST_F(RwLockTest, ReadersHoldTogetherUpToMaxReaders) {
  auto a = rw("a"), b = rw("b"), c = rw("c"), d = rw("d");
  std::vector<std::int64_t> tokens;
  for (auto* r : {a.get(), b.get(), c.get()}) tokens.push_back(r->acquire(RwSide::Read, false));
  EXPECT_TRUE(std::is_sorted(tokens.begin(), tokens.end()));
  EXPECT_EQ(tokens.front(), kEpoch) << "first use: a fresh epoch";
  for (auto* r : {a.get(), b.get(), c.get()}) {
    EXPECT_TRUE(believes(*r));
    EXPECT_EQ(r->side(), RwSide::Read);
  }
  const SemaphoreDoc stored = *doc();
  EXPECT_EQ(stored.kind, "rwlock");
  EXPECT_EQ(stored.limit, 3);
  ASSERT_EQ(stored.slots.size(), 5u) << "3 readers, the writer, the mark";
  EXPECT_EQ(stored.slots[0].uuid, "uuid-a");
  EXPECT_EQ(stored.slots[2].uuid, "uuid-c");
  try {
    d->acquire(RwSide::Read, false);
    FAIL() << "a fourth reader of max_readers 3";
  } catch (const LockExists& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("db: all 3 read slots held"), std::string::npos) << msg;
    EXPECT_NE(msg.find("host-b pid 100"), std::string::npos) << msg;
  }
  EXPECT_FALSE(d->hold());
  const RwLockHolders h = d->holders();
  EXPECT_EQ(h.readers.size(), 3u);
  EXPECT_FALSE(h.writer);
  b->release();
  EXPECT_GT(d->acquire(RwSide::Read, false), tokens.back());
  EXPECT_EQ(d->hold()->slot, 1) << "the freed reader slot";
}

TEST_F(RwLockTest, AWriterIsAloneAndItsTokenIsAboveEveryEarlierOne) {
  auto r1 = rw("r1"), r2 = rw("r2"), w = rw("w"), w2 = rw("w2"), r3 = rw("r3");
  const std::int64_t t1 = r1->acquire(RwSide::Read, false);
  const std::int64_t t2 = r2->acquire(RwSide::Read, false);
  try {
    w->acquire(RwSide::Write, false);
    FAIL() << "a writer next to readers";
  } catch (const LockExists& e) {
    EXPECT_NE(std::string(e.what()).find("db: held for reading by host-r1 pid 100"),
              std::string::npos)
        << e.what();
  }
  r1->release();
  EXPECT_FALSE(w->try_acquire(RwSide::Write)) << "one reader is still in";
  // r2 dies: its slot frees at its expiry, not before.
  const std::int64_t expire = doc()->slots[1].ts_expire->ms;
  clock->advance(expire - clock->wall_ms() - 1);
  EXPECT_FALSE(w->try_acquire(RwSide::Write));
  clock->advance(50);
  const std::int64_t tw = w->acquire(RwSide::Write, false);
  EXPECT_GT(tw, std::max(t1, t2));
  EXPECT_EQ(w->side(), RwSide::Write);
  EXPECT_EQ(w->hold()->slot, 3);
  EXPECT_TRUE(semaphore_doc::is_empty(doc()->slots[1])) << "the expired reader slot emptied";
  // Alone: neither a reader nor another writer gets in.
  EXPECT_FALSE(r3->try_acquire(RwSide::Read));
  EXPECT_FALSE(w2->try_acquire(RwSide::Write));
  EXPECT_THROW(r3->acquire(RwSide::Read, true, 1.0, 0.1), AcquireTimeout);
  try {
    r3->acquire(RwSide::Read, false);
    FAIL();
  } catch (const LockExists& e) {
    EXPECT_NE(std::string(e.what()).find("held for writing by host-w pid 100"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(r3->holders().writer->uuid, "uuid-w");
  w->release();
  const std::int64_t t3 = r3->acquire(RwSide::Read, false);
  EXPECT_GT(t3, tw);
  r3->release();
  const std::int64_t tw2 = w2->acquire(RwSide::Write, false);
  EXPECT_GT(tw2, t3) << "above the reader's token too";
}

TEST_F(RwLockTest, OneHoldPerInstance) {
  auto a = rw("a");
  a->acquire(RwSide::Read, false);
  EXPECT_THROW(a->acquire(RwSide::Write, false), InvalidArgument);
  EXPECT_THROW(a->acquire(RwSide::Read, false), InvalidArgument);
  a->release();
  a->acquire(RwSide::Write, false);
  EXPECT_EQ(a->side(), RwSide::Write);
}

// ---- writer preference -------------------------------------------------------------------

TEST_F(RwLockTest, AWaitingWritersMarkStopsNewReadersNotTheReadersIn) {
  auto r1 = rw("r1"), r2 = rw("r2"), r3 = rw("r3"), w = rw("w");
  r1->acquire(RwSide::Read, false);
  r2->acquire(RwSide::Read, false);
  auto run = w->start_acquire(RwSide::Write, true, std::nullopt, 0.25);
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  ASSERT_NE(w->waiting_mark(), 0) << "the writer waits with its mark";
  SemaphoreDoc d = *doc();
  EXPECT_TRUE(mark_live(d, clock->wall_ms()));
  EXPECT_EQ(d.slots[4].uuid, "uuid-w");
  EXPECT_EQ(d.slots[4].fence, d.fence) << "a claim of the mark slot: it moved the fence";
  EXPECT_EQ(w->holders().waiting_writer->uuid, "uuid-w");
  EXPECT_FALSE(w->hold()) << "the mark is not the writer's hold";
  try {
    r3->acquire(RwSide::Read, false);
    FAIL() << "a new reader entered while a writer waits";
  } catch (const LockExists& e) {
    EXPECT_NE(std::string(e.what()).find("a writer is waiting (host-w pid 100)"), std::string::npos)
        << e.what();
  }
  // The readers in keep renewing, for longer than the mark's ttl.
  for (int i = 0; i < 8; ++i) {
    clock->advance(2000);
    ASSERT_TRUE(r1->touch());
    ASSERT_TRUE(r2->touch());
    ASSERT_EQ(run->attempt().kind, Kind::Wait);
    ASSERT_FALSE(r3->try_acquire(RwSide::Read)) << "round " << i;
  }
  r1->release();
  clock->advance(250);
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  r2->release();
  clock->advance(250);
  const AcquireStep s = run->attempt();
  ASSERT_EQ(s.kind, Kind::Acquired);
  EXPECT_TRUE(believes(*w));
  EXPECT_EQ(w->waiting_mark(), 0);
  d = *doc();
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[4])) << "the writer's claim emptied its mark";
  EXPECT_EQ(d.slots[3].uuid, "uuid-w");
  w->release();
  EXPECT_GT(r3->acquire(RwSide::Read, false), s.token) << "readers enter again";
}

TEST_F(RwLockTest, TheMarkIsRenewedOnlyPastHalfItsTtl) {
  auto r1 = rw("r1"), w = rw("w");
  r1->acquire(RwSide::Read, false);
  auto run = w->start_acquire(RwSide::Write, true, std::nullopt, 0.25);
  std::map<std::string, int> count;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (!applied) ++count[op];
  });
  // 40 attempts over 10 s (one ttl): a read each, the mark written once and renewed about
  // once per half ttl.
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(run->attempt().kind, Kind::Wait);
    clock->advance(250);
    r1->touch();
  }
  storage->set_fault_hook({});
  EXPECT_EQ(count["claim_semaphore"], 1) << "the mark, written once";
  EXPECT_GE(count["renew_semaphore"] - 40, 1) << "the reader's 40 touches, then the mark's";
  EXPECT_LE(count["renew_semaphore"] - 40, 3);
  EXPECT_EQ(count["read_semaphore"], 40);
  EXPECT_TRUE(mark_live(*doc(), clock->wall_ms()));
  run->cancel();
}

TEST_F(RwLockTest, WithoutPreferenceReadersKeepEnteringAndNoMarkIsWritten) {
  auto r1 = rw("r1", 3, 10, false), r2 = rw("r2", 3, 10, false), w = rw("w", 3, 10, false);
  r1->acquire(RwSide::Read, false);
  auto run = w->start_acquire(RwSide::Write, true, std::nullopt, 0.25);
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  EXPECT_EQ(w->waiting_mark(), 0);
  EXPECT_TRUE(semaphore_doc::is_empty(doc()->slots[4])) << "no mark";
  EXPECT_TRUE(r2->try_acquire(RwSide::Read)) << "a new reader enters next to a waiting writer";
  r1->release();
  clock->advance(250);
  EXPECT_EQ(run->attempt().kind, Kind::Wait) << "r2 is in";
  r2->release();
  clock->advance(250);
  EXPECT_EQ(run->attempt().kind, Kind::Acquired);
}

TEST_F(RwLockTest, ADeadWaitingWriterBlocksNewReadersForAtMostOneTtl) {
  auto r1 = rw("r1"), r2 = rw("r2"), w = rw("w");
  r1->acquire(RwSide::Read, false);
  auto run = w->start_acquire(RwSide::Write, true, std::nullopt, 0.25);
  const std::int64_t marked_at = clock->wall_ms();
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  ASSERT_NE(w->waiting_mark(), 0);
  run.reset();  // the writer's process dies: nobody drives the run, nobody releases the mark
  r1->release();
  EXPECT_FALSE(r2->try_acquire(RwSide::Read)) << "the mark stops new readers";
  clock->advance(9000);
  EXPECT_FALSE(r2->try_acquire(RwSide::Read));
  std::int64_t waited = 0;
  while (!r2->try_acquire(RwSide::Read)) {
    clock->advance(10);
    ASSERT_LT(clock->wall_ms(), marked_at + 10000 + 100) << "blocked longer than one ttl";
    ++waited;
  }
  EXPECT_GE(clock->wall_ms(), marked_at + 10000 - 100);
  EXPECT_TRUE(semaphore_doc::is_empty(doc()->slots[4])) << "the expired mark, emptied";
}

TEST_F(RwLockTest, AWriterThatGivesUpReleasesItsMark) {
  auto r1 = rw("r1"), r2 = rw("r2"), w = rw("w");
  r1->acquire(RwSide::Read, false);
  // Timeout: the blocking acquire (sleeping on the fake clock) ends, the mark released.
  EXPECT_THROW(w->acquire(RwSide::Write, true, 1.0, 0.1), AcquireTimeout);
  EXPECT_EQ(w->waiting_mark(), 0);
  EXPECT_FALSE(mark_live(*doc(), clock->wall_ms()));
  EXPECT_TRUE(r2->try_acquire(RwSide::Read)) << "readers enter at once";
  r2->release();
  // Cancel.
  int asked = 0;
  EXPECT_THROW(w->acquire(RwSide::Write, true, std::nullopt, 0.1, [&] { return ++asked > 5; }),
               Cancelled);
  EXPECT_EQ(w->waiting_mark(), 0);
  EXPECT_FALSE(mark_live(*doc(), clock->wall_ms()));
  // Non-blocking: refused without a mark (one read, nothing written).
  EXPECT_EQ(ops_during([&] { EXPECT_THROW(w->acquire(RwSide::Write, false), LockExists); }),
            (std::vector<std::string>{"read_semaphore"}));
  EXPECT_THROW(w->acquire(RwSide::Write, false, 1.0), InvalidArgument) << "timeout: blocking only";
  EXPECT_FALSE(w->hold());
  // An abandoned run's mark goes with release().
  auto run = w->start_acquire(RwSide::Write, true, std::nullopt, 0.1);
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  ASSERT_TRUE(mark_live(*doc(), clock->wall_ms()));
  run->cancel();
  w->release();
  EXPECT_FALSE(mark_live(*doc(), clock->wall_ms()));
  // A driven run's give_up() releases it (what an event loop calls when its task ends).
  auto driven = w->start_acquire(RwSide::Write, true, std::nullopt, 0.1);
  ASSERT_EQ(driven->attempt().kind, Kind::Wait);
  ASSERT_TRUE(mark_live(*doc(), clock->wall_ms()));
  EXPECT_EQ(driven->give_up().kind, Kind::Cancelled);
  EXPECT_EQ(w->waiting_mark(), 0);
  EXPECT_FALSE(mark_live(*doc(), clock->wall_ms()));
  EXPECT_TRUE(r2->try_acquire(RwSide::Read)) << "readers enter at once";
}

// ---- late renewals: the claims' clear_slots ------------------------------------------------

// The hole: a holder's renewal is sent before its deadline and lands late, after its
// slot expired and after a claimant of the OTHER side took the lock. Renewals compare the
// slot's expiry with the renewer's own now (at the send), so a slot the claim left as it
// was would match its {uuid, fence} and be revived -- and its holder, told "renewed",
// would believe it holds next to the claimant. The claim empties such slots.
TEST_F(RwLockTest, AReadersLateRenewalCannotReviveItNextToTheWriter) {
  auto r = rw("r"), w = rw("w");
  r->acquire(RwSide::Read, false);
  clock->advance(8500);  // before r's renew deadline (10 s - 1 s margin)
  bool in_flight = false;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "renew_semaphore" || applied || in_flight) return;
    in_flight = true;  // the renewal is slow: 2 s on the way to the server
    clock->advance(2000);
    ASSERT_TRUE(w->try_acquire(RwSide::Write)) << "r's slot expired at the server";
  });
  const std::optional<std::int64_t> renewed = r->touch();  // lands now, after w's claim
  storage->set_fault_hook({});
  ASSERT_TRUE(in_flight);
  ASSERT_TRUE(believes(*w));
  EXPECT_FALSE(renewed) << "the late renewal matched the expired reader slot";
  EXPECT_FALSE(believes(*r)) << "the reader believes it holds next to the writer";
  const SemaphoreDoc d = *doc();
  EXPECT_FALSE(d.slots[0].held_at(clock->wall_ms()))
      << "a live reader slot next to a live writer at the server";
}

TEST_F(RwLockTest, AWritersLateRenewalCannotReviveItNextToAReader) {
  auto w = rw("w"), r = rw("r");
  w->acquire(RwSide::Write, false);
  clock->advance(8500);
  bool in_flight = false;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "renew_semaphore" || applied || in_flight) return;
    in_flight = true;
    clock->advance(2000);
    ASSERT_TRUE(r->try_acquire(RwSide::Read)) << "w's slot expired at the server";
  });
  const std::optional<std::int64_t> renewed = w->touch();
  storage->set_fault_hook({});
  ASSERT_TRUE(in_flight);
  ASSERT_TRUE(believes(*r));
  EXPECT_FALSE(renewed);
  EXPECT_FALSE(believes(*w)) << "the writer believes it holds next to a reader";
  EXPECT_FALSE(doc()->slots[3].held_at(clock->wall_ms()));
}

// The same without any late write: a claimant's copy of the document says a slot of the
// other side has expired, but its holder renewed it since -- in time, and renewals do not
// move the fence, so the compare-and-set alone would pass. The claim's filter checks the
// slots it relies on (its clear_slots) at its own time: it fails, the claimant reads again.
TEST_F(RwLockTest, AnOldCopyCannotOutrunARenewalOfTheOtherSide) {
  auto r = rw("r"), w = rw("w");
  r->acquire(RwSide::Read, false);
  EXPECT_FALSE(w->try_acquire(RwSide::Write));  // w's copy: r's slot until now + 10 s
  clock->advance(8000);
  ASSERT_TRUE(r->touch());  // r's slot until now + 10 s again; the fence did not move
  clock->advance(2500);     // past the expiry w's copy shows
  EXPECT_EQ(ops_during([&] { EXPECT_FALSE(w->try_acquire(RwSide::Write)); }),
            (std::vector<std::string>{"claim_semaphore", "read_semaphore"}))
      << "the claim from the old copy fails, the read refuses";
  EXPECT_FALSE(w->hold());
  EXPECT_TRUE(believes(*r));
  // And a reader's old copy against a writer's renewal.
  r->release();
  auto r2 = rw("r2");
  ASSERT_TRUE(w->try_acquire(RwSide::Write));
  EXPECT_FALSE(r2->try_acquire(RwSide::Read));  // r2's copy: w's slot until now + 10 s
  clock->advance(8000);
  ASSERT_TRUE(w->touch());
  clock->advance(2500);
  EXPECT_FALSE(r2->try_acquire(RwSide::Read));
  EXPECT_FALSE(r2->hold());
  EXPECT_TRUE(believes(*w));
}

TEST_F(RwLockTest, ARenewalLandingBetweenAWritersReadAndItsClaimRefusesTheClaim) {
  auto r = rw("r"), w = rw("w");
  r->acquire(RwSide::Read, false);
  clock->advance(8500);
  storage->stall_next("renew_semaphore");  // times out at r, lands later
  EXPECT_THROW(r->touch(), StorageUnavailable);
  clock->advance(2000);  // r's slot has expired at the server
  bool landed = false;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "claim_semaphore" && !applied && !landed) landed = storage->land_stalled() == 1;
  });
  EXPECT_FALSE(w->try_acquire(RwSide::Write));  // read: free; the renewal lands; the claim
  storage->set_fault_hook({});
  ASSERT_TRUE(landed);
  EXPECT_FALSE(w->hold());
  const SemaphoreDoc d = *doc();
  EXPECT_TRUE(d.slots[0].held_at(clock->wall_ms())) << "the revived slot, left as it is";
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[3]));
}

// ---- kinds and options ---------------------------------------------------------------------

TEST_F(RwLockTest, MixedKindsAreRefusedWithoutWrites) {
  auto a = rw("a", 3, 10, true, "shared");
  a->acquire(RwSide::Read, false);
  const SemaphoreDoc before = *doc("shared");
  SemaphoreOptions so;
  so.key = "shared";
  so.limit = 3;
  so.collection = kColl;
  Semaphore sem(storage, so, clock, Identity{"uuid-s", "host-s", 1});
  sem.verify_time();
  std::vector<std::string> ops = ops_during([&] {
    try {
      sem.acquire(false);
      FAIL() << "a semaphore on a read-write lock's key";
    } catch (const InvalidArgument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("semaphore 'shared'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("holds a read-write lock's document"), std::string::npos) << msg;
    }
  });
  EXPECT_EQ(ops, (std::vector<std::string>{"server_info", "read_semaphore"}));
  EXPECT_THROW(sem.holders(), InvalidArgument);
  // And the other way round.
  so.key = "plain";
  Semaphore plain(storage, so, clock, Identity{"uuid-p", "host-p", 1});
  plain.acquire(false);
  RwLockOptions ro;
  ro.key = "plain";
  ro.max_readers = 3;
  RwLock lock(storage, ro, clock, Identity{"uuid-l", "host-l", 1});
  lock.verify_time();
  ops = ops_during([&] {
    try {
      lock.acquire(RwSide::Write, false);
      FAIL() << "a read-write lock on a semaphore's key";
    } catch (const InvalidArgument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("read-write lock 'plain'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("holds a semaphore's document"), std::string::npos) << msg;
    }
  });
  EXPECT_EQ(ops, (std::vector<std::string>{"server_info", "read_semaphore"}));
  EXPECT_FALSE(lock.hold());
  const SemaphoreDoc after = *doc("shared");
  EXPECT_EQ(after.fence, before.fence);
  EXPECT_EQ(storage->read_semaphore(kColl, "plain")->kind, "");
}

TEST_F(RwLockTest, MaxReadersIsFixedByTheDocumentAndChecked) {
  auto a = rw("a", 3);
  a->acquire(RwSide::Read, false);
  auto b = rw("b", 5);
  try {
    b->acquire(RwSide::Read, false);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("read-write lock 'db' has max_readers 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(rw("x", 0), InvalidArgument);
  EXPECT_THROW(rw("x", semaphore_doc::kMaxLimit + 1), InvalidArgument);
  EXPECT_EQ(rw("x", semaphore_doc::kMaxLimit)->options().collection, "mongorwlock");
  EXPECT_EQ(RwLockOptions{}.max_readers, 64);
  EXPECT_TRUE(RwLockOptions{}.writer_preference);
  // A malformed document (a slot missing) is a StorageError, nothing written.
  SemaphoreDoc bad = *doc();
  bad.slots.pop_back();
  storage->put_semaphore(kColl, bad);
  EXPECT_THROW(rw("y", 3)->acquire(RwSide::Write, false), StorageError);
}

TEST_F(RwLockTest, TokensStrictlyIncreaseAcrossSidesReleasesExpiriesAndDeletion) {
  std::vector<std::shared_ptr<RwLock>> n;
  for (int i = 0; i < 4; ++i) n.push_back(rw("n" + std::to_string(i), 2, 1));
  std::int64_t last = 0;
  for (int i = 0; i < 80; ++i) {
    auto& who = n[static_cast<std::size_t>(i % 4)];
    if (who->hold()) who->release();
    const int kind = (i * 7 + i / 3) % 4;
    if (kind == 1) clock->advance(1100);                    // everything expired
    if (kind == 2) storage->delete_semaphore(kColl, "db");  // a user deleted it
    const RwSide side = (i % 3 == 0) ? RwSide::Write : RwSide::Read;
    if (side == RwSide::Write)
      for (auto& o : n)
        if (o != who && o->hold()) o->release();
    const std::int64_t token = who->acquire(side, true, 5.0, 0.05);
    ASSERT_GT(token, last) << "acquisition " << i;
    last = token;
  }
  EXPECT_GE(last, 2 * kEpoch) << "deletions moved the counter to new epochs";
}

// ---- keep-alive leases ---------------------------------------------------------------------

class RwLockLeaseTest : public RwLockTest {
 protected:
  void SetUp() override {
    RwLockTest::SetUp();
    storage->set_clock_sample_board(std::make_shared<ClockSampleBoard>());
    renewer = std::make_unique<Renewer>(clock, 0);
  }
  void TearDown() override {
    leases.clear();
    renewer.reset();
  }
  KeepAliveLease& keep(const std::shared_ptr<RwLock>& h, RwSide side) {
    KeepAliveOptions o;
    o.blocking = false;
    o.on_lost = [this] { ++lost; };
    leases.push_back(KeepAliveLease::acquire(h, side, o, renewer.get()));
    return *leases.back();
  }
  std::unique_ptr<Renewer> renewer;
  std::vector<std::unique_ptr<KeepAliveLease>> leases;
  int lost = 0;
};

TEST_F(RwLockLeaseTest, ReadAndWriteHoldsAreKeptAliveInBatches) {
  auto r1 = rw("r1", 3, 3), r2 = rw("r2", 3, 3), r3 = rw("r3", 3, 3), w = rw("w", 3, 3);
  keep(r1, RwSide::Read);
  keep(r2, RwSide::Read);
  keep(r3, RwSide::Read);
  std::map<std::string, int> count;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (!applied) ++count[op];
  });
  mongoelector::testing::run_renewer_for(*clock, *renewer, 30000);  // ten ttls
  storage->set_fault_hook({});
  EXPECT_EQ(lost, 0);
  for (auto& l : leases) ASSERT_FALSE(l->lost()) << l->lost_reason();
  EXPECT_EQ(count["renew_semaphore"], 0) << "no hold renewed on its own";
  EXPECT_GE(count["renew_semaphores"], 25) << "one batch per interval (1 s)";
  EXPECT_LE(count["renew_semaphores"], 35) << "not one call per hold";
  EXPECT_FALSE(w->try_acquire(RwSide::Write)) << "the kept reads keep the writer out";
  EXPECT_EQ(leases[0]->rwlock(), r1);
  leases.clear();  // closes: releases the reads
  KeepAliveLease& wl = keep(w, RwSide::Write);
  mongoelector::testing::run_renewer_for(*clock, *renewer, 30000);
  EXPECT_FALSE(wl.lost()) << wl.lost_reason();
  EXPECT_FALSE(r1->try_acquire(RwSide::Read)) << "the kept write keeps readers out";
  const std::int64_t fence = wl.fence();
  leases.clear();
  EXPECT_GT(r1->acquire(RwSide::Read, false), fence);
}

TEST_F(RwLockLeaseTest, AReadLeaseWhoseSlotExpiredIsLostAndTheWriterLeftAlone) {
  auto r = rw("r", 3, 3), w = rw("w", 3, 3);
  KeepAliveLease& l = keep(r, RwSide::Read);
  // Behind its back: the slot is made to expire (a frozen node) and a writer takes the
  // lock, emptying it.
  SemaphoreDoc d = *doc();
  d.slots[0].ts_expire = DateTime{clock->wall_ms()};
  storage->put_semaphore(kColl, d);
  ASSERT_TRUE(w->try_acquire(RwSide::Write));
  mongoelector::testing::run_renewer_for(*clock, *renewer, 1500);
  EXPECT_TRUE(l.lost());
  EXPECT_EQ(lost, 1);
  EXPECT_NE(l.lost_reason().find("no longer ours"), std::string::npos) << l.lost_reason();
  EXPECT_EQ(doc()->slots[3].uuid, "uuid-w") << "the writer left alone";
}

}  // namespace
