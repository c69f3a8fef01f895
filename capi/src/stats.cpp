// mongoelector_stats_get: core/metrics.h's snapshot in the caller's versioned struct.
#include <algorithm>

#include "guard.h"
#include "metrics.h"

namespace me = mongoelector;

static_assert(me::metrics::kLatencyBounds + 1 == MONGOELECTOR_STATS_LATENCY_BUCKETS,
              "mongoelector_stats's latency buckets differ from core/metrics.h");

extern "C" {

MONGOELECTOR_API mongoelector_status mongoelector_stats_get(mongoelector_stats* out) {
  return me::capi::guard([&] {
    me::capi::require(out != nullptr, "out is NULL");
    me::capi::require(out->version >= 1,
                      "out->version is not set: set it to MONGOELECTOR_STATS_VERSION");
    const me::metrics::Snapshot s = me::metrics::snapshot();
    using O = me::metrics::AcquireOutcome;
    const auto n = [&s](O o) { return s.acquires[static_cast<std::size_t>(o)]; };
    // Version 1 fields (later versions only append).
    out->acquires_acquired = n(O::Acquired);
    out->acquires_held = n(O::Held);
    out->acquires_timeout = n(O::Timeout);
    out->acquires_cancelled = n(O::Cancelled);
    out->acquires_error = n(O::Error);
    const auto& bounds = me::metrics::latency_bounds();
    std::copy(bounds.begin(), bounds.end(), out->acquire_latency_bounds);
    std::copy(s.acquire_latency_buckets.begin(), s.acquire_latency_buckets.end(),
              out->acquire_latency_buckets);
    out->acquire_latency_count = s.acquire_latency_count;
    out->acquire_latency_sum_seconds = s.acquire_latency_sum_s;
    out->renewals = s.renewals;
    out->renewal_failures = s.renewal_failures;
    out->leader_elected = s.leader_elected;
    out->leader_lost = s.leader_lost;
    out->step_downs = s.step_downs;
    out->clock_samples = s.clock_samples;
    out->clock_offset_seconds = s.clock_offset_s;
    out->clock_uncertainty_seconds = s.clock_uncertainty_s;
    out->round_trips = s.round_trips;
  });
}

}  // extern "C"
