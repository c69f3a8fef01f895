// Election timing with a fake clock: renew deadline and step-down, follower wake-up,
// failover, callbacks, status and round trips per poll.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

class ElectorTest : public CoreTest {
 protected:
  std::unique_ptr<Elector> make_elector(const std::string& name, std::vector<std::string>* events,
                                        double ttl_s = 8, bool report = true,
                                        std::optional<double> handover_poll_s = std::nullopt) {
    ElectorOptions o;
    o.handover_poll_s = handover_poll_s;
    o.key = "svc";
    o.ttl_s = ttl_s;
    o.report_status = report;
    o.app_version = "1.2.3";
    ElectorCallbacks cb;
    if (events) {
      cb.on_leader = [events, name] { events->push_back(name + ":leader"); };
      cb.on_leader_loss = [events, name] { events->push_back(name + ":loss"); };
      cb.on_loop = [events, name] { events->push_back(name + ":loop"); };
    }
    return std::make_unique<Elector>(storage, o, cb, clock,
                                     Identity{"uuid-" + name, "host-" + name, 1});
  }
};

TEST_F(ElectorTest, FirstPollBecomesLeaderThenLoop) {
  std::vector<std::string> ev;
  auto a = make_elector("a", &ev);
  EXPECT_FALSE(a->is_leader());
  a->poll();
  EXPECT_TRUE(a->is_leader());
  EXPECT_TRUE(a->leader_exists());
  EXPECT_EQ(ev, (std::vector<std::string>{"a:leader", "a:loop"}));
  EXPECT_DOUBLE_EQ(a->poll_wait(), 4.0);
  EXPECT_GT(a->locker().fence(), 0);
}

TEST_F(ElectorTest, FollowerSleepsUntilTheLeaseCanExpire) {
  auto a = make_elector("a", nullptr);
  // Peeks off (handover_test.cpp covers them): the follower's own wake-up.
  auto b = make_elector("b", nullptr, 8, true, 0.0);
  a->poll();
  clock->advance(1000);
  b->poll();
  EXPECT_FALSE(b->is_leader());
  EXPECT_TRUE(b->leader_exists());
  EXPECT_DOUBLE_EQ(b->poll_wait(), 8.0);
  // a's lease ends 7 s from now; jitter is at most min(ttl/10, 500 ms).
  std::int64_t wait = b->next_poll_mono() - clock->mono_ms();
  EXPECT_GE(wait, 7000);
  EXPECT_LE(wait, 7500);
}

TEST_F(ElectorTest, LeaderRenewsEveryThirdOfTheTtlAndMovesItsDeadline) {
  auto a = make_elector("a", nullptr, 9);
  a->poll();
  std::int64_t d1 = *a->renew_deadline_mono();
  EXPECT_EQ(a->next_poll_mono() - clock->mono_ms(), 3000);
  clock->advance(3000);
  a->poll();
  EXPECT_EQ(*a->renew_deadline_mono(), d1 + 3000);
  EXPECT_TRUE(a->is_leader());
}

TEST_F(ElectorTest, CutOffLeaderStepsDownBeforeAnyoneCanTakeOver) {
  std::vector<std::string> ev;
  auto a = make_elector("a", &ev);
  auto b = make_elector("b", &ev);
  a->poll();
  std::int64_t lease_start = a->locker().hold()->lease_start_mono;
  std::int64_t deadline = *a->renew_deadline_mono();
  const std::int64_t ttl = 8000;
  EXPECT_LE(deadline, lease_start + ttl - ttl / 10) << "margin of at least ttl/10";

  storage->set_unavailable(true);  // a is cut off from the database
  clock->advance(4000);
  a->poll();  // renewal fails, but the deadline is still ahead
  EXPECT_TRUE(a->is_leader());
  EXPECT_LE(a->next_poll_mono() - clock->mono_ms(), 1000);  // retries soon

  clock->advance(deadline - clock->mono_ms());
  EXPECT_FALSE(a->is_leader()) << "false at the deadline, even before the loop runs";
  a->poll();
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "a:loss"), 1);
  std::int64_t stepped_down_at = clock->mono_ms();

  // b may only take over once a's lease has really expired.
  storage->set_unavailable(false);
  b->poll();
  EXPECT_FALSE(b->is_leader());
  clock->advance(lease_start + ttl - clock->mono_ms());
  b->poll();
  EXPECT_TRUE(b->is_leader());
  EXPECT_GE(clock->mono_ms() - stepped_down_at, ttl / 10);
}

// Renewals are retried until the deadline itself, even when a call bound no longer fits
// before it (the timer announces the loss on time regardless), so a server pause costs
// leadership only when it outlasts the deadline, not deadline minus a call bound.
TEST_F(ElectorTest, RenewalsAreRetriedUntilTheDeadline) {
  storage->set_call_bound_ms(2000);  // a call may take up to 2 s before it fails
  auto a = make_elector("a", nullptr);
  a->poll();
  const std::int64_t deadline = *a->renew_deadline_mono();  // lease_start + 7200
  storage->set_unavailable(true);
  std::int64_t last_try = 0;
  for (int i = 0; i < 200 && clock->mono_ms() < deadline; ++i) {
    clock->advance(std::min(a->next_poll_mono(), deadline) - clock->mono_ms());
    if (clock->mono_ms() >= deadline) break;
    const std::int64_t rt = storage->round_trips();
    a->poll();
    if (storage->round_trips() > rt) last_try = clock->mono_ms();
  }
  EXPECT_GT(last_try + 2000, deadline) << "stopped retrying while the deadline was still ahead";
  EXPECT_GE(last_try + 250, deadline) << "retries every min(ttl/20, 250 ms) up to the deadline";
  clock->advance(deadline - clock->mono_ms());
  EXPECT_FALSE(a->is_leader());
}

TEST_F(ElectorTest, PauseLongerThanDeadlineMinusACallBoundKeepsLeadership) {
  storage->set_call_bound_ms(2000);
  std::vector<std::string> ev;
  auto a = make_elector("a", &ev);
  a->poll();
  const std::int64_t start = *a->renew_deadline_mono() - 7200;  // the lease's send time
  storage->set_unavailable(true);  // the server freezes right after that renewal
  while (clock->mono_ms() < start + 6000) {
    clock->advance(a->next_poll_mono() - clock->mono_ms());
    if (clock->mono_ms() >= start + 6000) storage->set_unavailable(false);  // back at +6 s
    a->poll();
  }
  // The old rule (start only if the call fits: by +5.2 s) lost leadership at +7.2 s.
  EXPECT_TRUE(a->is_leader());
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "a:loss"), 0);
}

TEST_F(ElectorTest, FailoverAfterLeaderCrashIsAboutOneTtl) {
  auto a = make_elector("a", nullptr);
  auto b = make_elector("b", nullptr);
  a->poll();  // a leads, then "crashes" (never polls again)
  std::int64_t crash = clock->mono_ms();
  b->poll();
  for (int i = 0; i < 10 && !b->is_leader(); ++i) {
    clock->advance(b->next_poll_mono() - clock->mono_ms());
    b->poll();
  }
  ASSERT_TRUE(b->is_leader());
  std::int64_t failover = clock->mono_ms() - crash;
  EXPECT_GE(failover, 8000);
  EXPECT_LE(failover, 8000 + 500 + 1);
  EXPECT_GT(b->locker().fence(), a->locker().fence());
}

TEST_F(ElectorTest, ReleaseFiresLossAndFreesTheLock) {
  std::vector<std::string> ev;
  auto a = make_elector("a", &ev);
  auto b = make_elector("b", &ev);
  a->poll();
  a->release();
  EXPECT_FALSE(a->is_leader());
  b->poll();
  EXPECT_TRUE(b->is_leader());
  EXPECT_EQ(ev, (std::vector<std::string>{"a:leader", "a:loop", "a:loss", "b:leader", "b:loop"}));
}

TEST_F(ElectorTest, LockTakenByForceIsNoticedAtNextRenewal) {
  std::vector<std::string> ev;
  auto a = make_elector("a", &ev);
  a->poll();
  LockerOptions o;
  o.key = "svc";
  o.collection = "elector.locks";
  o.ttl_s = 8;
  Locker thief(storage, o, clock, Identity{"t", "t", 2});
  thief.acquire(false, std::nullopt, 0.25, true);
  clock->advance(4000);
  a->poll();
  EXPECT_FALSE(a->is_leader());
  EXPECT_EQ(ev.back(), "a:loop");
  EXPECT_EQ(ev[ev.size() - 2], "a:loss");
}

TEST_F(ElectorTest, RoundTripsPerPoll) {
  auto a = make_elector("a", nullptr, 8, true);
  auto b = make_elector("b", nullptr, 8, true);
  auto c = make_elector("c", nullptr, 8, false);
  a->poll();
  b->poll();
  c->poll();
  clock->advance(4000);
  std::int64_t rt = storage->round_trips();
  a->poll();
  EXPECT_EQ(storage->round_trips() - rt, 2) << "leader: renew + status";
  rt = storage->round_trips();
  b->poll();
  EXPECT_EQ(storage->round_trips() - rt, 2) << "follower: read + status";
  rt = storage->round_trips();
  c->poll();
  EXPECT_EQ(storage->round_trips() - rt, 1) << "follower without status: read";
}

TEST_F(ElectorTest, NodeStatusAndClusterDetail) {
  auto a = make_elector("a", nullptr);
  auto b = make_elector("b", nullptr);
  a->poll();
  clock->advance(10);
  b->poll();
  Document s = a->node_status();
  EXPECT_EQ(s.get_string("_id"), "uuid-a");
  EXPECT_EQ(s.get_bool("is_leader"), true);
  EXPECT_EQ(s.get_bool("lock_owned"), true);
  EXPECT_EQ(s.get_string("app_version"), "1.2.3");
  EXPECT_EQ(s.get_int("ttl"), 8);
  EXPECT_TRUE(s.get_date("lock_expires"));
  EXPECT_TRUE(s.get_date("last_poll"));
  EXPECT_EQ(s.get_bool("elector_running"), false);
  auto cd = a->cluster_detail();
  ASSERT_EQ(cd.member_detail.size(), 2u);
  EXPECT_EQ(cd.member_detail[0].get_string("uuid"), "uuid-b");  // newest first
  EXPECT_FALSE(cd.member_detail[0].has("_id"));
  ASSERT_TRUE(cd.leader);
  EXPECT_EQ(cd.leader->uuid, "uuid-a");
}

TEST_F(ElectorTest, RaisingCallbackDoesNotStopThePoll) {
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = 8;
  int loops = 0;
  ElectorCallbacks cb;
  cb.on_leader = [] { throw std::runtime_error("boom"); };
  cb.on_loop = [&] { ++loops; };
  Elector a(storage, o, cb, clock, Identity{"a", "a", 1});
  EXPECT_NO_THROW(a.poll());
  EXPECT_TRUE(a.is_leader());
  EXPECT_EQ(loops, 1);
}

// The loop thread with the real clock: stop() from inside a callback must not deadlock.
TEST(ElectorThread, StopFromCallbackReturns) {
  auto storage = std::make_shared<MemoryStorage>();
  auto clock = system_clock();
  storage->set_server_time_source([clock] { return clock->wall_ms(); });
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = 1;
  Elector* self = nullptr;
  std::atomic<int> losses{0};
  ElectorCallbacks cb;
  cb.on_leader = [&] { self->stop(); };
  cb.on_leader_loss = [&] { ++losses; };
  Elector e(storage, o, cb, clock);
  self = &e;
  e.start();
  for (int i = 0; i < 200 && (e.running() || losses == 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(e.running());
  EXPECT_EQ(losses.load(), 1);
  EXPECT_FALSE(storage->read("elector.locks", "svc")->held_at(clock->wall_ms()));
  e.stop();  // idempotent
}
