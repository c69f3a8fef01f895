// The testing kit's ManualClock (core/testing/manual_clock.h) driving the library's real
// threads on a memory:// backend: renewals, loss, elections and blocking waits happen at
// the fake instants they are due, and advance() returns once every thread has acted.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "election/elector.h"
#include "exceptions.h"
#include "lease/lease.h"
#include "observe/leader_observer.h"
#include "storage/memory_storage.h"
#include "testing/manual_clock.h"

using namespace mongoelector;

namespace {

std::string fresh_uri() {
  static std::atomic<int> n{0};
  return "memory://manual-clock-test-" + std::to_string(n++);
}

class ManualClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock = std::make_shared<ManualClock>(1700000000000, /*settle_timeout_ms=*/5000);
    client = MemoryClient::open(fresh_uri(), clock);
    storage = client->storage();
    storage->set_fault_hook([this](const std::string& op, bool applied) {
      if (!applied) {
        std::lock_guard<std::mutex> g(calls_mu);
        ++calls[op];
      }
    });
  }
  int count(const std::string& op) {
    std::lock_guard<std::mutex> g(calls_mu);
    return calls[op];
  }
  std::shared_ptr<Locker> locker(const std::string& key, double ttl_s) {
    LockerOptions o;
    o.key = key;
    o.ttl_s = ttl_s;
    return std::make_shared<Locker>(storage, o);  // the storage's clock
  }

  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<MemoryClient> client;
  std::shared_ptr<MemoryStorage> storage;
  std::mutex calls_mu;
  std::map<std::string, int> calls;
};

TEST_F(ManualClockTest, WorkerWaitEndsExactlyWhenTimeReachesItsDeadline) {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<std::int64_t> woke_at{-1};
  std::thread t = start_clock_thread(*clock, [&] {
    std::unique_lock<std::mutex> lk(mu);
    clock->wait_until(lk, cv, 100, [] { return false; });
    woke_at = clock->mono_ms();
  });
  EXPECT_TRUE(clock->advance(99));
  EXPECT_EQ(woke_at.load(), -1) << "woke before its deadline";
  EXPECT_TRUE(clock->advance(1));
  EXPECT_EQ(woke_at.load(), 100) << "advance() returned before the woken thread acted";
  t.join();
}

TEST_F(ManualClockTest, AdvanceStopsAtEveryDeadlineOnTheWay) {
  // A worker that wakes every 10 ms and records the instant: advance(100) must show it
  // every step, not one jump to 100.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::vector<std::int64_t> seen;
  std::thread t = start_clock_thread(*clock, [&] {
    std::unique_lock<std::mutex> lk(mu);
    while (!stop) {
      const std::int64_t next = clock->mono_ms() + 10;
      if (clock->wait_until(lk, cv, next, [&] { return stop; })) break;
      seen.push_back(clock->mono_ms());
    }
  });
  EXPECT_TRUE(clock->advance(100));
  {
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(seen.size(), 10u);
    for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 10 * (std::int64_t(i) + 1));
    stop = true;
  }
  cv.notify_all();
  t.join();
}

TEST_F(ManualClockTest, LeaseRenewsOnItsScheduleAndStaysHeldAcrossAnHour) {
  auto lease = KeepAliveLease::acquire(locker("job", 15));
  const int renews_before = count("renew_many") + count("renew");
  EXPECT_TRUE(clock->advance(60 * 60 * 1000));
  EXPECT_FALSE(lease->lost()) << lease->lost_reason();
  const int renews = count("renew_many") + count("renew") - renews_before;
  // Every ttl/3 = 5 s: 720 in an hour (a retry or the first step may shift one).
  EXPECT_GE(renews, 719);
  EXPECT_LE(renews, 721);
  auto doc = storage->read("mongolocker", "job");
  ASSERT_TRUE(doc.has_value());
  EXPECT_TRUE(doc->held_at(clock->wall_ms())) << "the document expires in the future";
  lease->close();
}

TEST_F(ManualClockTest, LeaseIsLostAtItsRenewDeadlineWhileTheServerIsDown) {
  std::atomic<int> lost_calls{0};
  KeepAliveOptions ko;
  ko.on_lost = [&] { ++lost_calls; };
  auto lease = KeepAliveLease::acquire(locker("job", 15), ko);
  const std::int64_t deadline = lease->renew_deadline_mono();
  storage->set_unavailable(true);
  EXPECT_TRUE(clock->advance(deadline - clock->mono_ms() - 1));
  EXPECT_FALSE(lease->lost()) << "lost before its renew deadline";
  EXPECT_TRUE(clock->advance(1));
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(lost_calls.load(), 1);
  storage->set_unavailable(false);
  lease->close();
}

TEST_F(ManualClockTest, StolenLockIsLostAtTheNextRenewal) {
  auto lease = KeepAliveLease::acquire(locker("job", 9));
  auto thief = locker("job", 9);
  thief->acquire(false, std::nullopt, 0.25, /*force=*/true, {});
  EXPECT_TRUE(clock->advance(2999));
  EXPECT_FALSE(lease->lost()) << "no renewal ran yet (every ttl/3 = 3 s)";
  EXPECT_TRUE(clock->advance(1));
  EXPECT_TRUE(lease->lost());
  lease->close();
  thief->release();
}

TEST_F(ManualClockTest, ElectionFailsOverWithinOneTtlOfFakeTime) {
  std::atomic<int> a_leads{0}, a_lost{0}, b_leads{0};
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = 10;
  ElectorCallbacks ca, cb;
  ca.on_leader = [&] { ++a_leads; };
  ca.on_leader_loss = [&] { ++a_lost; };
  cb.on_leader = [&] { ++b_leads; };
  auto a = std::make_unique<Elector>(storage, o, ca, nullptr, Identity{"uuid-a", "host-a", 1});
  auto b = std::make_unique<Elector>(storage, o, cb, nullptr, Identity{"uuid-b", "host-b", 2});
  a->start();
  EXPECT_TRUE(clock->settle());
  EXPECT_TRUE(a->is_leader()) << "the first elector leads once its loop settled";
  b->start();
  EXPECT_TRUE(clock->advance(60 * 1000));
  EXPECT_TRUE(a->is_leader());
  EXPECT_FALSE(b->is_leader());
  EXPECT_EQ(a_leads.load(), 1);
  // A is cut off from the server (freezing its renewals): it steps down at its renew
  // deadline, and B takes over once the lock expires.
  a->stop();  // releases: a clean stop hands over within about a follower poll
  EXPECT_EQ(a_lost.load(), 1);
  EXPECT_TRUE(clock->advance(o.ttl_s * 1000));
  EXPECT_TRUE(b->is_leader());
  EXPECT_EQ(b_leads.load(), 1);
  b->stop();
}

TEST_F(ManualClockTest, ObserverReportsEveryChangeAtTheFakeInstantItLooks) {
  std::mutex mu;
  std::vector<std::string> seen;
  auto seen_now = [&] {
    std::lock_guard<std::mutex> g(mu);
    return seen;
  };
  LeaderObserverOptions oo;
  oo.key = "svc";
  oo.interval_s = 1;
  LeaderObserver observer(storage, oo, [&](const LeaderState& s) {
    std::lock_guard<std::mutex> g(mu);
    seen.push_back(s.has_leader ? s.uuid : "-");
  });
  observer.start();
  EXPECT_TRUE(clock->settle());
  EXPECT_EQ(seen_now(), std::vector<std::string>{"-"});
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = 10;
  Elector a(storage, o, {}, nullptr, Identity{"uuid-a", "host-a", 1});
  a.start();
  EXPECT_TRUE(clock->settle());
  EXPECT_EQ(seen_now(), std::vector<std::string>{"-"}) << "the observer has not looked again yet";
  EXPECT_TRUE(clock->advance(1000));
  EXPECT_EQ(seen_now(), (std::vector<std::string>{"-", "uuid-a"}));
  EXPECT_TRUE(clock->advance(60 * 1000));
  EXPECT_EQ(seen_now().size(), 2u) << "no change, no report";
  a.stop();
  EXPECT_TRUE(clock->advance(1000));
  EXPECT_EQ(seen_now(), (std::vector<std::string>{"-", "uuid-a", "-"}));
  observer.stop();
}

TEST_F(ManualClockTest, ObserverStoppedFromItsCallbackMayBeDestroyedAtOnce) {
  LeaderObserverOptions oo;
  oo.key = "svc";
  std::unique_ptr<LeaderObserver> observer;
  std::atomic<bool> stopped{false}, release{false};
  observer = std::make_unique<LeaderObserver>(storage, oo, [&](const LeaderState&) {
    observer->stop();
    stopped = true;
    while (!release) std::this_thread::yield();  // still inside on_change
  });
  observer->start();
  while (!stopped) std::this_thread::yield();
  observer.reset();  // destroyed while its thread is still in the callback
  release = true;
  EXPECT_TRUE(clock->settle()) << "the thread ended (ASan: without touching the freed observer)";
}

// When, after A's lock expired behind its back, B leads and A has stepped down (fake ms).
std::pair<std::int64_t, std::int64_t> takeover_timeline() {
  auto clock = std::make_shared<ManualClock>(1700000000000);
  auto storage = MemoryClient::open(fresh_uri(), clock)->storage();
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = 10;
  Elector a(storage, o, {}, nullptr, Identity{"uuid-a", "host-a", 1});
  Elector b(storage, o, {}, nullptr, Identity{"uuid-b", "host-b", 2});
  a.start();
  EXPECT_TRUE(clock->settle());
  b.start();
  EXPECT_TRUE(clock->advance(30 * 1000));
  storage->expire_lock("elector.locks", "svc");
  const std::int64_t t0 = clock->mono_ms();
  std::int64_t b_leads = -1, a_down = -1;
  for (int ms = 0; ms <= 10 * 1000 && (b_leads < 0 || a_down < 0); ms += 10) {
    if (b_leads < 0 && b.is_leader()) b_leads = clock->mono_ms() - t0;
    if (a_down < 0 && !a.is_leader()) a_down = clock->mono_ms() - t0;
    EXPECT_TRUE(clock->advance(10));
  }
  a.stop();
  b.stop();
  return {b_leads, a_down};
}

TEST_F(ManualClockTest, ElectionTimelineIsTheSameAtEveryRun) {
  const auto first = takeover_timeline();
  EXPECT_GE(first.first, 0) << "B took over";
  EXPECT_GE(first.second, 0) << "A stepped down";
  for (int run = 0; run < 3; ++run) EXPECT_EQ(takeover_timeline(), first) << "run " << run;
}

TEST_F(ManualClockTest, BlockingAcquireOnAnotherThreadWaitsInFakeTime) {
  auto holder = locker("job", 20);
  holder->acquire(false, std::nullopt, 0.25, false, {});
  std::atomic<bool> done{false};
  std::atomic<bool> timed_out{false};
  EXPECT_TRUE(clock->settle());
  const std::size_t idle = clock->waiters();
  std::thread waiter([&] {
    auto other = locker("job", 20);
    try {
      other->acquire(true, 5.0, 1.0, false, {});
    } catch (const AcquireTimeout&) {
      timed_out = true;
    }
    done = true;
  });
  // Only once it sleeps on the clock may the time pass its deadline.
  ASSERT_TRUE(clock->block_until_waiters(idle + 1, 30000));
  EXPECT_FALSE(done.load()) << "its pause is in fake time";
  EXPECT_TRUE(clock->advance(6000));
  waiter.join();  // returns at once: its timeout passed in fake time
  EXPECT_TRUE(timed_out.load());
  holder->release();
}

TEST_F(ManualClockTest, AdvanceReportsThreadsThatCannotSettle) {
  auto slow = std::make_shared<ManualClock>(0, /*settle_timeout_ms=*/200);
  std::mutex blocker;
  std::unique_lock<std::mutex> hold(blocker);
  std::thread t = start_clock_thread(*slow, [&] { std::lock_guard<std::mutex> g(blocker); });
  EXPECT_FALSE(slow->advance(10)) << "a worker blocked outside the clock is reported";
  hold.unlock();
  t.join();
  EXPECT_TRUE(slow->advance(10));
  EXPECT_THROW(slow->advance(-1), InvalidArgument);
}

TEST_F(ManualClockTest, OneNameRunsOnOneClock) {
  auto other = std::make_shared<ManualClock>(0);
  EXPECT_THROW(MemoryClient::open(client->uri(), other), InvalidArgument);
  EXPECT_EQ(MemoryClient::open(client->uri())->storage()->clock(), clock) << "joins its clock";
  EXPECT_EQ(storage->server_time_ms(), clock->wall_ms());
  clock->jump_wall(5000);
  EXPECT_EQ(storage->server_time_ms(), clock->wall_ms());
}

}  // namespace
