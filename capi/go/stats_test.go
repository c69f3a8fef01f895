package mongoelector

import (
	"context"
	"errors"
	"testing"
	"time"
)

func mustStats(t *testing.T) StatsSnapshot {
	t.Helper()
	s, err := Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}

// atLeast sums the per-bucket growth from a to b of the buckets whose upper bound is at
// least d (the last bucket, unbounded, included).
func atLeast(a, b StatsSnapshot, d time.Duration) uint64 {
	var n uint64
	for i := range b.AcquireLatency.Buckets {
		if i == len(b.AcquireLatency.Bounds) || b.AcquireLatency.Bounds[i] >= d {
			n += b.AcquireLatency.Buckets[i] - a.AcquireLatency.Buckets[i]
		}
	}
	return n
}

// The snapshot's shape, without a server: 14 increasing bounds read exactly, one
// bucket more, counters that never go back.
func TestStatsSnapshotIsConsistent(t *testing.T) {
	a := mustStats(t)
	h := a.AcquireLatency
	if len(h.Bounds) != 14 || len(h.Buckets) != len(h.Bounds)+1 {
		t.Fatalf("%d bounds, %d buckets", len(h.Bounds), len(h.Buckets))
	}
	if h.Bounds[0] != time.Millisecond || h.Bounds[1] != 2500*time.Microsecond {
		t.Fatalf("bounds %v: not rounded to the nanosecond", h.Bounds[:2])
	}
	for i := 1; i < len(h.Bounds); i++ {
		if h.Bounds[i] <= h.Bounds[i-1] {
			t.Fatalf("bounds not increasing: %v", h.Bounds)
		}
	}
	cum := h.Cumulative()
	if len(cum) != len(h.Buckets) || cum[0] != h.Buckets[0] {
		t.Fatalf("cumulative %v of %v", cum, h.Buckets)
	}
	for i := 1; i < len(cum); i++ {
		if cum[i] < cum[i-1] {
			t.Fatalf("cumulative %v decreases", cum)
		}
	}
	if a.ClockUncertainty < 0 {
		t.Fatalf("clock uncertainty %v", a.ClockUncertainty)
	}
	b := mustStats(t)
	if b.Acquires.Total() < a.Acquires.Total() || b.AcquireLatency.Count < a.AcquireLatency.Count ||
		b.RoundTrips < a.RoundTrips || b.Renewals < a.Renewals || b.ClockSamples < a.ClockSamples {
		t.Fatalf("counters went back: %+v then %+v", a, b)
	}
}

// Every acquire outcome is counted, with its latency. Other tests may run acquires at
// the same time: deltas are compared with >=.
func TestStatsCountAcquireOutcomes(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	holder := newTestLocker(t, c, key, 30*time.Second)
	other := newTestLocker(t, c, key, 30*time.Second)

	s0 := mustStats(t)
	if _, err := holder.Acquire(bg, WithTimeout(10*time.Second)); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	s1 := mustStats(t)
	if d := s1.Acquires.Acquired - s0.Acquires.Acquired; d < 1 {
		t.Fatalf("acquired grew by %d after an Acquire", d)
	}
	if s1.RoundTrips <= s0.RoundTrips {
		t.Fatalf("round trips %d -> %d across an Acquire", s0.RoundTrips, s1.RoundTrips)
	}
	if s1.ClockSamples < 1 {
		t.Fatal("no clock sample after an Acquire against a server")
	}

	if _, err := other.TryAcquire(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("TryAcquire of a held lock: %v, want ErrLockExists", err)
	}
	s2 := mustStats(t)
	if d := s2.Acquires.Held - s1.Acquires.Held; d < 1 {
		t.Fatalf("held grew by %d after a refused TryAcquire", d)
	}

	const timeout = 600 * time.Millisecond
	if _, err := other.Acquire(bg, WithTimeout(timeout), WithStep(50*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Acquire of a held lock with a timeout: %v, want ErrTimeout", err)
	}
	s3 := mustStats(t)
	if d := s3.Acquires.Timeout - s2.Acquires.Timeout; d < 1 {
		t.Fatalf("timeout grew by %d after a timed-out Acquire", d)
	}
	if n := atLeast(s2, s3, timeout/2); n < 1 {
		t.Fatalf("no call in a latency bucket of %v or more after a %v timeout: bounds %v, buckets %v -> %v",
			timeout/2, timeout, s3.AcquireLatency.Bounds, s2.AcquireLatency.Buckets, s3.AcquireLatency.Buckets)
	}
	if d := s3.AcquireLatency.Sum - s2.AcquireLatency.Sum; d < timeout/2 {
		t.Fatalf("latency sum grew by %v across a %v timeout", d, timeout)
	}
	if d := s3.AcquireLatency.Count - s0.AcquireLatency.Count; d < 3 {
		t.Fatalf("latency count grew by %d across three acquire calls", d)
	}
	if d := s3.Acquires.Total() - s0.Acquires.Total(); d < 3 {
		t.Fatalf("acquire calls grew by %d across three", d)
	}

	// A wait ended by its context is counted as cancelled once the C call returns.
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := other.Acquire(ctx, WithTimeout(30*time.Second), WithStep(50*time.Millisecond)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	waitFor(t, "the cancelled Acquire to be counted", 10*time.Second, func() bool {
		return mustStats(t).Acquires.Cancelled > s3.Acquires.Cancelled
	})

	if err := holder.Release(bg); err != nil {
		t.Fatal(err)
	}
}
