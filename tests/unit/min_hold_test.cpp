// Locker::release_min_hold (scheduler semantics, ShedLock's lockAtLeastFor): the lock stays
// taken until min_hold after its acquisition on the SERVER's clock, whatever the releasing
// host's clock says, and then frees itself with nobody left to release it.
#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

class MinHoldTest : public CoreTest {};

TEST_F(MinHoldTest, KeepsTheLockTakenUntilMinHoldAfterTheAcquire) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  const std::int64_t acquired = a->hold()->created_ms;
  clock->advance(1000);  // the job took 1 s
  auto frees_at = a->release_min_hold(30);
  ASSERT_TRUE(frees_at.has_value());
  EXPECT_EQ(*frees_at, acquired + 30000) << "counted from the acquire, on the server's clock";
  EXPECT_FALSE(a->hold().has_value()) << "the holder has let go";
  auto d = storage->read("mongolocker", "k");
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->locked);
  EXPECT_EQ(d->ts_expire->ms, acquired + 30000) << "longer than the ttl: min_hold wins";
  clock->advance(28999);
  EXPECT_FALSE(b->try_acquire().has_value()) << "a second run within min_hold is refused";
  clock->advance(1);
  EXPECT_TRUE(b->try_acquire().has_value()) << "free at acquire + min_hold exactly";
}

TEST_F(MinHoldTest, ShortensALongLease) {
  auto a = make_locker("a", 600);
  auto b = make_locker("b", 600);
  ASSERT_TRUE(a->try_acquire().has_value());
  clock->advance(1000);
  ASSERT_TRUE(a->release_min_hold(5).has_value());
  clock->advance(3999);
  EXPECT_FALSE(b->try_acquire().has_value());
  clock->advance(1);
  EXPECT_TRUE(b->try_acquire().has_value()) << "not the 600 s ttl";
}

TEST_F(MinHoldTest, PastMinHoldItIsAPlainRelease) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  clock->advance(6000);
  EXPECT_FALSE(a->release_min_hold(5).has_value());
  EXPECT_TRUE(b->try_acquire().has_value()) << "released at once";
}

TEST_F(MinHoldTest, TheHostClockDoesNotCount) {
  // The releasing host's wall clock is an hour behind the server: min_hold is still
  // measured on the server's clock.
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  server_skew_ms = 3600 * 1000;
  ASSERT_TRUE(a->try_acquire().has_value());
  clock->advance(500);
  ASSERT_TRUE(a->release_min_hold(20).has_value());
  clock->advance(19000);
  EXPECT_FALSE(b->try_acquire().has_value());
  clock->advance(500);
  EXPECT_TRUE(b->try_acquire().has_value());
}

TEST_F(MinHoldTest, ATakenOverLockIsNotTouched) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  auto tb = b->try_acquire(/*force=*/true);
  ASSERT_TRUE(tb.has_value());
  const auto before = storage->read("mongolocker", "k");
  EXPECT_FALSE(a->release_min_hold(60).has_value());
  const auto after = storage->read("mongolocker", "k");
  EXPECT_EQ(after->uuid, "uuid-b");
  EXPECT_EQ(after->ts_expire->ms, before->ts_expire->ms) << "b's hold is not extended";
}

TEST_F(MinHoldTest, RefusesBadDurations) {
  auto a = make_locker("a", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  EXPECT_THROW(a->release_min_hold(-1), InvalidArgument);
  EXPECT_THROW(a->release_min_hold(1.0 / 0.0), InvalidArgument);
  EXPECT_TRUE(a->hold().has_value()) << "a refused call keeps the hold";
}

}  // namespace
