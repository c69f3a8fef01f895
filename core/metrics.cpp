#include "metrics.h"

#include <atomic>

namespace mongoelector::metrics {

namespace {

constexpr std::array<double, kLatencyBounds> kBounds = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

// Never destroyed: threads may record while the process exits.
struct Registry {
  std::array<std::atomic<std::uint64_t>, kAcquireOutcomes> acquires{};
  std::array<std::atomic<std::uint64_t>, kLatencyBounds + 1> buckets{};
  std::atomic<std::uint64_t> latency_count{0};
  std::atomic<std::uint64_t> latency_sum_us{0};
  std::atomic<std::uint64_t> renewals{0};
  std::atomic<std::uint64_t> renewal_failures{0};
  std::atomic<std::uint64_t> leader_elected{0};
  std::atomic<std::uint64_t> leader_lost{0};
  std::atomic<std::uint64_t> step_downs{0};
  std::atomic<std::uint64_t> clock_samples{0};
  std::atomic<std::int64_t> clock_offset_ms{0};
  std::atomic<std::int64_t> clock_uncertainty_ms{0};
  std::atomic<std::uint64_t> round_trips{0};
};

Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

constexpr auto kRelaxed = std::memory_order_relaxed;

}  // namespace

const char* acquire_outcome_name(AcquireOutcome outcome) {
  switch (outcome) {
    case AcquireOutcome::Acquired:
      return "acquired";
    case AcquireOutcome::Held:
      return "held";
    case AcquireOutcome::Timeout:
      return "timeout";
    case AcquireOutcome::Cancelled:
      return "cancelled";
    case AcquireOutcome::Error:
      return "error";
  }
  return "unknown";
}

const std::array<double, kLatencyBounds>& latency_bounds() { return kBounds; }

void record_acquire(AcquireOutcome outcome, double seconds) {
  auto& r = registry();
  r.acquires[static_cast<std::size_t>(outcome)].fetch_add(1, kRelaxed);
  std::size_t i = 0;
  while (i < kLatencyBounds && seconds > kBounds[i]) ++i;
  r.buckets[i].fetch_add(1, kRelaxed);
  r.latency_count.fetch_add(1, kRelaxed);
  if (seconds > 0) r.latency_sum_us.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), kRelaxed);
}

void record_renewal(bool ok) {
  auto& r = registry();
  r.renewals.fetch_add(1, kRelaxed);
  if (!ok) r.renewal_failures.fetch_add(1, kRelaxed);
}

void record_leadership(bool gained) {
  (gained ? registry().leader_elected : registry().leader_lost).fetch_add(1, kRelaxed);
}

void record_step_down() { registry().step_downs.fetch_add(1, kRelaxed); }

void record_clock_sample(std::int64_t offset_ms, std::int64_t uncertainty_ms) {
  auto& r = registry();
  r.clock_offset_ms.store(offset_ms, kRelaxed);
  r.clock_uncertainty_ms.store(uncertainty_ms, kRelaxed);
  r.clock_samples.fetch_add(1, kRelaxed);
}

void record_round_trip() { registry().round_trips.fetch_add(1, kRelaxed); }

Snapshot snapshot() {
  auto& r = registry();
  Snapshot s;
  for (std::size_t i = 0; i < kAcquireOutcomes; ++i) s.acquires[i] = r.acquires[i].load(kRelaxed);
  for (std::size_t i = 0; i <= kLatencyBounds; ++i)
    s.acquire_latency_buckets[i] = r.buckets[i].load(kRelaxed);
  s.acquire_latency_count = r.latency_count.load(kRelaxed);
  s.acquire_latency_sum_s = static_cast<double>(r.latency_sum_us.load(kRelaxed)) / 1e6;
  s.renewals = r.renewals.load(kRelaxed);
  s.renewal_failures = r.renewal_failures.load(kRelaxed);
  s.leader_elected = r.leader_elected.load(kRelaxed);
  s.leader_lost = r.leader_lost.load(kRelaxed);
  s.step_downs = r.step_downs.load(kRelaxed);
  s.clock_samples = r.clock_samples.load(kRelaxed);
  s.clock_offset_s = static_cast<double>(r.clock_offset_ms.load(kRelaxed)) / 1000.0;
  s.clock_uncertainty_s = static_cast<double>(r.clock_uncertainty_ms.load(kRelaxed)) / 1000.0;
  s.round_trips = r.round_trips.load(kRelaxed);
  return s;
}

}  // namespace mongoelector::metrics
