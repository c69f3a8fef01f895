// Invariant 2: tokens for one key strictly increase across release, expiry, force and
// deletion of the document by someone else (TTL monitor, an original node).
#include <random>

#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

class FencingTest : public CoreTest {};

TEST_F(FencingTest, ReleaseKeepsTheCounter) {
  auto a = make_locker("a");
  std::int64_t t1 = a->acquire();
  a->release();
  std::int64_t t2 = a->acquire();
  EXPECT_EQ(t2, t1 + 1);  // common path: one round trip, counter in the document
}

TEST_F(FencingTest, DeletionByOthersMovesToANewEpoch) {
  auto a = make_locker("a");
  std::int64_t t1 = a->acquire();
  a->release();
  std::int64_t t2 = a->acquire();
  storage->delete_lock("mongolocker", "k");  // TTL monitor or an original node
  std::int64_t t3 = a->acquire();
  EXPECT_GT(t3, t2);
  EXPECT_GT(t2, t1);
  EXPECT_EQ(t3 >> 32, (t1 >> 32) + 1);
}

TEST_F(FencingTest, HundredMixedAcquisitionsStrictlyIncrease) {
  auto a = make_locker("a", 5);
  auto b = make_locker("b", 5);
  std::mt19937 rng(7);
  std::int64_t last = 0;
  for (int i = 0; i < 100; ++i) {
    Locker& who = (i % 2) ? *a : *b;
    Locker& other = (i % 2) ? *b : *a;
    std::int64_t token = 0;
    switch (rng() % 4) {
      case 0:  // after a release
        other.release(true);
        token = who.acquire(false);
        break;
      case 1:  // after expiry (plus the claimant's drift allowance: claims are conservative)
        clock->advance(5000 + 10);
        token = who.acquire(false);
        break;
      case 2:  // forced takeover
        token = who.acquire(false, std::nullopt, 0.25, true);
        break;
      case 3:  // document deleted behind our back
        storage->delete_lock("mongolocker", "k");
        token = who.acquire(false);
        break;
    }
    EXPECT_GT(token, last) << "acquisition " << i;
    last = token;
  }
}

TEST_F(FencingTest, StalledCreatorLosesItsClaimSafely) {
  // b takes over a freshly created, not yet anchored document: both paths bump the
  // epoch, and the stale holder cannot set its fence.
  auto a = make_locker("a", 5);
  a->acquire();
  storage->delete_lock("mongolocker", "k");
  auto t = a->try_acquire();
  ASSERT_TRUE(t);
  auto b = make_locker("b", 5);
  clock->advance(5000);
  auto tb = b->try_acquire();
  ASSERT_TRUE(tb);
  EXPECT_GT(*tb, *t);
  EXPECT_FALSE(storage->set_fence("mongolocker", "k", "uuid-a", *t,
                                  storage->read("mongolocker", "k")->ts_created->ms, *t + 1));
}
