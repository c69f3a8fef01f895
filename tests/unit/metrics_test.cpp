// Metrics (core/metrics.h): each recorded event moves its counter, with a fake clock and
// the in-memory server. The registry is process-wide, so tests compare deltas.
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fixtures.h"
#include "metrics.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {
std::uint64_t outcome(const metrics::Snapshot& s, metrics::AcquireOutcome o) {
  return s.acquires[static_cast<std::size_t>(o)];
}
}  // namespace

class MetricsTest : public CoreTest {};

TEST_F(MetricsTest, AcquireOutcomesAndLatency) {
  using metrics::AcquireOutcome;
  const auto before = metrics::snapshot();
  auto a = make_locker("a");
  auto b = make_locker("b");
  a->acquire();
  EXPECT_THROW(b->acquire(false), LockExists);
  // A blocking wait of 2 s (fake time) that runs out: one timeout, in the 2.5 s bucket.
  EXPECT_THROW(b->acquire(true, 2.0, 0.5), AcquireTimeout);
  EXPECT_THROW(b->acquire(true, std::nullopt, 0.25, false, [] { return true; }), Cancelled);
  EXPECT_THROW(b->acquire(false, 1.0), InvalidArgument);  // not an outcome
  storage->set_unavailable(true);
  EXPECT_ANY_THROW(b->acquire(false));
  storage->set_unavailable(false);
  const auto after = metrics::snapshot();
  EXPECT_EQ(outcome(after, AcquireOutcome::Acquired) - outcome(before, AcquireOutcome::Acquired),
            1u);
  EXPECT_EQ(outcome(after, AcquireOutcome::Held) - outcome(before, AcquireOutcome::Held), 1u);
  EXPECT_EQ(outcome(after, AcquireOutcome::Timeout) - outcome(before, AcquireOutcome::Timeout), 1u);
  EXPECT_EQ(outcome(after, AcquireOutcome::Cancelled) - outcome(before, AcquireOutcome::Cancelled),
            1u);
  EXPECT_EQ(outcome(after, AcquireOutcome::Error) - outcome(before, AcquireOutcome::Error), 1u);
  EXPECT_EQ(after.acquire_latency_count - before.acquire_latency_count, 5u);
  const auto& bounds = metrics::latency_bounds();
  std::size_t bucket_2_5 = 0;
  while (bounds[bucket_2_5] < 2.5) ++bucket_2_5;
  EXPECT_EQ(after.acquire_latency_buckets[bucket_2_5] - before.acquire_latency_buckets[bucket_2_5],
            1u);
  // A difference of two large process-wide sums (in s, from integer us): not exact.
  EXPECT_GE(after.acquire_latency_sum_s - before.acquire_latency_sum_s, 2.0 - 1e-6);
  EXPECT_GT(after.round_trips, before.round_trips);
  EXPECT_GT(after.clock_samples, before.clock_samples);
}

TEST_F(MetricsTest, RenewalsLeadershipAndStepDowns) {
  std::vector<std::string> events;
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = 8;
  o.report_status = false;
  auto a = std::make_unique<Elector>(storage, o, ElectorCallbacks{}, clock,
                                     Identity{"uuid-a", "host-a", 1});
  const auto before = metrics::snapshot();
  a->poll();  // becomes leader
  clock->advance(3000);
  a->poll();  // renews
  storage->set_unavailable(true);
  clock->advance(3000);
  a->poll();  // the renewal fails
  clock->advance(*a->renew_deadline_mono() - clock->mono_ms());
  a->poll();  // steps down at its renew deadline, before the lease could expire
  storage->set_unavailable(false);
  const auto after = metrics::snapshot();
  EXPECT_EQ(after.leader_elected - before.leader_elected, 1u);
  EXPECT_EQ(after.leader_lost - before.leader_lost, 1u);
  EXPECT_EQ(after.step_downs - before.step_downs, 1u);
  EXPECT_GE(after.renewals - before.renewals, 2u);
  EXPECT_GE(after.renewal_failures - before.renewal_failures, 1u);
  EXPECT_LT(after.renewal_failures - before.renewal_failures, after.renewals - before.renewals);
}

TEST_F(MetricsTest, ClockOffsetAndUncertaintyFollowTheLastSample) {
  server_skew_ms = 1500;  // the server's clock runs 1.5 s ahead of the host's
  auto a = make_locker("a");
  a->refresh_clock();
  auto s = metrics::snapshot();
  EXPECT_NEAR(s.clock_offset_s, 1.5, 0.01);
  EXPECT_GE(s.clock_uncertainty_s, 0.0);
}
