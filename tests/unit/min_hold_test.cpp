// Locker::release_min_hold (scheduler semantics, ShedLock's lockAtLeastFor): the lock stays
// taken until min_hold after its acquisition on the SERVER's clock, whatever the releasing
// host's clock says, and then frees itself with nobody left to release it.
#include "exceptions.h"
#include "fixtures.h"
#include "lease/keepalive.h"
#include "lease/lease.h"

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

TEST_F(MinHoldTest, ALeaseClosedWithMinHoldStaysTakenUntilThen) {
  Renewer renewer(clock, 0);
  auto a = std::shared_ptr<Locker>(make_locker("a", 10));
  auto b = make_locker("b", 10);
  KeepAliveOptions o;
  o.blocking = false;
  auto lease = KeepAliveLease::acquire(a, o, &renewer);
  const std::int64_t acquired = a->hold()->created_ms;
  clock->advance(2000);
  EXPECT_THROW(lease->close(-3), InvalidArgument);
  EXPECT_FALSE(lease->lost());
  lease->close(60);
  EXPECT_EQ(storage->read("mongolocker", "k")->ts_expire->ms, acquired + 60000);
  clock->advance(57999);
  EXPECT_FALSE(b->try_acquire().has_value()) << "no renewals, yet taken until min_hold";
  clock->advance(1);
  EXPECT_TRUE(b->try_acquire().has_value());
}

// The write that may shorten the hold is sent only after the holder let go of it
// locally: nothing in this process counts on the hold while the write is in flight.
TEST_F(MinHoldTest, TheHolderLetsGoBeforeTheShorteningWriteIsSent) {
  auto a = make_locker("a", 600);
  ASSERT_TRUE(a->try_acquire().has_value());
  clock->advance(1000);
  int writes = 0;
  bool held_during_write = true;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "set_expiry" || applied) return;
    ++writes;
    held_during_write = a->hold().has_value() || a->lease().has_value();
  });
  ASSERT_TRUE(a->release_min_hold(5).has_value());
  EXPECT_EQ(writes, 1);
  EXPECT_FALSE(held_during_write);
}

// A failed minimum-hold write may still land: the hold stays given up, and the write is
// sent again (by the next release_min_hold, release or acquire), never replaced by a
// release that would free the lock before the minimum hold.
TEST_F(MinHoldTest, AFailedMinHoldWriteIsSentAgainNeverAReleaseBeforeTheBound) {
  auto a = make_locker("a", 600);
  auto b = make_locker("b", 600);
  ASSERT_TRUE(a->try_acquire().has_value());
  const std::int64_t acquired = a->hold()->created_ms;
  clock->advance(1000);
  storage->stall_next("set_expiry");
  EXPECT_THROW(a->release_min_hold(30), StorageUnavailable);
  EXPECT_FALSE(a->hold().has_value()) << "given up: the write may still land";
  EXPECT_TRUE(a->has_stranded());
  EXPECT_FALSE(a->try_acquire().has_value()) << "the owner too waits for the minimum hold";
  EXPECT_FALSE(a->has_stranded());
  EXPECT_EQ(storage->read("mongolocker", "k")->ts_expire->ms, acquired + 30000);
  EXPECT_EQ(storage->land_stalled(), 1);  // the first write lands late: the same bound
  EXPECT_EQ(storage->read("mongolocker", "k")->ts_expire->ms, acquired + 30000);
  clock->advance(acquired + 30000 - 1 - storage->server_time_ms());
  EXPECT_FALSE(b->try_acquire().has_value());
  clock->advance(1);
  EXPECT_TRUE(b->try_acquire().has_value());
}

TEST_F(MinHoldTest, RetryingAFailedMinHoldReleaseReturnsItsBound) {
  auto a = make_locker("a", 600);
  ASSERT_TRUE(a->try_acquire().has_value());
  const std::int64_t acquired = a->hold()->created_ms;
  clock->advance(1000);
  storage->set_unavailable(true);
  EXPECT_THROW(a->release_min_hold(30), StorageUnavailable);
  storage->set_unavailable(false);
  EXPECT_EQ(a->release_min_hold(30), std::optional<std::int64_t>(acquired + 30000));
  EXPECT_FALSE(a->has_stranded());
  EXPECT_FALSE(a->release_min_hold(30).has_value()) << "nothing left";
  EXPECT_EQ(storage->read("mongolocker", "k")->ts_expire->ms, acquired + 30000);
}

// --- once per window ------------------------------------------------------------

TEST_F(MinHoldTest, AWindowIsClaimedOnceWhoeverAsks) {
  auto a = make_locker("a", 10, "report");
  auto b = make_locker("b", 10, "report");
  // Windows of an hour, aligned on the server's clock.
  const std::int64_t hour = 3600 * 1000;
  const std::int64_t now = storage->server_time_ms();
  clock->advance(hour - now % hour + 1000);  // 1 s into a window
  const std::int64_t start = storage->server_time_ms() - 1000;
  auto won = a->claim_window(3600);
  ASSERT_TRUE(won.has_value());
  EXPECT_EQ(*won, start);
  EXPECT_FALSE(b->claim_window(3600).has_value()) << "another node, same window";
  EXPECT_FALSE(a->claim_window(3600).has_value()) << "the same node, same window";
  clock->advance(hour - 2000);  // 1 s before the window ends
  EXPECT_FALSE(b->claim_window(3600).has_value());
  clock->advance(1000);  // the next window
  auto next = b->claim_window(3600);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, start + hour);
  EXPECT_FALSE(a->claim_window(3600).has_value());
  // The key's own lock is untouched by window claims.
  EXPECT_TRUE(a->try_acquire().has_value());
}

TEST_F(MinHoldTest, WindowsFollowTheServersClockNotTheHosts) {
  const std::int64_t hour = 3600 * 1000;
  // Host wall clock: 10 minutes into an hour; the server: 5 minutes before the next one.
  clock->advance(hour - clock->wall_ms() % hour + 600 * 1000);
  server_skew_ms = 45 * 60 * 1000;
  auto a = make_locker("a", 10, "job");
  auto won = a->claim_window(3600);
  ASSERT_TRUE(won.has_value());
  const std::int64_t server_now = storage->server_time_ms();
  EXPECT_EQ(*won, server_now - server_now % hour);
  EXPECT_EQ(server_now - *won, 55 * 60 * 1000);
  auto b = make_locker("b", 10, "job");
  clock->advance(5 * 60 * 1000);  // the server's next hour; the host is at :15
  EXPECT_TRUE(b->claim_window(3600).has_value());
}

TEST_F(MinHoldTest, WindowClaimsRefuseBadWindows) {
  auto a = make_locker("a", 10);
  EXPECT_THROW(a->claim_window(0), InvalidArgument);
  EXPECT_THROW(a->claim_window(-5), InvalidArgument);
  EXPECT_THROW(a->claim_window(0.0 / 0.0), InvalidArgument);
  EXPECT_THROW(a->claim_window(1e12), InvalidArgument);
}

}  // namespace
