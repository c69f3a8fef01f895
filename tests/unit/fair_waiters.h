// The harness of the fair-queueing tests (fair_queue_test.cpp: semaphores and read-write
// lock writers; fair_lock_test.cpp: plain locks): waiters driven step by step on the fake
// clock, the storage operations counted, and the scenarios every fair hold must pass.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.h"
#include "hold/acquire_run.h"
#include "hold/holdable.h"
#include "storage/semaphore_storage.h"

namespace mongoelector::testing {

constexpr std::int64_t kFairStepMs = 250;
constexpr std::int64_t kFairTtlMs = 10000;

// A waiter: its run, its hold, and whether its process is alive (a dead one is never
// driven).
struct FairWaiter {
  std::string name;
  std::shared_ptr<Holdable> holder;
  std::unique_ptr<AcquireRun> run;
  bool alive = true;
  bool done = false;
};

class FairTest : public CoreTest {
 protected:
  // Drives every live waiter whose run is due, in arrival order (or, `newest_first`, the
  // last arrived first: without a queue the newest would then win every race), one step
  // of the clock at a time, for at most `steps` steps or until `stop` says so; grants go
  // to `granted` in order. `after_step` runs after every step, before the clock moves.
  void drive(std::vector<FairWaiter>& ws, int steps, std::vector<std::string>& granted,
             const std::function<bool()>& stop = {}, bool newest_first = false,
             const std::function<void()>& after_step = {}) {
    for (int i = 0; i < steps; ++i) {
      for (std::size_t j = 0; j < ws.size(); ++j) {
        FairWaiter& w = ws[newest_first ? ws.size() - 1 - j : j];
        if (!w.alive || w.done || w.run->next().kind != AcquireStep::Kind::TryNow) continue;
        if (w.run->attempt().kind == AcquireStep::Kind::Acquired) {
          granted.push_back(w.name);
          w.done = true;
        }
      }
      if (after_step) after_step();
      if (stop && stop()) return;
      clock->advance(kFairStepMs);
    }
  }

  // The storage operations made while `f` runs, by name.
  std::map<std::string, int> ops_during(const std::function<void()>& f) {
    std::map<std::string, int> ops;
    storage->set_fault_hook([&](const std::string& op, bool applied) {
      if (!applied) ++ops[op];
    });
    f();
    storage->set_fault_hook({});
    return ops;
  }
  static int count(const std::map<std::string, int>& ops, const std::string& op) {
    const auto it = ops.find(op);
    return it == ops.end() ? 0 : it->second;
  }

  // A dead waiter costs at most one ttl: `dead` queues and dies (its only renewal is the
  // enqueue), `next` queues behind it; after the release `next` is served once the dead
  // entry expired and not later, and its claim removed the entry it passed (`queue_size`:
  // the entries left in the key's queue).
  template <class H>
  void expect_a_dead_waiter_costs_at_most_one_ttl(const std::shared_ptr<H>& holder,
                                                  const std::shared_ptr<H>& dead,
                                                  const std::shared_ptr<H>& next,
                                                  const std::function<std::size_t()>& queue_size) {
    holder->acquire(false);
    std::vector<FairWaiter> ws;
    ws.push_back(FairWaiter{"dead", dead, dead->start_acquire(true, std::nullopt, 0.25)});
    ASSERT_EQ(ws.back().run->attempt().kind, AcquireStep::Kind::Wait);
    const std::int64_t dead_since = clock->mono_ms();
    ws.back().alive = false;
    clock->advance(10);
    ws.push_back(FairWaiter{"next", next, next->start_acquire(true, std::nullopt, 0.25)});
    holder->release();
    std::vector<std::string> granted;
    drive(ws, 200, granted, [&] { return !granted.empty(); });
    ASSERT_EQ(granted, (std::vector<std::string>{"next"}));
    const std::int64_t waited = clock->mono_ms() - dead_since;
    EXPECT_GE(waited, kFairTtlMs) << "the dead waiter's place held until its entry expired";
    EXPECT_LE(waited, kFairTtlMs + 2 * kFairStepMs) << "and not a moment longer than one ttl";
    EXPECT_EQ(queue_size(), 0u) << "the claim removed the expired entry it passed";
  }

  // A waiter that gives up leaves at once: `time_out` runs an acquire of `quitter` that
  // times out (and checks it did); then `quitter` queues before `next` and its run is
  // cancelled and left: `next` is served within a step or two of the release.
  template <class H>
  void expect_a_waiter_that_gives_up_leaves_at_once(
      const std::shared_ptr<H>& holder, const std::shared_ptr<H>& quitter,
      const std::shared_ptr<H>& next, const std::function<void()>& time_out,
      const std::function<std::size_t()>& queue_size) {
    using Kind = AcquireStep::Kind;
    holder->acquire(false);
    time_out();
    EXPECT_EQ(quitter->queue_entry().ticket, 0);
    EXPECT_EQ(queue_size(), 0u) << "a timed-out waiter left the queue";
    std::vector<FairWaiter> ws;
    ws.push_back(FairWaiter{"quitter", quitter, quitter->start_acquire(true, std::nullopt, 0.25)});
    ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait);
    ws.push_back(FairWaiter{"next", next, next->start_acquire(true, std::nullopt, 0.25)});
    ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait);
    EXPECT_EQ(queue_size(), 2u);
    EXPECT_EQ(ws[0].run->give_up().kind, Kind::Cancelled);
    EXPECT_EQ(queue_size(), 1u) << "the run's give_up() removed its entry";
    holder->release();
    std::vector<std::string> granted;
    drive(ws, 3, granted);
    EXPECT_EQ(granted, (std::vector<std::string>{"next"})) << "within a step or two, not a ttl";
  }

  // A caller that gives up while an attempt of its run is in flight (on another thread:
  // here from inside the attempt's first queue write, before it lands) does not leave an
  // entry behind: the attempt runs the undo as it ends, after its own write, so `next`
  // is served right after the release and not a ttl later. `first_write`: the storage
  // operation that writes the waiter's entry.
  template <class H>
  void expect_a_give_up_during_an_attempt_leaves_nothing(
      const std::shared_ptr<H>& holder, const std::shared_ptr<H>& quitter,
      const std::shared_ptr<H>& next, const std::string& first_write,
      const std::function<std::size_t()>& queue_size) {
    using Kind = AcquireStep::Kind;
    holder->acquire(false);
    std::vector<FairWaiter> ws;
    ws.push_back(FairWaiter{"quitter", quitter, quitter->start_acquire(true, std::nullopt, 0.25)});
    AcquireRun& run = *ws.back().run;
    bool gave_up = false;
    storage->set_fault_hook([&](const std::string& op, bool applied) {
      if (applied || gave_up || op != first_write) return;
      gave_up = true;
      EXPECT_EQ(run.give_up().kind, Kind::Cancelled) << "the run ends at once";
      EXPECT_EQ(queue_size(), 0u) << "nothing written yet";
    });
    const AcquireStep step = run.attempt();
    storage->set_fault_hook({});
    ASSERT_TRUE(gave_up) << first_write << " was never sent";
    EXPECT_EQ(step.kind, Kind::Cancelled);
    EXPECT_EQ(quitter->queue_entry().ticket, 0);
    EXPECT_EQ(queue_size(), 0u) << "the entry written after the caller gave up was removed";
    ws.push_back(FairWaiter{"next", next, next->start_acquire(true, std::nullopt, 0.25)});
    ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait);
    ws[0].done = true;
    holder->release();
    std::vector<std::string> granted;
    drive(ws, 3, granted);
    EXPECT_EQ(granted, (std::vector<std::string>{"next"})) << "within a step or two, not a ttl";
  }

  // No polling storm: with `holder` holding and the waiters `ws` queued, one ttl of steps
  // (40): the head reads the queue every step, the k-th waiter every k+1 steps (the
  // harmonic sum: about 2.7 reads a step for 8, where unfair polling makes 8), every
  // waiter renews its entry about twice, and nobody enqueues again. The operations made.
  template <class H>
  std::map<std::string, int> expect_only_the_head_looks_every_step(const std::shared_ptr<H>& holder,
                                                                   std::vector<FairWaiter>& ws) {
    constexpr int kSteps = 40;  // one ttl
    std::vector<std::string> granted;
    const std::map<std::string, int> ops = ops_during([&] {
      for (int i = 0; i < kSteps; ++i) {
        drive(ws, 1, granted);
        holder->touch();
      }
    });
    EXPECT_TRUE(granted.empty());
    const int reads = count(ops, "read_semaphore");
    EXPECT_GE(reads, kSteps) << "the head looks every step";
    EXPECT_LE(reads, 3 * kSteps) << "the others do not poll in a storm";
    const int renewals = count(ops, "renew_queue_entry");
    const int n = static_cast<int>(ws.size());
    EXPECT_GE(renewals, n) << "every waiter kept its place";
    EXPECT_LE(renewals, n * 3);
    EXPECT_EQ(count(ops, "claim_semaphore"), 0) << "nobody enqueued twice";
    return ops;
  }

  // A stray entry of a waiter's own does not hold the queue back: `w` queues, then its
  // leave fails (the server is unreachable), so its entry stays; queued again (behind the
  // stray, before `next`), it removes the stray at once and is served right after the
  // release, not a ttl later (`queue`: the key's queue as stored).
  template <class H>
  void expect_a_stray_of_its_own_is_removed(const std::shared_ptr<H>& holder,
                                            const std::shared_ptr<H>& w,
                                            const std::shared_ptr<H>& next,
                                            const std::function<std::vector<QueueEntry>()>& queue) {
    using Kind = AcquireStep::Kind;
    holder->acquire(false);
    auto run = w->start_acquire(true, std::nullopt, 0.25);
    ASSERT_EQ(run->attempt().kind, Kind::Wait);
    const std::int64_t stray = w->queue_entry().ticket;
    run->cancel();
    storage->set_unavailable(true);
    w->leave_queue();  // fails (logged): the entry stays until it expires
    storage->set_unavailable(false);
    ASSERT_EQ(queue().size(), 1u);
    std::vector<FairWaiter> ws;
    ws.push_back(FairWaiter{"w", w, w->start_acquire(true, std::nullopt, 0.25)});
    ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait);
    ws.push_back(FairWaiter{"next", next, next->start_acquire(true, std::nullopt, 0.25)});
    ASSERT_EQ(ws.back().run->attempt().kind, Kind::Wait);
    const std::vector<QueueEntry> q = queue();
    ASSERT_EQ(q.size(), 2u) << "the stray is gone";
    EXPECT_EQ(q[0].uuid, w->queue_entry().uuid);
    EXPECT_GT(q[0].ticket, stray);
    holder->release();
    std::vector<std::string> granted;
    drive(ws, 3, granted, [&] { return !granted.empty(); });
    EXPECT_EQ(granted, (std::vector<std::string>{"w"})) << "within a step, not a ttl";
  }

  // A waiter paused past its entry's expiry loses its place: `holder` holds, `sleeper`
  // queues, then `patient`; the sleeper is paused 12 s (over a ttl) while the patient
  // keeps its entry; back, the sleeper enqueues again at the end, and after the release
  // the patient is served first. H: a fair hold with start_acquire(blocking, timeout,
  // step), touch(), release() and queue_entry().
  template <class H>
  void expect_a_paused_waiter_loses_its_place(const std::shared_ptr<H>& holder,
                                              const std::shared_ptr<H>& sleeper,
                                              const std::shared_ptr<H>& patient) {
    using Kind = AcquireStep::Kind;
    holder->acquire(false);
    auto run_s = sleeper->start_acquire(true, std::nullopt, 0.25);
    ASSERT_EQ(run_s->attempt().kind, Kind::Wait);
    const std::int64_t first_ticket = sleeper->queue_entry().ticket;
    auto run_p = patient->start_acquire(true, std::nullopt, 0.25);
    ASSERT_EQ(run_p->attempt().kind, Kind::Wait);
    for (int i = 0; i < 48; ++i) {
      clock->advance(kFairStepMs);
      holder->touch();
      if (run_p->next().kind == Kind::TryNow) {
        ASSERT_EQ(run_p->attempt().kind, Kind::Wait);
      }
    }
    ASSERT_EQ(run_s->attempt().kind, Kind::Wait) << "back, behind the patient one";
    EXPECT_GT(sleeper->queue_entry().ticket, first_ticket) << "enqueued again, at the end";
    holder->release();
    std::vector<FairWaiter> ws;
    ws.push_back(FairWaiter{"sleeper", sleeper, std::move(run_s)});
    ws.push_back(FairWaiter{"patient", patient, std::move(run_p)});
    std::vector<std::string> granted;
    drive(ws, 8, granted, [&] { return !granted.empty(); });
    EXPECT_EQ(granted, (std::vector<std::string>{"patient"}));
  }
};

}  // namespace mongoelector::testing
