/*
 * mongoelector/metrics.h: process-wide metrics (mongoelector_stats_get).
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_METRICS_H
#define MONGOELECTOR_METRICS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Since 1.1: process-wide metrics of every locker, elector and lease of the library
 * (counters only grow; the clock gauges follow the last server-time sample). Set
 * out->version = MONGOELECTOR_STATS_VERSION; the fields of that version are written.
 * Lock-free, no I/O; any thread. */
#define MONGOELECTOR_STATS_VERSION 1
#define MONGOELECTOR_STATS_LATENCY_BUCKETS 15
typedef struct mongoelector_stats {
  uint32_t version; /* set by the caller */
  /* Acquire calls by outcome (argument errors are not counted). */
  uint64_t acquires_acquired;
  uint64_t acquires_held; /* non-blocking, the lock was held */
  uint64_t acquires_timeout;
  uint64_t acquires_cancelled;
  uint64_t acquires_error; /* the server failed */
  /* Latency of every acquire call: bucket i counts calls of at most bounds[i] seconds
   * (and more than bounds[i-1]); the last bucket those above the last bound. */
  double acquire_latency_bounds[MONGOELECTOR_STATS_LATENCY_BUCKETS - 1];
  uint64_t acquire_latency_buckets[MONGOELECTOR_STATS_LATENCY_BUCKETS];
  uint64_t acquire_latency_count;
  double acquire_latency_sum_seconds;
  uint64_t renewals;         /* renewals of held locks (electors, leases, touch) */
  uint64_t renewal_failures; /* of which failed, or found the hold gone */
  uint64_t leader_elected;
  uint64_t leader_lost;
  uint64_t step_downs; /* leaders that stepped down before their lease expired */
  uint64_t clock_samples;
  double clock_offset_seconds;      /* server minus host, at the last sample */
  double clock_uncertainty_seconds; /* half the round trip of the last sample */
  uint64_t round_trips;             /* commands sent to servers (SQLite: transactions) */
} mongoelector_stats;
MONGOELECTOR_API mongoelector_status mongoelector_stats_get(mongoelector_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_METRICS_H */
