package mongoelector

/*
#include "mongoelector.h"
*/
import "C"

import (
	"math"
	"time"
)

// StatsSnapshot is what Stats returns: the metrics of every Locker, Elector and Lease
// of the process (all clients; the C library keeps them, so other bindings loaded in
// the same process count too). Counters only grow: subtract two snapshots for a rate
// or a delta. The clock gauges follow the last server-time sample.
type StatsSnapshot struct {
	// Acquire calls of lockers (Acquire, TryAcquire, Hold, TryHold) by outcome; calls
	// refused for a bad argument are not counted.
	Acquires AcquireCounts
	// The latency of every counted acquire call, whatever its outcome.
	AcquireLatency LatencyHistogram
	// Renewals of held locks (electors, keep-alive leases, Touch).
	Renewals uint64
	// Of Renewals, those that failed or found the hold gone.
	RenewalFailures uint64
	// Times a node of this process became leader / stopped leading.
	LeaderElected uint64
	LeaderLost    uint64
	// Leaders that stepped down before their lease expired (renew deadline, clock jump).
	StepDowns uint64
	// Server-time samples taken.
	ClockSamples uint64
	// Server clock minus this host's at the last sample (signed; 0 before the first).
	ClockOffset time.Duration
	// How far off ClockOffset may be: half the round trip of the last sample.
	ClockUncertainty time.Duration
	// Commands sent to servers (SQLite: transactions).
	RoundTrips uint64
}

// AcquireCounts counts acquire calls by outcome.
type AcquireCounts struct {
	Acquired  uint64 // the lock was taken
	Held      uint64 // non-blocking, the lock was held by another (ErrLockExists)
	Timeout   uint64 // the wait's timeout passed (ErrTimeout)
	Cancelled uint64 // cancelled, e.g. by the call's context (ErrCancelled)
	Error     uint64 // the server failed or could not be reached
}

// Total is the number of counted acquire calls.
func (a AcquireCounts) Total() uint64 {
	return a.Acquired + a.Held + a.Timeout + a.Cancelled + a.Error
}

// LatencyHistogram is a histogram with fixed buckets: Buckets[i] counts the calls that
// took more than Bounds[i-1] and at most Bounds[i]; the last bucket
// (len(Buckets) == len(Bounds)+1) those above the last bound. The buckets are not
// cumulative: Cumulative gives Prometheus' "le" counts.
type LatencyHistogram struct {
	Bounds  []time.Duration // upper bounds of the buckets, increasing
	Buckets []uint64        // calls per bucket
	Count   uint64          // calls in all buckets
	Sum     time.Duration   // their total time
}

// Cumulative returns, per bucket, the calls that took at most its upper bound
// (Bounds[i]; the last entry is +Inf, i.e. every call).
func (h LatencyHistogram) Cumulative() []uint64 {
	out := make([]uint64, len(h.Buckets))
	var total uint64
	for i, n := range h.Buckets {
		total += n
		out[i] = total
	}
	return out
}

// Stats returns the library's metrics now: process-wide, no I/O, cheap enough for
// every scrape of a metrics endpoint. Safe from any goroutine.
func Stats() (StatsSnapshot, error) {
	var out C.mongoelector_stats
	out.version = C.MONGOELECTOR_STATS_VERSION
	if err := call(func() C.mongoelector_status { return C.mongoelector_stats_get(&out) }); err != nil {
		return StatsSnapshot{}, err
	}
	return statsFromC(&out), nil
}

func statsFromC(s *C.mongoelector_stats) StatsSnapshot {
	h := LatencyHistogram{
		Bounds:  make([]time.Duration, len(s.acquire_latency_bounds)),
		Buckets: make([]uint64, len(s.acquire_latency_buckets)),
		Count:   uint64(s.acquire_latency_count),
		Sum:     statSeconds(s.acquire_latency_sum_seconds),
	}
	for i, b := range s.acquire_latency_bounds {
		h.Bounds[i] = statSeconds(b)
	}
	for i, n := range s.acquire_latency_buckets {
		h.Buckets[i] = uint64(n)
	}
	return StatsSnapshot{
		Acquires: AcquireCounts{
			Acquired:  uint64(s.acquires_acquired),
			Held:      uint64(s.acquires_held),
			Timeout:   uint64(s.acquires_timeout),
			Cancelled: uint64(s.acquires_cancelled),
			Error:     uint64(s.acquires_error),
		},
		AcquireLatency:   h,
		Renewals:         uint64(s.renewals),
		RenewalFailures:  uint64(s.renewal_failures),
		LeaderElected:    uint64(s.leader_elected),
		LeaderLost:       uint64(s.leader_lost),
		StepDowns:        uint64(s.step_downs),
		ClockSamples:     uint64(s.clock_samples),
		ClockOffset:      statSeconds(s.clock_offset_seconds),
		ClockUncertainty: statSeconds(s.clock_uncertainty_seconds),
		RoundTrips:       uint64(s.round_trips),
	}
}

// statSeconds converts seconds to a Duration rounded to the nanosecond (0.0025 s is
// 2.5ms exactly, not 1ns less); a non-finite value, never written by the library,
// reads as 0.
func statSeconds(s C.double) time.Duration {
	f := float64(s)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	ns := math.Round(f * float64(time.Second))
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	if ns <= math.MinInt64 {
		return math.MinInt64
	}
	return time.Duration(ns)
}
