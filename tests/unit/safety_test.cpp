// The safety holes of issue #14 (items 1-8) and the renewal hole of issue #7 (hole 2),
// each reproduced on the fake clock and the in-memory server: slow clock samples, server
// clock steps, hung and slow calls, late releases, errors after a claim, server pauses.
// No real sleeps measure anything here; the two threaded tests only use a real timeout
// to turn a deadlock into a failure.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

class SafetyTest : public CoreTest {
 protected:
  std::unique_ptr<Elector> elector(const std::string& name, double ttl_s = 8,
                                   ElectorOptions o = {}) {
    o.key = "svc";
    o.ttl_s = ttl_s;
    o.report_status = false;
    ElectorCallbacks cb;
    cb.on_leader = [this, name] { events.push_back(name + ":leader"); };
    cb.on_leader_loss = [this, name] { events.push_back(name + ":loss"); };
    return std::make_unique<Elector>(storage, o, cb, clock,
                                     Identity{"uuid-" + name, "host-" + name, 1});
  }

  // Moves the fake clock to the elector's next scheduled poll and runs it.
  void poll_at(Elector& e) {
    clock->advance(std::max<std::int64_t>(0, e.next_poll_mono() - clock->mono_ms()));
    e.poll();
  }

  int count(const std::string& event) const {
    return static_cast<int>(std::count(events.begin(), events.end(), event));
  }

  // A follower whose server-time samples all took `rtt_ms`, spent before the server read
  // its clock: its raw estimate is rtt/2 AHEAD of the server.
  void slow_samples_while(bool& on, std::int64_t rtt_ms) {
    storage->set_fault_hook([this, &on, rtt_ms](const std::string& op, bool applied) {
      if (on && op == "server_time_ms" && !applied) clock->advance(rtt_ms);
    });
  }

  std::vector<std::string> events;
};

// ---------------------------------------------------------------- #14.1 -----

TEST_F(SafetyTest, ClaimComparesWithTheEstimateMinusItsUncertainty) {
  auto a = make_locker("a", 15);
  ASSERT_TRUE(a->try_acquire());
  const std::int64_t expire = a->hold()->expire_ms;
  auto b = make_locker("b", 15);
  bool slow = true;
  slow_samples_while(slow, 4000);  // b's estimate: 2 s ahead, uncertainty 2 s
  b->server_clock().refresh();
  slow = false;
  // 1 s before a's lease ends on the server's clock b must not take it.
  clock->advance(expire - 1000 - (clock->wall_ms() + server_skew_ms));
  EXPECT_FALSE(b->try_acquire()) << "b claimed 1 s before the lease ended";
  clock->advance(1000 + 5);  // the lease's end, plus b's drift allowance
  EXPECT_TRUE(b->try_acquire()) << "at the lease's end b may claim";
}

TEST_F(SafetyTest, SlowHelloFollowerNeverLeadsWhileTheLeaderDoes) {
  auto a = elector("a", 15);
  auto b = elector("b", 15);
  a->poll();
  ASSERT_TRUE(a->is_leader());
  bool b_polling = false;
  slow_samples_while(b_polling, 4000);
  for (int i = 0; i < 400 && !b->is_leader(); ++i) {
    b_polling = true;
    b->poll();
    b_polling = false;
    if (!b->is_leader()) clock->advance(100);
  }
  ASSERT_TRUE(b->is_leader());
  EXPECT_FALSE(a->is_leader()) << "two leaders";
}

TEST_F(SafetyTest, ServerClockKeepsTheLowestRttSample) {
  ServerClock sc(clock, *storage);
  sc.refresh();  // exact: no time passes in the fake round trip
  bool slow = true;
  slow_samples_while(slow, 1000);
  sc.refresh();
  EXPECT_LE(sc.uncertainty_ms(), 5) << "a slow sample replaced a better one";
  EXPECT_EQ(sc.now_ms(), clock->wall_ms());
}

TEST_F(SafetyTest, ServerClockStepEndsTheTermAndTheLeaseIsRetakenOnTheNewBase) {
  auto a = elector("a", 8);
  a->poll();
  std::int64_t t0 = clock->mono_ms();
  server_skew_ms = 3000;  // the primary's clock steps (or a failover to a member ahead)
  while (clock->mono_ms() < t0 + 70000) poll_at(*a);
  EXPECT_EQ(count("a:loss"), 1) << "the step was only logged";
  EXPECT_EQ(count("a:leader"), 2);
  EXPECT_TRUE(a->is_leader());
  // The lease on the server is now on the new time base.
  auto doc = storage->read("elector.locks", "svc");
  EXPECT_GE(doc->ts_expire->ms, clock->wall_ms() + server_skew_ms + 8000 - 8000 / 3 - 1);
}

// ---------------------------------------------------------------- #14.2 -----

TEST_F(SafetyTest, LossFiresAtTheDeadlineWhileARenewalHangs) {
  auto a = elector("a", 8);
  a->poll();
  std::int64_t deadline = *a->renew_deadline_mono();
  int losses_at_deadline = -1;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "renew" || applied || losses_at_deadline >= 0) return;
    clock->advance(deadline - clock->mono_ms());  // the call hangs past the deadline...
    losses_at_deadline = count("a:loss");
    clock->advance(5000);  // ...and returns much later
  });
  poll_at(*a);
  EXPECT_EQ(losses_at_deadline, 1) << "on_leader_loss waited for the hung call";
  EXPECT_EQ(count("a:loss"), 1) << "exactly once per term";
}

TEST_F(SafetyTest, RenewalBudgetCountsTheClockRefreshAsACall) {
  storage->set_call_bound_ms(2000);
  auto a = elector("a", 8);
  a->poll();
  const std::int64_t t0 = clock->mono_ms();
  while (a->next_poll_mono() <= t0 + 56000) poll_at(*a);  // the sample ages towards 60 s
  ASSERT_TRUE(a->is_leader());
  const std::int64_t deadline = *a->renew_deadline_mono();
  clock->advance(deadline - 3000 - clock->mono_ms());  // room for one call, not two
  ASSERT_GT(clock->mono_ms() - t0, 60000) << "the sample must be stale now";
  std::int64_t last_end = 0;
  storage->set_fault_hook([&](const std::string&, bool applied) {
    if (!applied)
      clock->advance(2000);  // every call takes its full bound
    else
      last_end = std::max(last_end, clock->mono_ms());
  });
  a->poll();
  EXPECT_LE(last_end, deadline) << "a call ran past the renew deadline";
}

TEST_F(SafetyTest, UnknownCallBoundIsRefusedUnlessOptedOut) {
  storage->set_call_bound_ms(0);
  EXPECT_THROW(elector("a"), InvalidArgument);
  EXPECT_THROW(make_locker("a"), InvalidArgument);
  ElectorOptions o;
  o.allow_unbounded_calls = true;
  EXPECT_NO_THROW(elector("a", 8, o));
  LockerOptions lo;
  lo.key = "k";
  lo.allow_unbounded_calls = true;
  EXPECT_NO_THROW(Locker(storage, lo, clock));
}

TEST_F(SafetyTest, RenewalDoesNotWaitForAnApplicationThreadsClockSample) {
  auto a = elector("a", 130);  // renews every ttl/3 > 60 s: every renewal finds a stale sample
  a->poll();
  clock->advance(61000);
  std::atomic<std::thread::id> app_id{};
  std::atomic<bool> app_in_call{false};
  std::promise<void> unblock;
  std::shared_future<void> unblocked = unblock.get_future().share();
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "server_time_ms" && !applied && std::this_thread::get_id() == app_id.load()) {
      app_in_call = true;
      unblocked.wait();  // the application's hello hangs
    }
  });
  std::thread app([&] {
    app_id = std::this_thread::get_id();
    (void)a->node_status();
  });
  while (!app_in_call) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto poll = std::async(std::launch::async, [&] { a->poll(); });
  bool finished = poll.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  unblock.set_value();
  app.join();
  poll.wait();
  EXPECT_TRUE(finished) << "the renewal waited for the application thread's round trip";
}

// ---------------------------------------------------------------- #14.3 -----

TEST_F(SafetyTest, ReleaseThroughTheLockerEndsLeadershipAtOnce) {
  auto a = elector("a");
  auto b = elector("b");
  a->poll();
  a->locker().release();  // Python: elector.mlock.release()
  EXPECT_FALSE(a->is_leader());
  b->poll();
  EXPECT_TRUE(b->is_leader());
  a->poll();
  EXPECT_EQ(count("a:loss"), 1);
}

TEST_F(SafetyTest, ReleaseDuringARenewalLeavesOneLeader) {
  auto a = elector("a");
  auto b = elector("b");
  a->poll();
  bool done = false;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "renew" && applied && !done) {
      done = true;
      a->locker().release();  // an application thread, right after the renewal landed
    }
  });
  poll_at(*a);  // a's loop may win the freed lock again: what counts is one leader
  b->poll();
  EXPECT_FALSE(a->is_leader() && b->is_leader()) << "two leaders";
  auto doc = storage->read("elector.locks", "svc");
  ASSERT_TRUE(doc.has_value());
  if (a->is_leader()) {
    EXPECT_EQ(doc->uuid, "uuid-a");
  }
  if (b->is_leader()) {
    EXPECT_EQ(doc->uuid, "uuid-b");
  }
}

// ---------------------------------------------------------------- #14.4 -----

TEST_F(SafetyTest, ReleaseThatLandsLateDoesNotFreeANewerHold) {
  auto a = make_locker("a");
  auto b = make_locker("b");
  std::int64_t t1 = a->acquire(false);
  storage->stall_next("release");
  EXPECT_THROW(a->release(), StorageUnavailable);
  clock->advance(10000);  // t1's lease expires
  std::int64_t t2 = a->acquire(false);
  ASSERT_GT(t2, t1);
  EXPECT_EQ(storage->land_stalled(), 1);  // the old release runs at the server now
  EXPECT_FALSE(b->try_acquire()) << "the late release of " << t1 << " freed " << t2;
  EXPECT_TRUE(a->owned());
}

// The fault suite's stalled-release case: an elector's release times out (it will land
// later); the elector must not take that hold back with the same fence, or the late
// release frees the new term while this node leads.
TEST_F(SafetyTest, ElectorNeverRetakesAHoldWhoseReleaseMayLandLate) {
  auto a = elector("a");
  auto b = elector("b");
  a->poll();
  ASSERT_TRUE(a->is_leader());
  const std::int64_t t1 = a->locker().fence();
  storage->stall_next("release");
  a->release();  // the release "times out" at the client; it is held at the server
  for (int i = 0; i < 5 && !a->is_leader(); ++i) poll_at(*a);
  ASSERT_TRUE(a->is_leader()) << "a leads again (a fresh claim)";
  EXPECT_GT(a->locker().fence(), t1) << "the old hold was taken back with its fence";
  storage->land_stalled();  // the old release runs at the server now
  b->poll();
  EXPECT_FALSE(b->is_leader() && a->is_leader())
      << "two leaders: the late release freed " << a->locker().fence();
}

// ---------------------------------------------------------------- #14.5 -----

TEST_F(SafetyTest, LostClaimReplyDoesNotLockTheOwnerOut) {
  auto a = make_locker("a");
  bool lose = true;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "claim" && applied && lose) {
      lose = false;
      throw StorageUnavailable("reply lost");
    }
  });
  EXPECT_THROW(a->acquire(false), StorageUnavailable);
  std::int64_t token = 0;
  EXPECT_NO_THROW(token = a->acquire(false));
  EXPECT_GT(token, 0);
  EXPECT_TRUE(a->owned());
}

TEST_F(SafetyTest, FailureInTheEpochPathDoesNotLockTheOwnerOut) {
  auto a = make_locker("a");
  bool fail = true;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "bump_epoch" && !applied && fail) {
      fail = false;
      throw StorageUnavailable("epoch bump failed");
    }
  });
  EXPECT_THROW(a->acquire(false), StorageUnavailable);
  std::int64_t token = 0;
  EXPECT_NO_THROW(token = a->acquire(false));
  EXPECT_GE(token, std::int64_t{1} << 32);
}

TEST_F(SafetyTest, SteppedDownLeaderRetakesItsLeaseWhenTheServerAnswers) {
  auto a = elector("a", 8);
  a->poll();
  storage->set_unavailable(true);
  for (int i = 0; i < 100 && a->is_leader(); ++i) poll_at(*a);
  ASSERT_EQ(count("a:loss"), 1);
  storage->set_unavailable(false);  // back before the lease ends on the server
  clock->advance(100);
  a->poll();
  EXPECT_TRUE(a->is_leader()) << "failover stalled until the stranded lease expires";
  EXPECT_EQ(count("a:leader"), 2);
}

// ---------------------------------------------------------------- #14.6 -----

TEST_F(SafetyTest, AcquireSlowerThanTheLeaseIsNotReported) {
  auto a = make_locker("a", 10);
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "set_fence" && !applied) clock->advance(10001);  // the anchor path is slow
  });
  EXPECT_THROW(a->acquire(false), StorageUnavailable);
  storage->set_fault_hook({});
  EXPECT_FALSE(a->hold());
  EXPECT_FALSE(a->locked()) << "the late hold was not released";
}

TEST_F(SafetyTest, NoOnLeaderForALeaseThatEndedDuringTheEpochPath) {
  auto a = elector("a", 8);
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "bump_epoch" && !applied) clock->advance(8000);
  });
  a->poll();
  EXPECT_EQ(count("a:leader"), 0);
  EXPECT_FALSE(a->is_leader());
}

// ---------------------------------------------------------------- #14.7 -----

TEST_F(SafetyTest, AllowUnsafeServerIsRefusedForElectors) {
  ElectorOptions o;
  o.allow_unsafe_server = true;
  try {
    elector("a", 8, o);
    FAIL() << "allow_unsafe_server accepted for an elector";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("allow_unsafe_server"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- #14.8 -----

TEST_F(SafetyTest, LeaseCountsFromBeforeTheServerTimeEstimate) {
  auto a = make_locker("a", 10);
  a->server_clock().refresh();
  clock->set_tick_ms(1);  // every clock read is a new instant
  ASSERT_TRUE(a->try_acquire());
  // Server time = fake wall time; both move together, so the server reaches expire_ms at
  // mono expire_ms - (wall - mono). The holder's lease must end no later.
  auto lease_end_on_server = [&] {
    return a->hold()->expire_ms - (clock->wall_ms() - clock->mono_ms());
  };
  EXPECT_LE(*a->lease_deadline_mono(), lease_end_on_server()) << "claim";
  ASSERT_TRUE(a->touch());
  EXPECT_LE(*a->lease_deadline_mono(), lease_end_on_server()) << "renew";
  clock->set_tick_ms(0);
}

TEST_F(SafetyTest, TimeparanoidElectorDoesNotLeadOnAHostOffByMoreThanMaxoffset) {
  server_skew_ms = 2000;
  auto a = elector("a");
  a->poll();
  EXPECT_FALSE(a->is_leader());
  EXPECT_EQ(count("a:leader"), 0);
}

// ------------------------------------------------------------ #7 hole 2 -----

TEST_F(SafetyTest, LeaderRenewsEveryThirdOfTheTtl) {
  auto a = elector("a", 9);
  a->poll();
  EXPECT_EQ(a->next_poll_mono() - clock->mono_ms(), 3000);
}

TEST_F(SafetyTest, ServerPauseOf45PercentOfTheTtlNeverCostsLeadership) {
  const std::int64_t ttl = 2000, pause = 900, bound = 50;
  auto a = elector("a", 2);
  a->poll();
  std::int64_t from = 0, until = 0;
  storage->set_fault_hook([&](const std::string&, bool applied) {
    std::int64_t now = clock->mono_ms();
    if (!applied && now >= from && now < until) {
      clock->advance(bound);  // a call into the frozen server fails after its bound
      throw StorageUnavailable("server paused");
    }
  });
  for (int round = 0; round < 40; ++round) {
    from = clock->mono_ms() + (round * 53) % ttl;  // every phase against the renewals
    until = from + pause;
    while (clock->mono_ms() < until + ttl) {
      poll_at(*a);
      ASSERT_TRUE(a->is_leader()) << "round " << round << ": lost leadership at +"
                                  << clock->mono_ms() - from << " ms into the pause";
    }
  }
  EXPECT_EQ(count("a:loss"), 0);
}

}  // namespace
