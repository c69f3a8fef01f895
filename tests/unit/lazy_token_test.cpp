// lazy_token: a claim that creates the lock document costs one round trip; the token is
// assigned by the hold's first token() and keeps invariant 2 (strictly increasing in the
// order the holds began) against eager holders, takeovers and late releases.
#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {
constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;
}

class LazyTokenTest : public CoreTest {
 protected:
  std::unique_ptr<Locker> make(const std::string& name, bool lazy, double ttl_s = 10) {
    LockerOptions o;
    o.key = "k";
    o.ttl_s = ttl_s;
    o.delete_on_release = true;  // every acquire after a release creates the document
    o.lazy_token = lazy;
    return std::make_unique<Locker>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }
  // Round trips of one acquire after a release that deleted the document.
  std::int64_t acquire_after_delete_cost(Locker& l) {
    l.acquire();
    l.release();
    EXPECT_FALSE(storage->read("mongolocker", "k"));  // deleted
    const std::int64_t before = storage->round_trips();
    l.acquire();
    return storage->round_trips() - before;
  }
};

TEST_F(LazyTokenTest, AcquireThatCreatesTheDocumentIsOneRoundTrip) {
  auto lazy = make("a", true);
  EXPECT_EQ(acquire_after_delete_cost(*lazy), 1);
  lazy->release();
  auto eager = make("b", false);
  EXPECT_EQ(acquire_after_delete_cost(*eager), 3);  // claim, epoch, fence change
}

TEST_F(LazyTokenTest, DeferredAcquireReturnsZeroAndTokenCostsTwoRoundTripsOnce) {
  auto a = make("a", true);
  EXPECT_EQ(a->acquire(), 0);
  EXPECT_LT(a->fence(), kEpochUnit);  // the document's counter, not a token
  const std::int64_t before = storage->round_trips();
  auto t = a->token();
  ASSERT_TRUE(t);
  EXPECT_GE(*t, kEpochUnit);
  EXPECT_EQ(storage->round_trips() - before, 2);
  EXPECT_EQ(a->token(), t);  // assigned once
  EXPECT_EQ(storage->round_trips() - before, 2);
  EXPECT_EQ(a->fence(), *t);
  EXPECT_TRUE(a->touch());  // renewals name the new fence
  EXPECT_TRUE(a->owned());
}

TEST_F(LazyTokenTest, TokensIncreaseAcrossLazyAndEagerHolders) {
  auto a = make("a", true);
  auto b = make("b", false);
  std::int64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    Locker& who = (i % 3 == 0) ? *b : *a;
    std::int64_t got = who.acquire();
    // Some lazy holds never ask for their token: they must not disturb the order.
    if (&who == b.get() || i % 2 == 0) {
      auto t = &who == b.get() ? std::optional<std::int64_t>(got) : who.token();
      ASSERT_TRUE(t);
      EXPECT_GT(*t, last) << "hold " << i;
      last = *t;
    }
    if (i % 4 == 1) {
      clock->advance(10000 + 10);  // expires; the next holder takes the document over
    } else {
      who.release();
    }
  }
}

TEST_F(LazyTokenTest, TokenOfAHoldTakenOverIsRefusedAndDropsTheHold) {
  auto a = make("a", true, 5);
  a->acquire();
  clock->advance(5000 + 10);
  auto b = make("b", false, 5);
  const std::int64_t tb = b->acquire(false);
  EXPECT_GE(tb, kEpochUnit);
  EXPECT_FALSE(a->token());  // a's hold is gone: no token, and no longer held locally
  EXPECT_FALSE(a->hold());
  b->release();
  a->acquire(false);
  auto ta = a->token();
  ASSERT_TRUE(ta);
  EXPECT_GT(*ta, tb);
}

TEST_F(LazyTokenTest, ReleaseInDoubtMakesTheNextTokenEager) {
  // A release that timed out may land later, on a new hold of the same locker whose
  // recreated document restarted at the same fence. After it, tokens are assigned at
  // acquire, so the late release no longer matches the new hold.
  auto a = make("a", true);
  a->acquire();
  const std::int64_t provisional = a->fence();
  storage->stall_next("release");
  EXPECT_THROW(a->release(), StorageUnavailable);
  const std::int64_t token = a->acquire();  // re-sends the release, then claims anew
  EXPECT_GE(token, kEpochUnit);
  EXPECT_EQ(storage->land_stalled(), 1);  // the first release lands now: no match
  auto doc = storage->read("mongolocker", "k");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->uuid, "uuid-a");
  EXPECT_EQ(doc->fence, token);
  EXPECT_NE(doc->fence, provisional);
  EXPECT_TRUE(a->owned());
}

TEST_F(LazyTokenTest, LateReleaseBeforeTheTokenNeverFreesANewerHoldOfAnother) {
  auto a = make("a", true, 5);
  a->acquire();
  storage->stall_next("release");
  EXPECT_THROW(a->release(), StorageUnavailable);
  clock->advance(5000 + 10);
  auto b = make("b", true, 5);
  b->acquire(false);  // takes over the expired document: a different uuid
  EXPECT_EQ(storage->land_stalled(), 1);
  EXPECT_TRUE(b->owned());
  EXPECT_TRUE(b->token());
}
