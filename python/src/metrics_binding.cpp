// _native.metrics_snapshot(): core/metrics.h as a dict (python/mongoelector/metrics.py
// turns it into the public Stats and the Prometheus / OpenTelemetry adapters).
#include "metrics_binding.h"

#include <pybind11/stl.h>

#include <string>

#include "metrics.h"

namespace mongoelector_py {

namespace me = mongoelector;

void bind_metrics(py::module_& m) {
  m.def(
      "metrics_snapshot",
      [] {
        const me::metrics::Snapshot s = me::metrics::snapshot();
        py::dict acquires;
        for (std::size_t i = 0; i < me::metrics::kAcquireOutcomes; ++i) {
          acquires[me::metrics::acquire_outcome_name(static_cast<me::metrics::AcquireOutcome>(i))] =
              s.acquires[i];
        }
        py::list bounds;
        for (double b : me::metrics::latency_bounds()) bounds.append(b);
        py::list buckets;
        for (auto n : s.acquire_latency_buckets) buckets.append(n);
        py::dict d;
        d["acquires"] = acquires;
        d["acquire_latency_bounds"] = bounds;
        d["acquire_latency_buckets"] = buckets;
        d["acquire_latency_count"] = s.acquire_latency_count;
        d["acquire_latency_sum"] = s.acquire_latency_sum_s;
        d["renewals"] = s.renewals;
        d["renewal_failures"] = s.renewal_failures;
        d["leader_elected"] = s.leader_elected;
        d["leader_lost"] = s.leader_lost;
        d["step_downs"] = s.step_downs;
        d["clock_samples"] = s.clock_samples;
        d["clock_offset"] = s.clock_offset_s;
        d["clock_uncertainty"] = s.clock_uncertainty_s;
        d["round_trips"] = s.round_trips;
        return d;
      },
      "The process-wide counters of the native core (one consistent-enough snapshot).");
  // The drop-in's acquire loop runs in Python (the original's retry rule, Ctrl-C between
  // attempts): it reports its outcome here, as the core's Locker::acquire does itself.
  m.def(
      "metrics_record_acquire",
      [](const std::string& outcome, double seconds) {
        for (std::size_t i = 0; i < me::metrics::kAcquireOutcomes; ++i) {
          const auto o = static_cast<me::metrics::AcquireOutcome>(i);
          if (outcome == me::metrics::acquire_outcome_name(o)) {
            me::metrics::record_acquire(o, seconds);
            return;
          }
        }
        throw py::value_error("unknown acquire outcome: " + outcome);
      },
      py::arg("outcome"), py::arg("seconds"));
}

}  // namespace mongoelector_py
