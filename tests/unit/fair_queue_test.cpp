// Fair (FIFO) queueing (core/hold/fair_queue.h) on a FakeClock and MemoryStorage: the
// rules as pure functions (invariant Q: a claim never passes a live entry), then
// semaphores and read-write lock writers driven through their acquire runs: grants in
// arrival order, no barging by unfair claimants, a dead waiter costs at most one ttl, a
// waiter that gives up leaves at once, a waiter whose entry expired loses its place,
// and no polling storm (only the head looks every step).
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exceptions.h"
#include "fair_waiters.h"
#include "fixtures.h"
#include "hold/acquire_run.h"
#include "hold/fair_queue.h"
#include "semaphore/rwlock.h"
#include "semaphore/semaphore.h"
#include "storage/semaphore_doc.h"

using namespace mongoelector;
using namespace mongoelector::testing;

namespace {

using Kind = AcquireStep::Kind;

QueueEntry entry(const std::string& uuid, std::int64_t ticket, std::int64_t expire) {
  return QueueEntry{uuid, ticket, expire};
}

TEST(FairQueueRules, TheGateNeverPassesALiveEntry) {
  const std::vector<QueueEntry> q = {entry("a", 1, 100), entry("b", 2, 500), entry("c", 3, 900)};
  // At 200: a expired, b live and first.
  EXPECT_FALSE(fair_queue::gate(q, "c", 3, 200).open) << "b is live and before c";
  EXPECT_FALSE(fair_queue::gate(q, "x", 0, 200).open) << "no entry: every live one comes first";
  const fair_queue::Gate b = fair_queue::gate(q, "b", 2, 200);
  ASSERT_TRUE(b.open);
  ASSERT_EQ(b.passed.size(), 1u);
  EXPECT_EQ(b.passed[0].uuid, "a");
  ASSERT_TRUE(b.own);
  EXPECT_EQ(b.own->ticket, 2);
  // At 600: a and b expired, c heads the live queue.
  const fair_queue::Gate c = fair_queue::gate(q, "c", 3, 600);
  ASSERT_TRUE(c.open);
  EXPECT_EQ(c.passed.size(), 2u);
  // At 1000: nothing live; a claimant without an entry passes them all.
  const fair_queue::Gate x = fair_queue::gate(q, "x", 0, 1000);
  EXPECT_TRUE(x.open);
  EXPECT_EQ(x.passed.size(), 3u);
  EXPECT_FALSE(x.own);
  // An own entry that expired is no place in line.
  EXPECT_FALSE(fair_queue::gate(q, "a", 1, 200).open);
  EXPECT_EQ(fair_queue::standing(q, "a", 1, 200).own, -1);
  EXPECT_EQ(fair_queue::standing(q, "c", 3, 200).ahead, 1);
  EXPECT_TRUE(fair_queue::standing(q, "b", 2, 200).head());
}

TEST(FairQueueRules, WaitsGrowWithThePlaceAndStayWithinAThirdOfTheTtl) {
  EXPECT_EQ(fair_queue::wait_ms(0, kFairStepMs, kFairTtlMs), kFairStepMs)
      << "the head looks every step";
  EXPECT_EQ(fair_queue::wait_ms(3, kFairStepMs, kFairTtlMs), 4 * kFairStepMs);
  EXPECT_EQ(fair_queue::wait_ms(1000, kFairStepMs, kFairTtlMs), kFairTtlMs / 3);
  EXPECT_EQ(fair_queue::wait_ms(std::int64_t{1} << 62, kFairStepMs, kFairTtlMs), kFairTtlMs / 3);
  EXPECT_EQ(fair_queue::wait_ms(5, kFairStepMs, 300), kFairStepMs) << "never below the step";
  EXPECT_FALSE(fair_queue::renew_due(10000, 0, kFairTtlMs));
  EXPECT_FALSE(fair_queue::renew_due(10000, 3000, kFairTtlMs));
  EXPECT_TRUE(fair_queue::renew_due(10000, 3500, kFairTtlMs));
}

class FairQueueTest : public FairTest {
 protected:
  std::shared_ptr<Semaphore> sem(const std::string& name, bool fair = true,
                                 std::int64_t limit = 1) {
    SemaphoreOptions o;
    o.key = "pool";
    o.limit = limit;
    o.ttl_s = static_cast<double>(kFairTtlMs) / 1000.0;
    o.fair = fair;
    return std::make_shared<Semaphore>(storage, o, clock,
                                       Identity{"uuid-" + name, "host-" + name, 100});
  }
  std::shared_ptr<RwLock> rw(const std::string& name, bool fair = true) {
    RwLockOptions o;
    o.key = "db";
    o.max_readers = 3;
    o.ttl_s = static_cast<double>(kFairTtlMs) / 1000.0;
    o.fair = fair;
    return std::make_shared<RwLock>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }
  SemaphoreDoc doc(const char* coll = "mongosemaphore", const char* key = "pool") {
    return *storage->read_semaphore(coll, key);
  }
};

TEST_F(FairQueueTest, GrantsFollowArrivalOrderAndUnfairClaimantsDoNotBarge) {
  auto holder = sem("holder");
  holder->acquire(false);
  std::vector<std::shared_ptr<Semaphore>> sems;
  std::vector<FairWaiter> ws;
  for (const char* n : {"w0", "w1", "w2", "w3"}) {
    sems.push_back(sem(n));
    ws.push_back(FairWaiter{n, sems.back(), sems.back()->start_acquire(true, std::nullopt, 0.25)});
    ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait) << n << " enqueues";
    clock->advance(10);
  }
  const SemaphoreDoc d = doc();
  ASSERT_EQ(d.queue.size(), 4u);
  for (std::size_t i = 1; i < d.queue.size(); ++i)
    EXPECT_LT(d.queue[i - 1].ticket, d.queue[i].ticket) << "tickets increase along the queue";
  // An unfair blocking claimant polling every step, and try_acquire: never served ahead.
  auto barger = sem("barger", /*fair=*/false);
  ws.push_back(FairWaiter{"barger", barger, barger->start_acquire(true, std::nullopt, 0.25)});
  std::vector<std::string> granted;
  holder->release();
  for (int round = 0; round < 4; ++round) {
    EXPECT_FALSE(barger->try_acquire()) << "the queue is live: no barging";
    drive(ws, 40, granted, [&] { return granted.size() == static_cast<std::size_t>(round + 1); });
    ASSERT_EQ(granted.size(), static_cast<std::size_t>(round + 1));
    sems[static_cast<std::size_t>(round)]->release();
  }
  EXPECT_EQ(granted, (std::vector<std::string>{"w0", "w1", "w2", "w3"}));
  drive(ws, 4, granted);
  EXPECT_EQ(granted.back(), "barger") << "served once the queue is empty";
  EXPECT_TRUE(doc().queue.empty()) << "every entry left with its claim";
}

TEST_F(FairQueueTest, ADeadWaiterCostsAtMostOneTtl) {
  expect_a_dead_waiter_costs_at_most_one_ttl(sem("holder"), sem("dead"), sem("next"),
                                             [&] { return doc().queue.size(); });
}

TEST_F(FairQueueTest, AWaiterThatGivesUpLeavesAtOnce) {
  auto quitter = sem("quitter");
  expect_a_waiter_that_gives_up_leaves_at_once(
      sem("holder"), quitter, sem("next"),
      [&] {
        EXPECT_THROW(quitter->acquire(true, 1.0, 0.25, [] { return false; }), AcquireTimeout);
      },
      [&] { return doc().queue.size(); });
}

TEST_F(FairQueueTest, AGiveUpDuringAnAttemptLeavesNoEntry) {
  expect_a_give_up_during_an_attempt_leaves_nothing(sem("holder"), sem("quitter"), sem("next"),
                                                    "claim_semaphore",
                                                    [&] { return doc().queue.size(); });
}

TEST_F(FairQueueTest, AWriterThatGivesUpDuringAnAttemptLeavesNoEntry) {
  auto reader = rw("reader"), quitter = rw("quitter");
  reader->acquire(RwSide::Read, false);
  auto run = quitter->start_acquire(RwSide::Write, true, std::nullopt, 0.25);
  bool gave_up = false;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (applied || gave_up || op != "claim_semaphore") return;
    gave_up = true;
    EXPECT_EQ(run->give_up().kind, Kind::Cancelled);
  });
  EXPECT_EQ(run->attempt().kind, Kind::Cancelled);
  storage->set_fault_hook({});
  ASSERT_TRUE(gave_up);
  EXPECT_TRUE(doc("mongorwlock", "db").queue.empty()) << "its entry went with the give-up";
  reader->release();
  EXPECT_TRUE(rw("late")->try_acquire(RwSide::Read)) << "no writer waits: readers enter";
}

TEST_F(FairQueueTest, AStrayEntryOfAWaitersOwnIsRemovedAtItsNextLook) {
  expect_a_stray_of_its_own_is_removed(sem("holder"), sem("w"), sem("next"),
                                       [&] { return doc().queue; });
}

TEST_F(FairQueueTest, AWaiterWhoseEntryExpiredLosesItsPlace) {
  expect_a_paused_waiter_loses_its_place(sem("holder"), sem("sleeper"), sem("patient"));
}

TEST_F(FairQueueTest, OnlyTheHeadLooksEveryStep) {
  auto holder = sem("holder");
  holder->acquire(false);
  std::vector<std::shared_ptr<Semaphore>> sems;
  std::vector<FairWaiter> ws;
  for (int i = 0; i < 8; ++i) {
    sems.push_back(sem("w" + std::to_string(i)));
    ws.push_back(FairWaiter{"w" + std::to_string(i), sems.back(),
                            sems.back()->start_acquire(true, std::nullopt, 0.25)});
  }
  std::vector<std::string> granted;
  drive(ws, 1, granted);  // everyone enqueues
  ASSERT_EQ(doc().queue.size(), 8u);
  expect_only_the_head_looks_every_step(holder, ws);
}

TEST_F(FairQueueTest, FairWritersAreServedInOrderAndALiveQueueStopsNewReaders) {
  auto reader = rw("reader"), late_reader = rw("late"), w0 = rw("w0"), w1 = rw("w1");
  reader->acquire(RwSide::Read, false);
  std::vector<FairWaiter> ws;
  ws.push_back(FairWaiter{"w0", w0, w0->start_acquire(RwSide::Write, true, std::nullopt, 0.25)});
  ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait);
  ws.push_back(FairWaiter{"w1", w1, w1->start_acquire(RwSide::Write, true, std::nullopt, 0.25)});
  ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait);
  const SemaphoreDoc d = doc("mongorwlock", "db");
  EXPECT_EQ(d.queue.size(), 2u);
  EXPECT_TRUE(semaphore_doc::is_empty(d.slots[4])) << "fair writers queue instead of marking";
  EXPECT_FALSE(late_reader->try_acquire(RwSide::Read)) << "writers wait: no new readers";
  std::vector<std::string> granted;
  reader->release();
  drive(ws, 8, granted, [&] { return !granted.empty(); });
  EXPECT_EQ(granted, (std::vector<std::string>{"w0"}));
  w0->release();
  drive(ws, 8, granted, [&] { return granted.size() == 2; });
  EXPECT_EQ(granted, (std::vector<std::string>{"w0", "w1"}));
  w1->release();
  EXPECT_TRUE(late_reader->try_acquire(RwSide::Read)) << "the queue is empty: readers enter";
}

TEST_F(FairQueueTest, TheQueueWritesAreFencedByUuidAndTicket) {
  auto holder = sem("holder"), w = sem("w");
  holder->acquire(false);
  auto run = w->start_acquire(true, std::nullopt, 0.25);
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  const QueueEntry mine = w->queue_entry();
  const std::int64_t now = clock->wall_ms();
  EXPECT_FALSE(storage->renew_queue_entry("mongosemaphore", "pool", 0, mine.uuid, mine.ticket + 1,
                                          now, now + 2 * kFairTtlMs));
  EXPECT_FALSE(storage->renew_queue_entry("mongosemaphore", "pool", 0, "uuid-other", mine.ticket,
                                          now, now + 2 * kFairTtlMs));
  EXPECT_FALSE(storage->leave_queue("mongosemaphore", "pool", mine.uuid, mine.ticket + 1));
  EXPECT_TRUE(storage->renew_queue_entry("mongosemaphore", "pool", 0, mine.uuid, mine.ticket, now,
                                         now + 1));
  EXPECT_EQ(doc().queue.at(0).expire_ms, mine.expire_ms) << "an expiry only moves later";
  EXPECT_TRUE(storage->leave_queue("mongosemaphore", "pool", mine.uuid, mine.ticket));
  EXPECT_TRUE(doc().queue.empty());
  run->cancel();
}

}  // namespace
