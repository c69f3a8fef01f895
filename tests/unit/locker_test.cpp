// Locker semantics on the in-memory server with a fake clock: no real sleeps.
#include <cmath>
#include <vector>

#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

class LockerTest : public CoreTest {};

TEST_F(LockerTest, AcquireWritesTheOriginalSchemaPlusFence) {
  auto a = make_locker("a");
  std::int64_t token = a->acquire();
  EXPECT_GT(token, 0);
  auto doc = a->current();
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->key, "k");
  EXPECT_TRUE(doc->locked);
  EXPECT_EQ(doc->uuid, "uuid-a");
  EXPECT_EQ(doc->host, "host-a");
  EXPECT_EQ(doc->pid, 100);
  EXPECT_EQ(doc->ts_expire->ms - doc->ts_created->ms, 10000);
  EXPECT_EQ(doc->fence, token);
  EXPECT_EQ(a->fence(), token);
  EXPECT_TRUE(a->owned());
  EXPECT_TRUE(a->locked());
}

TEST_F(LockerTest, ContentionGivesLockExistsWithHolder) {
  auto a = make_locker("a");
  auto b = make_locker("b");
  a->acquire();
  try {
    b->acquire(false);
    FAIL() << "expected LockExists";
  } catch (const LockExists& e) {
    EXPECT_STREQ(e.what(), "k owned by host-a pid 100");
  }
  EXPECT_FALSE(b->owned());
  EXPECT_TRUE(b->locked());
  EXPECT_EQ(b->fence(), 0);
}

TEST_F(LockerTest, NonBlockingWithTimeoutIsInvalid) {
  auto a = make_locker("a");
  EXPECT_THROW(a->acquire(false, 5.0), InvalidArgument);
  EXPECT_THROW(HoldState::acquire_retry(false, 0, 0, 1.0, 0), InvalidArgument);
}

TEST_F(LockerTest, AcquireRetryRule) {
  EXPECT_TRUE(HoldState::acquire_retry(false, 0, 0, std::nullopt, 0));
  EXPECT_FALSE(HoldState::acquire_retry(false, 0, 0, std::nullopt, 1));
  EXPECT_TRUE(HoldState::acquire_retry(true, 0, 1000000, std::nullopt, 99));
  EXPECT_TRUE(HoldState::acquire_retry(true, 0, 4999, 5.0, 3));
  EXPECT_FALSE(HoldState::acquire_retry(true, 0, 5000, 5.0, 3));
}

TEST_F(LockerTest, ExpiredLockIsTakenOverAtExpiryNotAfterTtlMonitor) {
  auto a = make_locker("a");
  auto b = make_locker("b");
  std::int64_t t1 = a->acquire();
  clock->advance(9999);
  EXPECT_FALSE(b->try_acquire());
  clock->advance(1);  // exactly at ts_expire: free
  auto t2 = b->try_acquire();
  ASSERT_TRUE(t2);
  EXPECT_GT(*t2, t1);
  EXPECT_FALSE(a->owned());
  EXPECT_FALSE(a->touch());  // the old holder cannot renew a taken-over lock
  EXPECT_EQ(a->fence(), 0);
}

TEST_F(LockerTest, BlockingAcquireWaitsForExpiryInSteps) {
  auto a = make_locker("a", 2);
  auto b = make_locker("b", 2);
  a->acquire();
  std::int64_t start = clock->mono_ms();
  b->acquire(true, std::nullopt, 0.25);
  std::int64_t waited = clock->mono_ms() - start;
  EXPECT_GE(waited, 2000);
  EXPECT_LE(waited, 2250);
}

TEST_F(LockerTest, BlockingAcquireTimesOut) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  a->acquire();
  std::int64_t start = clock->mono_ms();
  EXPECT_THROW(b->acquire(true, 1.0, 0.25), AcquireTimeout);
  EXPECT_GE(clock->mono_ms() - start, 1000);
  EXPECT_LE(clock->mono_ms() - start, 1250);
}

// Found by tests/fuzz: a step longer than the timeout used to sleep the whole step.
TEST_F(LockerTest, BlockingAcquireStepLongerThanTimeoutEndsAtTheTimeout) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  a->acquire();
  std::int64_t start = clock->mono_ms();
  EXPECT_THROW(b->acquire(true, 1.0, 3600.0), AcquireTimeout);
  EXPECT_GE(clock->mono_ms() - start, 1000);
  EXPECT_LE(clock->mono_ms() - start, 1001);
  // A timeout below a millisecond still ends (each wait is at least 1 ms).
  EXPECT_THROW(b->acquire(true, 1e-300, 0.25), AcquireTimeout);
}

TEST_F(LockerTest, CancelStopsABlockingWait) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  a->acquire();
  int checks = 0;
  EXPECT_THROW(b->acquire(true, std::nullopt, 10.0, false, [&] { return ++checks > 3; }),
               Cancelled);
  EXPECT_LE(clock->mono_ms(), 1000 + 1000);  // cancelled within a few 100 ms slices
}

TEST_F(LockerTest, ForceTakesAHeldLock) {
  auto a = make_locker("a");
  auto b = make_locker("b");
  std::int64_t t1 = a->acquire();
  std::int64_t t2 = b->acquire(false, std::nullopt, 0.25, /*force=*/true);
  EXPECT_GT(t2, t1);
  EXPECT_TRUE(b->owned());
  EXPECT_FALSE(a->owned());
}

TEST_F(LockerTest, ReleaseOnlyOwnUnlessForced) {
  auto a = make_locker("a");
  auto b = make_locker("b");
  a->acquire();
  b->release();  // not holding: no error, holder untouched
  EXPECT_TRUE(a->owned());
  b->release(true);
  EXPECT_FALSE(a->locked());
  EXPECT_TRUE(b->try_acquire());
}

TEST_F(LockerTest, TouchExtendsOnlyAnUnexpiredOwnLock) {
  auto a = make_locker("a");
  EXPECT_FALSE(a->touch());
  a->acquire();
  clock->advance(4000);
  auto exp = a->touch();
  ASSERT_TRUE(exp);
  EXPECT_EQ(*exp, clock->wall_ms() + 10000);
  EXPECT_EQ(a->current()->ts_expire->ms, *exp);
  clock->advance(10000);
  EXPECT_FALSE(a->touch());
  EXPECT_FALSE(a->hold());
}

TEST_F(LockerTest, OriginalSchemaDocumentIsHonouredThenTakenOverAtExpiry) {
  // As written by the original pure-Python package: no fence field.
  std::int64_t now = clock->wall_ms();
  storage->put_lock("mongolocker", Document{{"_id", std::string("k")},
                                            {"locked", true},
                                            {"host", std::string("old-host")},
                                            {"uuid", std::string("old-uuid")},
                                            {"pid", std::int64_t{42}},
                                            {"ts_created", DateTime{now}},
                                            {"ts_expire", DateTime{now + 5000}}});
  auto b = make_locker("b");
  EXPECT_THROW(b->acquire(false), LockExists);
  clock->advance(5000);
  auto token = b->try_acquire();
  ASSERT_TRUE(token);
  EXPECT_GE(*token, std::int64_t{1} << 32);  // anchored to an epoch
}

TEST_F(LockerTest, SteadyStateRoundTrips) {
  auto a = make_locker("a");
  a->acquire();
  a->release();  // warm: document exists, clock sampled, server checked
  std::int64_t rt = storage->round_trips();
  a->try_acquire();
  EXPECT_EQ(storage->round_trips() - rt, 1) << "uncontended acquire";
  rt = storage->round_trips();
  a->touch();
  EXPECT_EQ(storage->round_trips() - rt, 1) << "renew";
  rt = storage->round_trips();
  a->release();
  EXPECT_EQ(storage->round_trips() - rt, 1) << "release";
}

TEST_F(LockerTest, BadArguments) {
  LockerOptions o;
  o.key = "";
  EXPECT_THROW(Locker(storage, o, clock), InvalidArgument);
  o.key = "k";
  for (double ttl : std::vector<double>{0.0, -1.0, std::nan(""), INFINITY}) {
    o.ttl_s = ttl;
    EXPECT_THROW(Locker(storage, o, clock), InvalidArgument) << ttl;
  }
  o.ttl_s = 0.5;  // float ttl is fine
  EXPECT_NO_THROW(Locker(storage, o, clock));
  EXPECT_THROW(Locker(nullptr, o, clock), InvalidArgument);
}

TEST_F(LockerTest, ServerDownIsAnErrorNotAHang) {
  auto a = make_locker("a");
  storage->set_unavailable(true);
  EXPECT_THROW(a->acquire(false), StorageUnavailable);
}
