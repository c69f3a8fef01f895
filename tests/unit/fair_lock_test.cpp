// Fair (FIFO) plain locks (core/lock_queue.h: the queue in a document beside the lock) on
// a FakeClock and MemoryStorage, driven through their acquire runs: grants in arrival
// order (a test that fails without the queue's gate), no barging by a fair newcomer while
// the head is live, a dead waiter costs at most one ttl, a waiter that times out or is
// cancelled leaves at once, a waiter whose entry expired loses its place, only the head
// looks every step, unfair lockers beside fair ones never break exclusion, and the
// drop-in (unfair) path sends no queue command.
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exceptions.h"
#include "fair_waiters.h"
#include "fixtures.h"
#include "hold/acquire_run.h"
#include "lock_queue.h"
#include "locker.h"

using namespace mongoelector;
using namespace mongoelector::testing;

namespace {

using Kind = AcquireStep::Kind;
const std::string kQueue = LockQueue::collection_for("mongolocker");

class FairLockTest : public FairTest {
 protected:
  std::shared_ptr<Locker> lock(const std::string& name, bool fair = true) {
    LockerOptions o;
    o.key = "k";
    o.ttl_s = static_cast<double>(kFairTtlMs) / 1000.0;
    o.fair = fair;
    return std::make_shared<Locker>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }
  std::vector<QueueEntry> queue() {
    const std::optional<SemaphoreDoc> d = storage->read_semaphore(kQueue, "k");
    return d ? d->queue : std::vector<QueueEntry>{};
  }
  FairWaiter waiter(const std::string& name, bool fair = true) {
    auto l = lock(name, fair);
    auto run = l->start_acquire(true, std::nullopt, 0.25);
    return FairWaiter{name, l, std::move(run)};
  }
  // FairTest::drive, the last arrived first (without the queue's gate the newest waiter
  // would win every race), checking after every step that at most one lease runs.
  void drive(std::vector<FairWaiter>& ws, int steps, std::vector<std::string>& granted,
             const std::function<bool()>& stop = {}) {
    FairTest::drive(ws, steps, granted, stop, /*newest_first=*/true,
                    [&] { EXPECT_LE(holders(ws), 1) << "exclusion"; });
  }
  int holders(const std::vector<FairWaiter>& ws) const {
    int n = 0;
    for (const FairWaiter& w : ws) {
      const std::optional<Lease> l = w.holder->lease();  // a dead holder's lease counts too
      if (l && clock->mono_ms() < l->end_mono) ++n;
    }
    return n;
  }
};

TEST_F(FairLockTest, GrantsFollowArrivalOrderAndAFairNewcomerDoesNotBarge) {
  auto holder = lock("holder");
  holder->acquire(false);
  std::vector<FairWaiter> ws;
  for (const char* n : {"w0", "w1", "w2", "w3"}) {
    ws.push_back(waiter(n));
    ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait) << n << " enqueues";
    clock->advance(10);
  }
  const std::vector<QueueEntry> q = queue();
  ASSERT_EQ(q.size(), 4u);
  for (std::size_t i = 1; i < q.size(); ++i)
    EXPECT_LT(q[i - 1].ticket, q[i].ticket) << "tickets increase along the queue";
  auto newcomer = lock("newcomer");
  std::vector<std::string> granted;
  holder->release();
  for (std::size_t round = 0; round < ws.size(); ++round) {
    EXPECT_FALSE(newcomer->try_acquire()) << "the head is live: a fair newcomer waits";
    drive(ws, 40, granted, [&] { return granted.size() == round + 1; });
    ASSERT_EQ(granted.size(), round + 1);
    ws[round].holder->release();
  }
  EXPECT_EQ(granted, (std::vector<std::string>{"w0", "w1", "w2", "w3"}))
      << "arrival order (the waiters are driven newest first: without the gate w3 would win)";
  EXPECT_TRUE(queue().empty()) << "every winner removed its entry";
  EXPECT_TRUE(newcomer->try_acquire()) << "the queue is empty: served";
}

TEST_F(FairLockTest, ANonBlockingFairAcquireNamesTheQueue) {
  auto holder = lock("holder"), w = lock("w"), other = lock("other");
  holder->acquire(false);
  auto run = w->start_acquire(true, std::nullopt, 0.25);
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  holder->release();
  try {
    other->acquire(false);
    FAIL() << "a live waiter comes first";
  } catch (const LockExists& ex) {
    EXPECT_NE(std::string(ex.what()).find("fair queue"), std::string::npos) << ex.what();
  }
  clock->advance(kFairStepMs);
  EXPECT_EQ(run->attempt().kind, Kind::Acquired);
}

TEST_F(FairLockTest, ADeadWaiterCostsAtMostOneTtl) {
  expect_a_dead_waiter_costs_at_most_one_ttl(lock("holder"), lock("dead"), lock("next"),
                                             [&] { return queue().size(); });
}

TEST_F(FairLockTest, AWaiterThatTimesOutOrIsCancelledLeavesAtOnce) {
  auto quitter = lock("quitter");
  expect_a_waiter_that_gives_up_leaves_at_once(
      lock("holder"), quitter, lock("next"),
      [&] {
        EXPECT_THROW(quitter->acquire(true, 1.0, 0.25, false, [] { return false; }),
                     AcquireTimeout);
        EXPECT_EQ(queue().size(), 0u) << "a timed-out waiter left the queue";
        EXPECT_THROW(quitter->acquire(true, std::nullopt, 0.25, false, [] { return true; }),
                     Cancelled);
      },
      [&] { return queue().size(); });
}

TEST_F(FairLockTest, AGiveUpDuringAnAttemptLeavesNoEntry) {
  expect_a_give_up_during_an_attempt_leaves_nothing(lock("holder"), lock("quitter"), lock("next"),
                                                    "claim_semaphore",
                                                    [&] { return queue().size(); });
}

TEST_F(FairLockTest, AStrayEntryOfAWaitersOwnIsRemovedAtItsNextLook) {
  expect_a_stray_of_its_own_is_removed(lock("holder"), lock("w"), lock("next"),
                                       [&] { return queue(); });
}

TEST_F(FairLockTest, AWaiterWhoseEntryExpiredLosesItsPlace) {
  expect_a_paused_waiter_loses_its_place(lock("holder"), lock("sleeper"), lock("patient"));
}

TEST_F(FairLockTest, OnlyTheHeadLooksEveryStep) {
  auto holder = lock("holder");
  holder->acquire(false);
  std::vector<FairWaiter> ws;
  for (int i = 0; i < 8; ++i) ws.push_back(waiter("w" + std::to_string(i)));
  for (FairWaiter& w : ws) ASSERT_EQ(w.run->attempt().kind, Kind::Wait);  // in order
  ASSERT_EQ(queue().size(), 8u);
  const std::map<std::string, int> ops = expect_only_the_head_looks_every_step(holder, ws);
  EXPECT_LE(count(ops, "claim"), 40 + 2) << "only the head tries the lock";
}

TEST_F(FairLockTest, UnfairLockersBesideFairOnesNeverBreakExclusion) {
  // Fair and unfair waiters taking turns, each hold three steps; two holders die
  // holding (their lock frees at its expiry): at every step at most one lease runs
  // (drive checks), and every hold's token is above the one before.
  std::vector<FairWaiter> ws;
  for (int i = 0; i < 6; ++i) ws.push_back(waiter("n" + std::to_string(i), /*fair=*/i % 2 == 0));
  std::vector<std::string> granted;
  std::int64_t last_fence = 0;
  int deaths = 0;
  std::map<std::string, int> held;  // steps held so far, by waiter
  for (int round = 0; round < 160; ++round) {
    drive(ws, 1, granted);
    for (FairWaiter& w : ws) {
      if (!w.done || !w.alive || ++held[w.name] < 3) continue;
      held[w.name] = 0;
      const std::optional<Lease> l = w.holder->lease();
      ASSERT_TRUE(l);
      EXPECT_GT(l->fence, last_fence) << "tokens increase from hold to hold";
      last_fence = l->fence;
      if (round > 20 && deaths < 2) {
        ++deaths;
        w.alive = false;  // dies holding
        continue;
      }
      w.holder->release();
      w.done = false;  // wants the lock again
      w.run = std::static_pointer_cast<Locker>(w.holder)->start_acquire(true, std::nullopt, 0.25);
    }
  }
  EXPECT_EQ(deaths, 2);
  EXPECT_GE(granted.size(), 15u) << "the lock kept moving";
  auto served = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) {
      return std::find(granted.begin(), granted.end(), n) != granted.end();
    });
  };
  EXPECT_TRUE(served({"n0", "n2", "n4"})) << "fair lockers were served";
  EXPECT_TRUE(served({"n1", "n3", "n5"})) << "unfair lockers were served";
}

TEST_F(FairLockTest, TheDropInPathSendsNoQueueCommand) {
  auto a = lock("a", /*fair=*/false), b = lock("b", /*fair=*/false);
  const std::map<std::string, int> ops = ops_during([&] {
    a->acquire(false);
    EXPECT_THROW(b->acquire(true, 1.0, 0.25, false, [] { return false; }), AcquireTimeout);
    a->release();
    b->acquire(false);
    b->release();
  });
  for (const char* op : {"read_semaphore", "claim_semaphore", "create_semaphore",
                         "renew_queue_entry", "leave_queue"})
    EXPECT_EQ(count(ops, op), 0) << op;
}

TEST_F(FairLockTest, AFairWinnerWithoutWaitersCostsOneReadMore) {
  auto a = lock("a");
  const std::map<std::string, int> ops = ops_during([&] { a->acquire(false); });
  EXPECT_EQ(count(ops, "read_semaphore"), 1) << "the look at the queue";
  EXPECT_EQ(count(ops, "claim_semaphore") + count(ops, "leave_queue"), 0) << "nothing to remove";
  a->release();
}

}  // namespace
