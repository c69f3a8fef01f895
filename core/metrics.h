// Process-wide counters and histograms of what the library does (issue #11): acquire
// outcomes and latency, renewals and their failures, leadership transitions, step-downs
// before expiry, the server clock's offset and uncertainty, round trips. Lock-free
// (relaxed atomics): recording costs a few atomic adds. Read as one snapshot by the C
// API's mongoelector_stats_get and by the bindings (Python's prometheus/OpenTelemetry
// adapters, the CLI's status).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace mongoelector::metrics {

enum class AcquireOutcome { Acquired = 0, Held = 1, Timeout = 2, Cancelled = 3, Error = 4 };
constexpr std::size_t kAcquireOutcomes = 5;
const char* acquire_outcome_name(AcquireOutcome outcome);

// Upper bounds (seconds) of the acquire latency histogram's buckets; one more bucket
// counts everything above the last bound.
constexpr std::size_t kLatencyBounds = 14;
const std::array<double, kLatencyBounds>& latency_bounds();

struct Snapshot {
  std::array<std::uint64_t, kAcquireOutcomes> acquires{};
  // Per bucket (not cumulative): [i] counts latencies <= bounds[i] and > bounds[i-1];
  // [kLatencyBounds] those above the last bound. Every acquire call, whatever its outcome.
  std::array<std::uint64_t, kLatencyBounds + 1> acquire_latency_buckets{};
  std::uint64_t acquire_latency_count = 0;
  double acquire_latency_sum_s = 0;
  std::uint64_t renewals = 0;          // renewal calls (elector, lease, touch)
  std::uint64_t renewal_failures = 0;  // of which failed (error) or found the hold gone
  std::uint64_t leader_elected = 0;    // leadership gained (on_leader)
  std::uint64_t leader_lost = 0;       // leadership ended (on_leader_loss)
  std::uint64_t step_downs = 0;        // a leader stepped down before its lease expired
  std::uint64_t clock_samples = 0;
  double clock_offset_s = 0;       // server minus host, at the last sample
  double clock_uncertainty_s = 0;  // half the round trip of the last sample
  std::uint64_t round_trips = 0;   // commands sent to the server (SQLite: transactions)
};

Snapshot snapshot();

void record_acquire(AcquireOutcome outcome, double seconds);
void record_renewal(bool ok);
void record_leadership(bool gained);
void record_step_down();
void record_clock_sample(std::int64_t offset_ms, std::int64_t uncertainty_ms);
void record_round_trip();

}  // namespace mongoelector::metrics
