// The Locker's operations in parts (locker.h, "in parts") and AcquireRun's attempt in
// parts: what an event loop drives when it sends the writes itself. The parts must make
// no round trip (or say "on a thread" when one is needed), and the outcome must be
// claim_once's, release()'s and touch()'s: the same holds, tokens and strandings.
#include <string>
#include <vector>

#include "exceptions.h"
#include "fixtures.h"
#include "hold/acquire_run.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

class PartsTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    storage->set_fault_hook([this](const std::string& op, bool applied) {
      if (!applied) ops.push_back(op);
    });
  }
  std::unique_ptr<Locker> make(const std::string& name, bool deleting = false) {
    LockerOptions o;
    o.key = "k";
    o.ttl_s = 10;
    o.delete_on_release = deleting;
    o.ensure_indexes = false;
    return std::make_unique<Locker>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }
  // A locker that has made its first claim (server facts, a clock sample), holding
  // nothing.
  std::unique_ptr<Locker> warm(const std::string& name, bool deleting = false) {
    auto l = make(name, deleting);
    l->acquire();
    l->release();
    return l;
  }
  // The storage calls `f` makes.
  template <class F>
  std::vector<std::string> calls(F&& f) {
    ops.clear();
    f();
    return ops;
  }
  // The claim's write as the transport sends it: claim_command's operation, applied by
  // the memory storage's equivalent call.
  std::optional<LockDoc> send(Locker& l, const Locker::PendingClaim& p) {
    const commands::Command c = l.claim_command(p);
    if (c.op == commands::Op::insert_one) return storage->insert_claim("mongolocker", p.claim);
    EXPECT_EQ(c.op, commands::Op::find_and_modify);
    return storage->claim("mongolocker", p.claim, p.force);
  }
  using Ops = std::vector<std::string>;
  std::vector<std::string> ops;
};

TEST_F(PartsTest, BeginClaimSaysOnAThreadUntilTheFirstClaimsRoundTripsAreDone) {
  auto a = make("a");
  EXPECT_EQ(calls([&] { EXPECT_FALSE(a->begin_claim(false)); }), Ops{})
      << "the server's safety and a clock sample are round trips";
  a->acquire();
  a->release();
  EXPECT_EQ(calls([&] { EXPECT_TRUE(a->begin_claim(false)); }), Ops{});
  clock->advance(61 * 1000);  // the clock sample is stale: refreshing it is a round trip
  EXPECT_FALSE(a->begin_claim(false));
}

TEST_F(PartsTest, AClaimInPartsTakesTheLockAsAcquireDoes) {
  auto a = warm("a");
  const std::int64_t before = storage->read("mongolocker", "k")->fence;
  std::optional<Locker::PendingClaim> p;
  EXPECT_EQ(calls([&] { p = a->begin_claim(false); }), Ops{});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->insert) << "a locker that keeps its document claims with the upsert";
  const std::optional<LockDoc> doc = send(*a, *p);
  std::optional<Claimed> got;
  EXPECT_EQ(calls([&] { got = a->land_claim(*p, doc); }), Ops{}) << "the token came with it";
  ASSERT_TRUE(got);
  EXPECT_EQ(got->token, before + 1);
  EXPECT_EQ(a->fence(), got->fence);
  EXPECT_TRUE(a->owned());
}

TEST_F(PartsTest, AHeldLockLandsAsNothingAndNamesItsHolder) {
  auto b = warm("b");
  auto a = make("a");
  a->acquire();
  std::optional<Locker::PendingClaim> p = b->begin_claim(false);
  ASSERT_TRUE(p);
  const std::optional<LockDoc> doc = send(*b, *p);
  EXPECT_FALSE(doc);
  EXPECT_FALSE(b->land_claim(*p, doc));
  EXPECT_FALSE(b->hold());
  EXPECT_EQ(b->refusal_message(), "k owned by host-a pid 100");
}

TEST_F(PartsTest, AnInsertThatMeetsADocumentGoesOnWithTheReadAndTheUpsert) {
  auto a = warm("a", /*deleting=*/true);
  std::optional<Locker::PendingClaim> p = a->begin_claim(false);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->insert) << "its own deleting release: the document is most likely gone";
  // Another node left a released document meanwhile.
  auto other = make("o");
  other->acquire();
  other->release();
  const std::int64_t left = storage->read("mongolocker", "k")->fence;
  EXPECT_FALSE(storage->insert_claim("mongolocker", p->claim));
  std::optional<LockDoc> doc;
  EXPECT_EQ(calls([&] { doc = a->claim_after_insert_refused(*p); }), (Ops{"read", "claim"}));
  ASSERT_TRUE(doc);
  const std::optional<Claimed> got = a->land_claim(*p, doc);
  ASSERT_TRUE(got);
  EXPECT_GT(got->token, left) << "above every token before it";
}

TEST_F(PartsTest, ANewDocumentsClaimLandsOnAThreadWithItsEpoch) {
  auto a = warm("a", /*deleting=*/true);
  std::optional<Locker::PendingClaim> p = a->begin_claim(false);
  ASSERT_TRUE(p);
  const std::optional<LockDoc> doc = send(*a, *p);
  ASSERT_TRUE(doc);
  EXPECT_TRUE(a->anchors(doc)) << "fence 1 of a new document: a new epoch first";
  std::optional<Claimed> got;
  EXPECT_EQ(calls([&] { got = a->land_claim(*p, doc); }), (Ops{"bump_epoch", "set_fence"}));
  ASSERT_TRUE(got);
  EXPECT_GE(got->token, std::int64_t{1} << 32);
}

TEST_F(PartsTest, ADroppedClaimIsStrandedWithoutARoundTripAndSettledLater) {
  auto a = warm("a");
  std::optional<Locker::PendingClaim> p = a->begin_claim(false);
  ASSERT_TRUE(p);
  ASSERT_TRUE(send(*a, *p)) << "the write landed; its caller never learnt it (cancelled)";
  EXPECT_EQ(calls([&] { a->drop_claim(*p); }), Ops{});
  EXPECT_TRUE(a->has_stranded());
  EXPECT_FALSE(a->hold());
  EXPECT_FALSE(a->begin_claim(false)) << "a stranded hold is settled on a thread first";
  // Settling finds the hold by what its claim wrote (its fence unknown) and releases it.
  EXPECT_EQ(calls([&] { a->settle_stranded(); }), (Ops{"read", "release"}));
  EXPECT_FALSE(a->has_stranded());
  auto b = make("b");
  EXPECT_TRUE(b->try_acquire()) << "the dropped claim's hold was released";
}

TEST_F(PartsTest, AClaimThatOutlivedItsLeaseIsStrandedNotInstalled) {
  auto a = warm("a");
  std::optional<Locker::PendingClaim> p = a->begin_claim(false);
  ASSERT_TRUE(p);
  const std::optional<LockDoc> doc = send(*a, *p);
  clock->advance(10 * 1000);  // the reply came a ttl after the send
  EXPECT_EQ(calls([&] { EXPECT_THROW(a->land_claim(*p, doc), StorageUnavailable); }), Ops{});
  EXPECT_FALSE(a->hold());
  EXPECT_TRUE(a->has_stranded());
}

TEST_F(PartsTest, AReleaseInPartsIsReleasesWrite) {
  auto a = warm("a");
  a->acquire();
  const std::int64_t fence = a->fence();
  Locker::PendingRelease r;
  EXPECT_EQ(calls([&] { r = a->begin_release(); }), Ops{});
  ASSERT_FALSE(r.on_thread);
  ASSERT_TRUE(r.hold);
  EXPECT_EQ(r.hold->fence, fence);
  const commands::Command c = a->release_command(r);
  EXPECT_EQ(c.op, commands::Op::update_one) << "keeps the document";
  const bool matched = storage->release("mongolocker", "k", a->identity().uuid, fence, r.now_ms,
                                        /*delete_document=*/false);
  EXPECT_EQ(calls([&] { a->release_landed(r, matched); }), Ops{});
  EXPECT_FALSE(a->hold());
  EXPECT_FALSE(a->has_stranded());
  auto b = make("b");
  EXPECT_TRUE(b->try_acquire());
  // Nothing held: nothing to send.
  r = a->begin_release();
  EXPECT_FALSE(r.on_thread);
  EXPECT_FALSE(r.hold);
}

TEST_F(PartsTest, AFailedReleaseInPartsLeavesTheHoldInDoubtForTheNextClaim) {
  auto a = warm("a");
  a->acquire();
  const Locker::PendingRelease r = a->begin_release();
  ASSERT_TRUE(r.hold);
  a->release_failed(r);  // timed out: it may still land
  EXPECT_FALSE(a->hold());
  EXPECT_TRUE(a->has_stranded());
  EXPECT_TRUE(a->begin_release().on_thread) << "release() settles it, on a thread";
  EXPECT_EQ(calls([&] { a->acquire(); }), (Ops{"release", "claim"}))
      << "released (fenced) before the next claim";
}

TEST_F(PartsTest, ATouchInPartsRenewsAsTouchDoes) {
  auto a = warm("a");
  a->acquire();
  clock->advance(2000);
  std::optional<RenewTicket> t;
  EXPECT_EQ(calls([&] { t = a->begin_touch(); }), Ops{});
  ASSERT_TRUE(t);
  const commands::Command c = a->renew_command(*t);
  EXPECT_EQ(c.op, commands::Op::update_one);
  const bool ok = storage->renew("mongolocker", "k", a->identity().uuid, t->request.fence,
                                 t->at.now_ms, t->request.expire_ms);
  std::optional<std::int64_t> expiry;
  EXPECT_EQ(calls([&] { expiry = a->finish_touch(*t, ok); }), Ops{});
  ASSERT_TRUE(expiry);
  EXPECT_EQ(*expiry, storage->read("mongolocker", "k")->ts_expire->ms);
  EXPECT_EQ(a->lease_deadline_mono(), clock->mono_ms() + 10 * 1000);
  // Not ours any more (forced away): the renewal matches nothing and the hold is dropped.
  auto b = make("b");
  b->acquire(true, std::nullopt, 0.25, /*force=*/true);
  t = a->begin_touch();
  ASSERT_TRUE(t);
  const bool lost = storage->renew("mongolocker", "k", a->identity().uuid, t->request.fence,
                                   t->at.now_ms, t->request.expire_ms);
  EXPECT_FALSE(a->finish_touch(*t, lost));
  EXPECT_FALSE(a->hold());
}

TEST_F(PartsTest, ReadsAreJudgedAsOwnedAndCurrentJudgeThem) {
  auto b = warm("b");
  auto a = warm("a");
  a->acquire();
  const std::optional<LockDoc> doc = storage->read("mongolocker", "k");
  EXPECT_EQ(calls([&] {
              EXPECT_TRUE(a->owned_by(doc));
              EXPECT_FALSE(b->owned_by(doc));
              EXPECT_TRUE(b->current_of(doc));
              EXPECT_FALSE(b->current_of(std::nullopt));
            }),
            Ops{});
  clock->advance(11 * 1000);  // expired
  EXPECT_FALSE(b->current_of(storage->read("mongolocker", "k")));
}

// ---- AcquireRun's attempt in parts --------------------------------------------------

class RunPartsTest : public PartsTest {
 protected:
  std::unique_ptr<AcquireRun> run_of(Locker& l, bool blocking = true) {
    return l.start_acquire(blocking, std::nullopt, 0.25, false);
  }
};

TEST_F(RunPartsTest, TheFirstAttemptsTimeCheckIsARoundTripSoItRunsOnAThread) {
  auto a = make("a");  // timeparanoid by default, nothing checked yet
  auto run = run_of(*a);
  const std::optional<AcquireStep> s = run->begin_attempt(/*round_trips=*/false);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, AcquireStep::Kind::TryNow) << "attempt() must run it";
  EXPECT_EQ(run->attempt().kind, AcquireStep::Kind::Acquired) << "and it still can";
}

TEST_F(RunPartsTest, AnAttemptInPartsEndsAsAttemptWould) {
  auto a = warm("a");  // its time check is cached
  auto run = run_of(*a);
  EXPECT_FALSE(run->begin_attempt(/*round_trips=*/false)) << "begun";
  EXPECT_EQ(run->next().kind, AcquireStep::Kind::TryNow) << "in flight";
  std::optional<Locker::PendingClaim> p = a->begin_claim(false);
  ASSERT_TRUE(p);
  const std::optional<Claimed> got = a->land_claim(*p, send(*a, *p));
  const AcquireStep s = run->end_attempt(got, "");
  EXPECT_EQ(s.kind, AcquireStep::Kind::Acquired);
  EXPECT_EQ(s.token, a->fence());
  EXPECT_EQ(run->result(), a->fence());
}

TEST_F(RunPartsTest, AHeldNonBlockingAttemptReportsTheHolderGiven) {
  auto a = warm("a");
  auto h = make("h");
  h->acquire();
  auto run = run_of(*a, /*blocking=*/false);
  ASSERT_FALSE(run->begin_attempt(false));
  EXPECT_EQ(run->end_attempt(std::nullopt, "k owned by host-h pid 100").kind,
            AcquireStep::Kind::Held);
  EXPECT_THROW(
      {
        try {
          run->result();
        } catch (const LockExists& e) {
          EXPECT_STREQ(e.what(), "k owned by host-h pid 100");
          throw;
        }
      },
      LockExists);
}

TEST_F(RunPartsTest, AClaimThatLandsAfterCancelIsReleasedByItsEnd) {
  auto a = warm("a");
  auto run = run_of(*a);
  ASSERT_FALSE(run->begin_attempt(false));
  std::optional<Locker::PendingClaim> p = a->begin_claim(false);
  ASSERT_TRUE(p);
  const std::optional<Claimed> got = a->land_claim(*p, send(*a, *p));
  ASSERT_TRUE(got);
  EXPECT_EQ(run->cancel().kind, AcquireStep::Kind::Cancelled);
  EXPECT_EQ(run->end_attempt(got, "").kind, AcquireStep::Kind::Cancelled);
  EXPECT_FALSE(a->hold()) << "released, fenced by its token";
  EXPECT_THROW(run->result(), Cancelled);
}

TEST_F(RunPartsTest, AFailedAttemptEndsTheRunWithItsError) {
  auto a = warm("a");
  auto run = run_of(*a);
  ASSERT_FALSE(run->begin_attempt(false));
  run->fail_attempt(std::make_exception_ptr(StorageUnavailable("timed out")));
  EXPECT_EQ(run->next().kind, AcquireStep::Kind::Failed);
  EXPECT_THROW(run->result(), StorageUnavailable);
}
