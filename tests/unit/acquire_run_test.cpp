// The acquire loop as a state machine (core/hold/acquire_run.h), driven step by step on
// the fake clock as an event loop drives it: its steps, timeout, cancellation at each
// point, a claim that lands after the cancel (released, fenced by its own token), and
// the acquire metrics counted once per run.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "exceptions.h"
#include "fixtures.h"
#include "hold/acquire_run.h"
#include "metrics.h"
#include "semaphore/semaphore.h"

namespace mongoelector::testing {
namespace {

using Kind = AcquireStep::Kind;

std::uint64_t count_of(metrics::AcquireOutcome o) {
  return metrics::snapshot().acquires[static_cast<std::size_t>(o)];
}

class AcquireRunTest : public CoreTest {};

TEST_F(AcquireRunTest, ContendedRunWaitsOneStepBetweenAttemptsAndTimesOut) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  a->acquire();
  const auto timeouts = count_of(metrics::AcquireOutcome::Timeout);
  const std::int64_t start = clock->mono_ms();
  auto run = b->start_acquire(true, 1.0, 0.4);
  EXPECT_EQ(run->next().kind, Kind::TryNow);
  AcquireStep s = run->attempt();
  ASSERT_EQ(s.kind, Kind::Wait);
  EXPECT_EQ(s.wake_mono, start + 400);
  clock->advance(399);
  EXPECT_EQ(run->next().kind, Kind::Wait);     // not yet
  EXPECT_EQ(run->attempt().kind, Kind::Wait);  // an early attempt is not made
  clock->advance(1);
  EXPECT_EQ(run->next().kind, Kind::TryNow);
  s = run->attempt();
  ASSERT_EQ(s.kind, Kind::Wait);
  EXPECT_EQ(s.wake_mono, start + 800);
  clock->advance(400);
  s = run->attempt();
  ASSERT_EQ(s.kind, Kind::Wait);
  EXPECT_EQ(s.wake_mono, start + 1000);  // the last wait ends with the timeout
  clock->advance(200);
  EXPECT_EQ(run->next().kind, Kind::TimedOut);
  EXPECT_EQ(run->attempt().kind, Kind::TimedOut);  // final: no claim any more
  EXPECT_THROW(run->result(), AcquireTimeout);
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Timeout), timeouts + 1);  // once
  EXPECT_FALSE(b->owned());
}

TEST_F(AcquireRunTest, ZeroTimeoutEndsWithoutAClaim) {
  auto b = make_locker("b");
  auto run = b->start_acquire(true, 0.0);
  EXPECT_EQ(run->next().kind, Kind::TimedOut);
  EXPECT_FALSE(storage->read("mongolocker", "k"));
}

TEST_F(AcquireRunTest, AcquiresOnceTheHolderReleases) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  const std::int64_t t1 = a->acquire();
  auto run = b->start_acquire(true, std::nullopt, 0.25);
  EXPECT_EQ(run->attempt().kind, Kind::Wait);
  a->release();
  clock->advance(250);
  const AcquireStep s = run->attempt();
  ASSERT_EQ(s.kind, Kind::Acquired);
  EXPECT_GT(s.token, t1);
  EXPECT_EQ(run->result(), s.token);
  EXPECT_EQ(run->cancel().kind, Kind::Acquired);  // too late to cancel: stays acquired
  EXPECT_TRUE(b->owned());
}

TEST_F(AcquireRunTest, NonBlockingHeldSaysWho) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  a->acquire();
  const auto held = count_of(metrics::AcquireOutcome::Held);
  auto run = b->start_acquire(false);
  EXPECT_EQ(run->attempt().kind, Kind::Held);
  EXPECT_EQ(run->next().kind, Kind::Held);
  try {
    run->result();
    FAIL() << "no LockExists";
  } catch (const LockExists& e) {
    EXPECT_NE(std::string(e.what()).find("host-a"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Held), held + 1);
  EXPECT_THROW(b->start_acquire(false, 1.0), InvalidArgument);
  EXPECT_THROW(b->start_acquire(true, -1.0), InvalidArgument);
}

TEST_F(AcquireRunTest, CancelBeforeTheFirstAttemptMakesNoClaim) {
  auto b = make_locker("b");
  const auto cancelled = count_of(metrics::AcquireOutcome::Cancelled);
  auto run = b->start_acquire();
  EXPECT_EQ(run->cancel().kind, Kind::Cancelled);
  EXPECT_EQ(run->attempt().kind, Kind::Cancelled);
  EXPECT_THROW(run->result(), Cancelled);
  EXPECT_FALSE(storage->read("mongolocker", "k"));
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Cancelled), cancelled + 1);
}

TEST_F(AcquireRunTest, CancelDuringTheWaitEndsIt) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  a->acquire();
  auto run = b->start_acquire();
  EXPECT_EQ(run->attempt().kind, Kind::Wait);
  EXPECT_EQ(run->cancel().kind, Kind::Cancelled);
  a->release();
  clock->advance(1000);
  EXPECT_EQ(run->next().kind, Kind::Cancelled);
  EXPECT_EQ(run->attempt().kind, Kind::Cancelled);
  EXPECT_FALSE(b->owned());
  EXPECT_FALSE(b->hold());
}

// The event loop's case: the task is cancelled while its attempt runs on a worker, and
// the claim lands at the server. The attempt releases that hold, fenced by its token.
TEST_F(AcquireRunTest, AClaimThatLandsAfterTheCancelIsReleased) {
  auto b = make_locker("b", 60);
  const auto cancelled = count_of(metrics::AcquireOutcome::Cancelled);
  const auto acquired = count_of(metrics::AcquireOutcome::Acquired);
  auto run = b->start_acquire();
  std::vector<std::string> ops;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (applied) ops.push_back(op);
    if (op == "claim" && applied) run->cancel();  // the claim was applied, reply not seen
  });
  EXPECT_EQ(run->attempt().kind, Kind::Cancelled);
  storage->set_fault_hook(nullptr);
  EXPECT_FALSE(b->hold());
  auto doc = storage->read("mongolocker", "k");
  EXPECT_TRUE(!doc || !doc->locked || doc->uuid != "uuid-b");
  EXPECT_EQ(ops.back(), "release");
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Cancelled), cancelled + 1);
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Acquired), acquired);  // never reported
  // Nobody is locked out: another locker takes it at once.
  auto c = make_locker("c", 60);
  EXPECT_GT(c->acquire(false), 0);
}

TEST_F(AcquireRunTest, GiveUpUndoesTheWaitOnceAndNotAfterAnAcquire) {
  auto a = make_locker("a", 60), b = make_locker("b", 60);
  ASSERT_GT(a->acquire(false), 0);
  const auto cancelled = count_of(metrics::AcquireOutcome::Cancelled);
  int undone = 0;
  auto run = b->start_acquire();
  run->set_undo_wait([&] { ++undone; });
  ASSERT_EQ(run->attempt().kind, Kind::Wait);
  EXPECT_EQ(run->give_up().kind, Kind::Cancelled);
  EXPECT_EQ(undone, 1);
  EXPECT_EQ(run->give_up().kind, Kind::Cancelled);
  EXPECT_EQ(undone, 1) << "once";
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Cancelled), cancelled + 1) << "counted once";
  EXPECT_EQ(run->attempt().kind, Kind::Cancelled) << "no claim after giving up";

  // With the attempt in flight (give_up from inside its claim, as another thread would):
  // the undo waits for the attempt to end, so it runs after the attempt's own writes.
  auto late = b->start_acquire();
  late->set_undo_wait([&] { ++undone; });
  int undone_in_flight = -1;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "claim" || applied || undone_in_flight >= 0) return;
    EXPECT_EQ(late->give_up().kind, Kind::Cancelled);
    undone_in_flight = undone - 1;
  });
  EXPECT_EQ(late->attempt().kind, Kind::Cancelled);
  storage->set_fault_hook(nullptr);
  EXPECT_EQ(undone_in_flight, 0) << "not while the attempt ran";
  EXPECT_EQ(undone, 2) << "as the attempt ended";

  // Acquired: the claim removed what the wait wrote; nothing to undo.
  a->release();
  auto won = b->start_acquire();
  won->set_undo_wait([&] { ++undone; });
  ASSERT_EQ(won->attempt().kind, Kind::Acquired);
  EXPECT_EQ(won->give_up().kind, Kind::Acquired);
  EXPECT_EQ(undone, 2);
  EXPECT_TRUE(b->hold());
}

TEST_F(AcquireRunTest, AnAcquiredOutcomeNobodyTookIsReleasedByAbandon) {
  // An event loop's task cancelled as the attempt ended: the run says Acquired, but
  // nobody will take the hold. abandon() releases it, once, and only that hold.
  auto b = make_locker("b", 60);
  auto run = b->start_acquire();
  ASSERT_EQ(run->attempt().kind, Kind::Acquired);
  ASSERT_TRUE(b->hold());
  EXPECT_TRUE(run->abandon());
  EXPECT_FALSE(b->hold());
  auto c = make_locker("c", 60);
  EXPECT_GT(c->acquire(false), 0);  // nobody is locked out
  c->release();
  EXPECT_FALSE(run->abandon());  // released once

  // A newer hold of the same locker is not the abandoned run's: left alone.
  auto old_run = b->start_acquire();
  ASSERT_EQ(old_run->attempt().kind, Kind::Acquired);
  b->release();
  const std::int64_t newer = b->acquire();
  EXPECT_FALSE(old_run->abandon());
  EXPECT_EQ(b->hold()->fence, newer);

  // A run that did not acquire has nothing to abandon (no write).
  auto d = make_locker("d", 60);
  auto held = d->start_acquire(/*blocking=*/false);
  ASSERT_EQ(held->attempt().kind, Kind::Held);
  std::vector<std::string> ops;
  storage->set_fault_hook([&](const std::string& op, bool) { ops.push_back(op); });
  EXPECT_FALSE(held->abandon());
  storage->set_fault_hook(nullptr);
  EXPECT_TRUE(ops.empty());
}

TEST_F(AcquireRunTest, ReleaseIfNamesOneHold) {
  auto b = make_locker("b", 60);
  const std::int64_t t1 = b->acquire();
  b->release();
  const std::int64_t t2 = b->acquire();
  ASSERT_GT(t2, t1);
  EXPECT_FALSE(b->release_if(t1));  // an older claim's token never frees the newer hold
  EXPECT_TRUE(b->owned());
  EXPECT_TRUE(b->release_if(t2));
  EXPECT_FALSE(b->owned());
  EXPECT_FALSE(b->release_if(t2));  // nothing held: no write
}

TEST_F(AcquireRunTest, AFailedAttemptEndsTheRunAsAnError) {
  auto b = make_locker("b");
  const auto errors = count_of(metrics::AcquireOutcome::Error);
  auto run = b->start_acquire();
  storage->set_unavailable(true);
  EXPECT_THROW(run->attempt(), StorageUnavailable);
  storage->set_unavailable(false);
  EXPECT_EQ(run->next().kind, Kind::Failed);
  EXPECT_EQ(run->attempt().kind, Kind::Failed);
  EXPECT_THROW(run->result(), StorageUnavailable);
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Error), errors + 1);
}

TEST_F(AcquireRunTest, TheBlockingAcquireDrivesTheSameRun) {
  auto a = make_locker("a", 60);
  auto b = make_locker("b", 60);
  a->acquire();
  const auto timeouts = count_of(metrics::AcquireOutcome::Timeout);
  const std::int64_t start = clock->mono_ms();
  int claims = 0;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "claim" && applied) ++claims;
  });
  EXPECT_THROW(b->acquire(true, 1.0, 0.4), AcquireTimeout);
  storage->set_fault_hook(nullptr);
  EXPECT_EQ(claims, 3);  // at 0, 400 and 800 ms, as the steps above
  EXPECT_EQ(clock->mono_ms() - start, 1000);
  EXPECT_EQ(count_of(metrics::AcquireOutcome::Timeout), timeouts + 1);
}

TEST_F(AcquireRunTest, ASemaphoreSlotThatLandsAfterTheCancelIsReleased) {
  SemaphoreOptions o;
  o.key = "pool";
  o.limit = 2;
  o.ttl_s = 30;
  auto s = std::make_shared<Semaphore>(storage, o, clock, Identity{"uuid-s", "host-s", 1});
  auto run = s->start_acquire();
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if ((op == "claim_semaphore" || op == "create_semaphore") && applied) run->cancel();
  });
  EXPECT_EQ(run->attempt().kind, Kind::Cancelled);
  storage->set_fault_hook(nullptr);
  EXPECT_FALSE(s->hold());
  auto doc = storage->read_semaphore("mongosemaphore", "pool");
  ASSERT_TRUE(doc);
  for (const auto& slot : doc->slots) EXPECT_NE(slot.uuid, "uuid-s");
}

}  // namespace
}  // namespace mongoelector::testing
