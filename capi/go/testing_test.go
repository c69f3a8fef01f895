package mongoelector

// The testing kit (FakeClock, MemoryForceExpire, MemorySetUnavailable): leases, stolen
// locks and elections on memory:// backends driven by a fake clock. No server, no
// sleeps: every instant asserted is fake time.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// 2030-01-01T00:00:00Z
var fakeStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeWorld is a fake clock with a fresh memory:// backend attached and a client on it.
func fakeWorld(t *testing.T, opts ...FakeClockOption) (*FakeClock, string, *Client) {
	t.Helper()
	clock, err := NewFakeClock(fakeStart, opts...)
	if err != nil {
		t.Fatalf("NewFakeClock: %v", err)
	}
	t.Cleanup(func() { clock.Close() }) // last: after what was made on it
	uri, err := clock.MemoryURI("")
	if err != nil {
		t.Fatalf("MemoryURI: %v", err)
	}
	client, err := NewClient(uri, "")
	if err != nil {
		t.Fatalf("NewClient(%s): %v", uri, err)
	}
	t.Cleanup(func() { client.Close() })
	return clock, uri, client
}

func mustAdvance(t *testing.T, clock *FakeClock, d time.Duration) {
	t.Helper()
	if err := clock.Advance(d); err != nil {
		t.Fatalf("Advance(%v): %v", d, err)
	}
}

// heldLease is a lease on "job" (ttl) on a fresh fake world, and a second locker of the
// key: a peer, or a thief.
func heldLease(t *testing.T, ttl time.Duration) (*FakeClock, string, *Lease, *Locker) {
	t.Helper()
	clock, uri, client := fakeWorld(t)
	holder := newTestLocker(t, client, "job", ttl)
	other := newTestLocker(t, client, "job", ttl)
	lease, err := holder.Hold(bg)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	t.Cleanup(func() { lease.Close() })
	return clock, uri, lease, other
}

func TestFakeClockLeaseLivesAnHourThenIsLostExactlyAtItsDeadline(t *testing.T) {
	clock, uri, lease, peer := heldLease(t, 15*time.Second)
	before, err := Stats()
	if err != nil {
		t.Fatal(err)
	}
	mustAdvance(t, clock, time.Hour)
	if lease.Lost() || lease.Context().Err() != nil {
		t.Fatalf("lost within an hour of renewals: %v", context.Cause(lease.Context()))
	}
	after, err := Stats()
	if err != nil {
		t.Fatal(err)
	}
	if n := after.Renewals - before.Renewals; n < 719 || n > 721 {
		t.Fatalf("%d renewals in an hour, want 720 (every ttl/3 = 5 s)", n)
	}
	info, err := peer.Current(bg)
	if err != nil || info == nil {
		t.Fatalf("Current: %+v, %v", info, err)
	}
	if want := clock.Now().Add(15 * time.Second); !info.Expire.Equal(want) {
		t.Fatalf("expiry %v, want %v (renewed just now, a full ttl ahead)", info.Expire, want)
	}

	// Cut off: lost at lease end minus ttl/10, not a millisecond before.
	deadline := info.Expire.Add(-1500 * time.Millisecond)
	if err := MemorySetUnavailable(uri, true); err != nil {
		t.Fatal(err)
	}
	defer MemorySetUnavailable(uri, false)
	mustAdvance(t, clock, deadline.Sub(clock.Now())-time.Millisecond)
	if lease.Lost() || lease.Context().Err() != nil {
		t.Fatalf("lost 1 ms before its renew deadline")
	}
	mustAdvance(t, clock, time.Millisecond)
	if !lease.Lost() {
		t.Fatal("not lost at its renew deadline")
	}
	// The Context is cancelled inside Advance (the loss is reported on its goroutine).
	if cause := context.Cause(lease.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("lease context cause %v, want ErrLeaseLost", cause)
	}
	if !clock.Now().Equal(deadline) {
		t.Fatalf("clock at %v, want %v", clock.Now(), deadline)
	}
}

func TestFakeClockStolenLockIsLostAtTheNextRenewal(t *testing.T) {
	clock, _, lease, thief := heldLease(t, 9*time.Second)
	mustAdvance(t, clock, 6*time.Second) // two renewals: the schedule runs from the last
	fence, err := thief.TryAcquire(bg, WithForce())
	if err != nil || fence <= lease.Fence() {
		t.Fatalf("forced acquire: %d, %v", fence, err)
	}
	mustAdvance(t, clock, 2999*time.Millisecond)
	if lease.Lost() {
		t.Fatal("lost before its next renewal (every ttl/3 = 3 s)")
	}
	mustAdvance(t, clock, time.Millisecond)
	select {
	case <-lease.Done():
	default:
		t.Fatal("the renewal at 9 s did not find the lock taken")
	}
	if got := clock.Elapsed(); got != 9*time.Second {
		t.Fatalf("Elapsed %v", got)
	}
	if owned, err := thief.Owned(bg); err != nil || !owned {
		t.Fatalf("the thief lost the lock too: %v, %v", owned, err)
	}
}

func TestFakeClockElectionTakeoverAfterForceExpire(t *testing.T) {
	clock, uri, client := fakeWorld(t)
	const ttl = 10 * time.Second
	var aStopped atomic.Int32
	bStarted := make(chan struct{}, 4)
	a, err := NewElector(bg, client, "svc", &ElectorOptions{TTL: ttl,
		OnStoppedLeading: func() { aStopped.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewElector(bg, client, "svc", &ElectorOptions{TTL: ttl,
		OnStartedLeading: func(context.Context) { bStarted <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	leads := func(e *Elector) bool {
		t.Helper()
		v, err := e.IsLeader()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := clock.Settle(); err != nil {
		t.Fatal(err)
	}
	if !leads(a) || clock.Elapsed() != 0 {
		t.Fatalf("the first elector does not lead once settled (at %v)", clock.Elapsed())
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	mustAdvance(t, clock, 10*time.Minute)
	if !leads(a) || leads(b) {
		t.Fatal("leadership moved without a reason")
	}
	fa, _ := a.Fence()

	held, err := MemoryForceExpire(uri, "elector.locks", "svc")
	if err != nil || !held {
		t.Fatalf("MemoryForceExpire: %v, %v", held, err)
	}
	if !leads(a) {
		t.Fatal("the leader was told: force_expire happens behind its back")
	}
	t0 := clock.Elapsed()
	var bAt, aOffAt time.Duration
	for step := 0; step < 50 && (bAt == 0 || aOffAt == 0); step++ {
		mustAdvance(t, clock, 100*time.Millisecond)
		if bAt == 0 && leads(b) {
			bAt = clock.Elapsed() - t0
		}
		if aOffAt == 0 && !leads(a) {
			aOffAt = clock.Elapsed() - t0
		}
	}
	t.Logf("after force_expire: follower leads at +%v, leader stepped down at +%v (ttl %v)", bAt, aOffAt, ttl)
	if bAt == 0 || aOffAt == 0 {
		t.Fatalf("no takeover within ttl/2: follower at %v, leader off at %v", bAt, aOffAt)
	}
	if n := aStopped.Load(); n != 1 {
		t.Fatalf("OnStoppedLeading ran %d times", n)
	}
	if fb, _ := b.Fence(); fb <= fa {
		t.Fatalf("new leader's token %d not above %d", fb, fa)
	}
	mustAdvance(t, clock, time.Minute)
	if !leads(b) || leads(a) {
		t.Fatal("leadership did not stay with the new leader")
	}
	// OnStartedLeading runs on its own goroutine, which Advance does not wait for.
	select {
	case <-bStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("OnStartedLeading of the new leader did not run")
	}
	if n := len(bStarted); n != 0 {
		t.Fatalf("OnStartedLeading ran %d more times", n)
	}
}

func TestFakeClockBlockedCallbackIsReportedNotHung(t *testing.T) {
	clock, _, client := fakeWorld(t, WithSettleTimeout(200*time.Millisecond))
	release := make(chan struct{})
	e, err := NewElector(bg, client, "svc", &ElectorOptions{TTL: 10 * time.Second,
		OnLoop: func() { <-release }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	err = clock.Settle()
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "did not become idle within 200 ms") {
		t.Fatalf("Settle with a blocked callback: %v", err)
	}
	close(release)
	if err := clock.Settle(); err != nil {
		t.Fatalf("Settle once the callback returned: %v", err)
	}
	if ok, _ := e.IsLeader(); !ok {
		t.Fatal("not leader")
	}
}

func TestFakeClockArguments(t *testing.T) {
	clock, err := NewFakeClock(fakeStart)
	if err != nil {
		t.Fatal(err)
	}
	defer clock.Close()
	if !clock.Now().Equal(fakeStart) || clock.Elapsed() != 0 {
		t.Fatalf("start: %v, %v", clock.Now(), clock.Elapsed())
	}
	if clock.Now().Location() != time.UTC {
		t.Fatalf("Now in %v, want the start's location", clock.Now().Location())
	}
	mustAdvance(t, clock, 1500*time.Millisecond)
	if !clock.Now().Equal(fakeStart.Add(1500*time.Millisecond)) || clock.Elapsed() != 1500*time.Millisecond {
		t.Fatalf("after 1.5 s: %v, %v", clock.Now(), clock.Elapsed())
	}
	if err := clock.Advance(-time.Millisecond); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Advance(-1ms): %v", err)
	}
	if err := clock.JumpWall(-time.Minute); err != nil {
		t.Fatal(err)
	}
	if !clock.Now().Equal(fakeStart.Add(1500*time.Millisecond-time.Minute)) || clock.Elapsed() != 1500*time.Millisecond {
		t.Fatalf("after JumpWall: %v, %v", clock.Now(), clock.Elapsed())
	}
	if err := clock.JumpWall(-100 * 365 * 24 * time.Hour); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("JumpWall before 1970: %v", err)
	}
	if _, err := NewFakeClock(time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("start before 1970: %v", err)
	}
	if _, err := NewFakeClock(fakeStart, WithSettleTimeout(-time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative settle timeout: %v", err)
	}
	now, err := NewFakeClock(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now.Now()); d < 0 || d > time.Minute {
		t.Fatalf("the zero start is not now: %v", now.Now())
	}
	now.Close()

	// Names: fresh ones differ; one name may be attached to its clock again, not to
	// another clock, nor once a client opened it on the system clock.
	u1, err := clock.MemoryURI("")
	if err != nil {
		t.Fatal(err)
	}
	u2, _ := clock.MemoryURI("")
	if u1 == u2 || !strings.HasPrefix(u1, "memory://") {
		t.Fatalf("fresh names %q, %q", u1, u2)
	}
	if again, err := clock.MemoryURI(strings.TrimPrefix(u1, "memory://")); err != nil || again != u1 {
		t.Fatalf("attach again: %q, %v", again, err)
	}
	other, err := NewFakeClock(fakeStart)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.MemoryURI(strings.TrimPrefix(u1, "memory://")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("attach to another clock: %v", err)
	}
	sys := uniqueKey(t)
	c, err := NewClient("memory://"+sys, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := clock.MemoryURI(sys); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "another clock") {
		t.Fatalf("attach of a name already open on the system clock: %v", err)
	}
	if _, err := clock.MemoryURI("bad\x00name"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NUL in a name: %v", err)
	}

	// The levers.
	if _, err := MemoryForceExpire("mongodb://127.0.0.1:1/", "", "k"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("force expire on a server URI: %v", err)
	}
	if _, err := MemoryForceExpire(u1, "", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("force expire of an empty key: %v", err)
	}
	if held, err := MemoryForceExpire(u1, "", "nothing"); err != nil || held {
		t.Fatalf("force expire of a free key: %v, %v", held, err)
	}
	if err := MemorySetUnavailable("memory://"+uniqueKey(t)+"-unused", true); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unavailable on an unused name: %v", err)
	}
	if err := MemorySetUnavailable(u1, true); err != nil {
		t.Fatal(err)
	}
	if err := MemorySetUnavailable(u1, false); err != nil {
		t.Fatal(err)
	}

	// Closed: idempotent; calls fail with StatusClosed, reads give zeros.
	clock.Close()
	clock.Close()
	if err := clock.Advance(time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Advance after Close: %v", err)
	}
	if !clock.Now().IsZero() || clock.Elapsed() != 0 {
		t.Fatalf("after Close: %v, %v", clock.Now(), clock.Elapsed())
	}
}

func TestFakeClockBlockingAcquireTimesOutInFakeTime(t *testing.T) {
	clock, _, client := fakeWorld(t)
	holder := newTestLocker(t, client, "job", 20*time.Second)
	other := newTestLocker(t, client, "job", 20*time.Second)
	if _, err := holder.Acquire(bg); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	idle, err := clock.WaitForWaiters(0, 0)
	if err != nil {
		t.Fatalf("WaitForWaiters(0): %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := other.Acquire(bg, WithTimeout(5*time.Second))
		done <- err
	}()
	if _, err := clock.WaitForWaiters(idle+1, 30*time.Second); err != nil {
		t.Fatalf("the acquire never waited on the clock: %v", err)
	}
	mustAdvance(t, clock, 4999*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("acquire returned before its fake deadline: %v", err)
	default:
	}
	mustAdvance(t, clock, time.Millisecond)
	if err := <-done; !errors.Is(err, ErrTimeout) {
		t.Fatalf("acquire: %v, want ErrTimeout", err)
	}
	if _, err := clock.WaitForWaiters(idle+50, 10*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitForWaiters(too many): %v, want ErrTimeout", err)
	}
}
