// Locker::release_min_hold (scheduler semantics, ShedLock's lockAtLeastFor): the lock stays
// taken until min_hold after its acquisition on the SERVER's clock, whatever the releasing
// host's clock says, and then frees itself with nobody left to release it.
#include <functional>

#include "exceptions.h"
#include "fixtures.h"
#include "lease/keepalive.h"
#include "lease/lease.h"
#include "server_clock.h"

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

// The lock was taken from its holder (here by force): the minimum hold cannot be kept,
// and the caller is told so rather than told "released".
TEST_F(MinHoldTest, ATakenOverLockIsNotTouched) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  auto tb = b->try_acquire(/*force=*/true);
  ASSERT_TRUE(tb.has_value());
  const auto before = storage->read("mongolocker", "k");
  EXPECT_THROW(a->release_min_hold(60), LockLost);
  EXPECT_FALSE(a->has_stranded()) << "nothing left to retry";
  EXPECT_FALSE(a->release_min_hold(60).has_value()) << "reported once";
  const auto after = storage->read("mongolocker", "k");
  EXPECT_EQ(after->uuid, "uuid-b");
  EXPECT_EQ(after->ts_expire->ms, before->ts_expire->ms) << "b's hold is not extended";
}

// The minimum-hold write is sent while the hold is still valid, but the network delays
// it past the hold's expiry and another node claims the lock first: the write matches
// nothing. The caller must learn that the lock is NOT kept taken until its minimum hold
// (a job may run again within it), never be told it was "released now".
TEST_F(MinHoldTest, AMinHoldWriteThatLandsAfterAnotherClaimIsReportedLost) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  clock->advance(9000);  // 1 s of the lease left
  ASSERT_TRUE(a->hold().has_value());
  bool b_claimed = false;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "set_expiry" || applied) return;
    clock->advance(2000);  // in flight past the expiry; b claims before it lands
    b_claimed = b->try_acquire().has_value();
  });
  EXPECT_THROW(a->release_min_hold(30), LockLost);
  storage->set_fault_hook(nullptr);
  EXPECT_TRUE(b_claimed);
  EXPECT_FALSE(a->hold().has_value());
  EXPECT_FALSE(a->has_stranded()) << "the hold is gone: nothing to retry";
  EXPECT_EQ(storage->read("mongolocker", "k")->uuid, "uuid-b") << "b's hold untouched";
}

// The same through a keep-alive lease closed with a minimum hold.
TEST_F(MinHoldTest, ALeaseClosedWithAMinHoldThatCannotBeKeptSaysSo) {
  Renewer renewer(clock, 0);
  auto a = std::shared_ptr<Locker>(make_locker("a", 10));
  auto b = make_locker("b", 10);
  KeepAliveOptions o;
  o.blocking = false;
  auto lease = KeepAliveLease::acquire(a, o, &renewer);
  ASSERT_TRUE(b->try_acquire(/*force=*/true).has_value());
  EXPECT_THROW(lease->close(60), LockLost);
  EXPECT_NO_THROW(lease->close(60)) << "closed once";
  EXPECT_EQ(storage->read("mongolocker", "k")->uuid, "uuid-b");
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

// A renewal sent before release_min_hold that lands after its write still names the
// hold (same uuid and fence) and moves the expiry later ($max): the released lock stays
// taken past the minimum hold. Liveness only -- the releasing locker holds nothing, and a
// claim still needs the document expired -- and bounded: free no later than that
// renewal's expiry (its send + ttl), as if the holder had crashed at the release.
TEST_F(MinHoldTest, ALateRenewalAfterTheMinHoldWriteDelaysTheLockByAtMostOneTtl) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  const std::int64_t acquired = a->hold()->created_ms;
  clock->advance(1000);
  const std::int64_t renewal_sent = storage->server_time_ms();
  storage->stall_next("renew");
  EXPECT_THROW(a->touch(), StorageUnavailable);  // the renewal is on its way, late
  clock->advance(1000);
  ASSERT_EQ(a->release_min_hold(5), std::optional<std::int64_t>(acquired + 5000));
  EXPECT_FALSE(a->hold().has_value());
  EXPECT_EQ(storage->read("mongolocker", "k")->ts_expire->ms, acquired + 5000);
  ASSERT_EQ(storage->land_stalled(), 1);  // the late renewal lands after the write
  const std::int64_t expire = storage->read("mongolocker", "k")->ts_expire->ms;
  EXPECT_GT(expire, acquired + 5000) << "the late renewal moved the expiry later";
  EXPECT_LE(expire, renewal_sent + 10000) << "bound: the renewal's send + ttl";
  clock->advance(acquired + 5000 - storage->server_time_ms());
  EXPECT_FALSE(b->try_acquire().has_value()) << "still taken after the minimum hold";
  EXPECT_FALSE(a->hold().has_value()) << "yet nobody holds it";
  clock->advance(expire - 1 - storage->server_time_ms());
  EXPECT_FALSE(b->try_acquire().has_value());
  clock->advance(1);
  EXPECT_TRUE(b->try_acquire().has_value()) << "free at the late renewal's expiry";
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

// --- two nodes whose server-time samples differ in uncertainty ----------------------
// Node "a" samples the server's clock over a slow round trip: the reply comes 400 ms
// after the server read its clock, so a's estimate is 200 ms behind the server and a
// knows it only to +-200 ms. Node "b" samples over an instant round trip (exact).
// Windows and minimum holds must end on the server's clock exactly where they should,
// whoever's sample wrote them.
class UncertainClocksTest : public MinHoldTest {
 protected:
  static constexpr std::int64_t kSlowRtt = 400;
  void SetUp() override {
    MinHoldTest::SetUp();
    storage->set_fault_hook([this](const std::string& op, bool applied) {
      if (op != "server_time_ms" || !applied || !slow) return;
      clock->advance(kSlowRtt);
      if (on_slow_reply) on_slow_reply();
    });
  }
  std::function<void()> on_slow_reply;  // runs when a's slow reply arrives
  // Runs f as node "a" (every server-time sample it takes is slow).
  template <class F>
  auto as_slow_node(F f) {
    slow = true;
    auto r = f();
    slow = false;
    return r;
  }
  bool slow = false;
};

TEST_F(UncertainClocksTest, AWindowClaimedOverASlowSampleLastsToTheWindowsEnd) {
  // As a real client: its lockers share one server-time sample (b's comes an hour later).
  storage->set_clock_sample_board(std::make_shared<ClockSampleBoard>());
  const std::int64_t hour = 3600 * 1000;
  clock->advance(hour - storage->server_time_ms() % hour + 10000);  // 10 s into a window
  const std::int64_t start = storage->server_time_ms() - 10000;
  auto a = make_locker("a", 10, "report");
  auto b = make_locker("b", 10, "report");
  const auto won = as_slow_node([&] { return a->claim_window(3600); });
  ASSERT_TRUE(won.has_value());
  EXPECT_EQ(*won, start);
  const auto marker = storage->read("mongolocker", "report@window:" + std::to_string(start));
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(marker->ts_expire->ms, start + hour) << "the marker expires when the window ends";
  // 100 ms before the window ends (on the server's clock), b with its exact sample asks.
  clock->advance(start + hour - 100 - storage->server_time_ms());
  EXPECT_FALSE(b->claim_window(3600).has_value()) << "a second winner in one window";
  clock->advance(100);
  const auto next = b->claim_window(3600);
  ASSERT_TRUE(next.has_value()) << "the next window";
  EXPECT_EQ(*next, start + hour);
}

TEST_F(UncertainClocksTest, NoClaimOnceTheWindowMayHaveEndedOnTheServer) {
  const std::int64_t hour = 3600 * 1000;
  clock->advance(hour - storage->server_time_ms() % hour + 10000);
  const std::int64_t start = storage->server_time_ms() - 10000;
  const std::string marker = "report@window:" + std::to_string(start);
  auto a = make_locker("a", 10, "report");
  auto b = make_locker("b", 10, "report");
  ASSERT_EQ(b->claim_window(3600), std::optional<std::int64_t>(start));
  // a samples from 300 ms before the window's end; its reply arrives 100 ms after it,
  // when the expired marker is gone (the TTL monitor's doing). a's estimate still says
  // 100 ms before the end.
  clock->advance(start + hour - 300 - storage->server_time_ms());
  on_slow_reply = [&] { storage->delete_lock("mongolocker", marker); };
  const auto won = as_slow_node([&] { return a->claim_window(3600); });
  EXPECT_FALSE(won.has_value()) << "a second winner in one window";
  EXPECT_FALSE(storage->read("mongolocker", marker).has_value());
}

TEST_F(UncertainClocksTest, AMinimumHoldNeverEndsEarlyWhateverTheSample) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(as_slow_node([&] { return a->try_acquire(); }).has_value());
  // The server applied a's claim at this instant (memory: at once), not before.
  const std::int64_t acquired = storage->server_time_ms();
  clock->advance(1000);
  const auto frees_at = a->release_min_hold(30);
  ASSERT_TRUE(frees_at.has_value());
  EXPECT_GE(*frees_at, acquired + 30000);
  EXPECT_LE(*frees_at, acquired + 30000 + 2 * kSlowRtt) << "conservative, by the sample's error";
  clock->advance(acquired + 30000 - 1 - storage->server_time_ms());
  EXPECT_FALSE(b->try_acquire().has_value()) << "the minimum hold ended early";
  clock->advance(*frees_at - storage->server_time_ms());
  EXPECT_TRUE(b->try_acquire().has_value()) << "free when it said";
}

TEST_F(UncertainClocksTest, APlainReleaseOnlyOnceTheMinimumHoldSurelyPassed) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(as_slow_node([&] { return a->try_acquire(); }).has_value());
  const std::int64_t acquired = storage->server_time_ms();
  // a's estimate says 5 s have passed since the acquire (it runs 200 ms behind), yet the
  // server may still be short of acquired + 5 s by a's uncertainty: no plain release.
  clock->advance(5000 + 100);
  const auto frees_at = a->release_min_hold(5);
  ASSERT_TRUE(frees_at.has_value()) << "released at once, before the minimum hold surely passed";
  EXPECT_GE(*frees_at, acquired + 5000);
  clock->advance(1000);
  EXPECT_FALSE(a->release_min_hold(5).has_value()) << "nothing left to hold";
  EXPECT_TRUE(b->try_acquire().has_value());
}

TEST_F(MinHoldTest, WindowClaimsRefuseBadWindows) {
  auto a = make_locker("a", 10);
  EXPECT_THROW(a->claim_window(0), InvalidArgument);
  EXPECT_THROW(a->claim_window(-5), InvalidArgument);
  EXPECT_THROW(a->claim_window(0.0 / 0.0), InvalidArgument);
  EXPECT_THROW(a->claim_window(1e12), InvalidArgument);
}

}  // namespace
