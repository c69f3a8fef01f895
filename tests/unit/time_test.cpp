// The server's clock is the one time base: host skew is corrected, host wall-clock jumps
// change nothing, and timeparanoid still reports offsets above maxoffset.
#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

class TimeTest : public CoreTest {};

TEST_F(TimeTest, OffsetAboveMaxoffsetRaises) {
  server_skew_ms = 2000;
  auto a = make_locker("a");
  try {
    a->acquire(false);
    FAIL() << "expected TimeOffsetError";
  } catch (const TimeOffsetError& e) {
    EXPECT_NEAR(e.offset_s(), 2.0, 0.01);
    EXPECT_NE(std::string(e.what()).find("2.000"), std::string::npos) << e.what();
  }
}

TEST_F(TimeTest, OffsetWithinMaxoffsetPassesAndIsCached) {
  server_skew_ms = 300;
  auto a = make_locker("a");
  EXPECT_NEAR(a->verify_time(), 0.3, 0.01);
  std::int64_t rt = storage->round_trips();
  EXPECT_NEAR(a->verify_time(), 0.3, 0.01);  // cached for 10 minutes: no round trip
  EXPECT_EQ(storage->round_trips(), rt);
}

TEST_F(TimeTest, SkewedHostsAgreeOnExpiry) {
  // Host b's wall clock is 30 s ahead of the server; without correction it would take
  // a's lock 30 s early.
  auto clock_b = std::make_shared<FakeClock>(clock->wall_ms() + 30000, clock->mono_ms());
  LockerOptions o;
  o.key = "k";
  o.ttl_s = 10;
  o.timeparanoid = false;
  Locker a(storage, o, clock, Identity{"a", "ha", 1});
  Locker b(storage, o, clock_b, Identity{"b", "hb", 2});
  std::int64_t ta = a.acquire(false);
  clock->advance(9000);
  clock_b->advance(9000);
  EXPECT_FALSE(b.try_acquire());
  clock->advance(1000);
  clock_b->advance(1000);
  auto tb = b.try_acquire();
  ASSERT_TRUE(tb);
  EXPECT_GT(*tb, ta);
}

TEST_F(TimeTest, HostWallJumpDoesNotMoveLeases) {
  auto a = make_locker("a");
  a->acquire();
  std::int64_t expire = a->hold()->expire_ms;
  clock->jump_wall(3600 * 1000);  // NTP steps the host clock by an hour
  clock->advance(1000);
  auto renewed = a->touch();
  ASSERT_TRUE(renewed);
  EXPECT_EQ(*renewed, expire + 1000);  // still on the server's time base
}

TEST_F(TimeTest, EstimateCarriesForwardOnTheMonotonicClock) {
  auto a = make_locker("a");
  ServerClock& sc = a->server_clock();
  std::int64_t s0 = sc.now_ms();
  std::int64_t rt = storage->round_trips();
  clock->advance(1234);
  EXPECT_EQ(sc.now_ms(), s0 + 1234);
  EXPECT_EQ(storage->round_trips(), rt);  // no new sample inside the refresh interval
  clock->advance(61000);
  sc.now_ms();
  EXPECT_EQ(storage->round_trips(), rt + 1);  // stale: one refresh
}
