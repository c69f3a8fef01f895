package mongoelector

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func newTestElector(t *testing.T, c *Client, key string, opts *ElectorOptions) *Elector {
	t.Helper()
	e, err := NewElector(bg, c, key, opts)
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recvWithin reads one value of ch within timeout (what names it in a failure).
func recvWithin[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("channel of %ss closed", what)
		}
		return v
	case <-time.After(timeout):
		t.Fatalf("no %s within %v", what, timeout)
	}
	var zero T
	return zero
}

// nextChange reads one LeaderChange within timeout.
func nextChange(t *testing.T, ch <-chan LeaderChange, timeout time.Duration) LeaderChange {
	t.Helper()
	return recvWithin(t, ch, timeout, "leadership change")
}

func TestElectorPollCallbacksAndStatus(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	var loss, loops atomic.Int32
	started := make(chan context.Context, 10)
	a := newTestElector(t, c, key, &ElectorOptions{
		TTL: 4 * time.Second, AppVersion: "go-test",
		OnStartedLeading: func(ctx context.Context) { started <- ctx },
		OnStoppedLeading: func() { loss.Add(1) },
		OnLoop:           func() { loops.Add(1) },
	})
	b := newTestElector(t, c, key, &ElectorOptions{TTL: 4 * time.Second})

	if err := a.Poll(bg); err != nil {
		t.Fatal(err)
	}
	if loops.Load() != 1 {
		t.Fatalf("after the first poll: on_loop %d", loops.Load())
	}
	var term context.Context
	select {
	case term = <-started:
	case <-time.After(2 * time.Second):
		t.Fatal("OnStartedLeading not called after winning a poll")
	}
	if is, _ := a.IsLeader(); !is {
		t.Fatal("a is not leader after winning a poll")
	}
	fence, _ := a.Fence()
	if fence <= 0 {
		t.Fatalf("leader Fence() = %d", fence)
	}
	if w, _ := a.PollWait(); w != 2*time.Second {
		t.Fatalf("leader PollWait() = %v, want ttl/2", w)
	}
	if err := b.Poll(bg); err != nil {
		t.Fatal(err)
	}
	if is, _ := b.IsLeader(); is {
		t.Fatal("two leaders")
	}
	if ex, _ := b.LeaderExists(); !ex {
		t.Fatal("b does not see a's leadership")
	}
	if w, _ := b.PollWait(); w != 4*time.Second {
		t.Fatalf("follower PollWait() = %v, want ttl", w)
	}
	if f, _ := b.Fence(); f != 0 {
		t.Fatalf("follower Fence() = %d", f)
	}

	// Typed status: dates as time.Time, integers as int64.
	st, err := a.NodeStatus(bg)
	if err != nil {
		t.Fatal(err)
	}
	uuid, _ := a.UUID()
	now := time.Now()
	if !st.IsLeader || !st.LockOwned || st.UUID != uuid || st.AppVersion != "go-test" || st.Key != key ||
		st.TTL != 4*time.Second || st.PID <= 0 || st.Host == "" || st.ElectorRunning {
		t.Fatalf("NodeStatus() = %+v", st)
	}
	for name, ts := range map[string]time.Time{"timestamp": st.Timestamp, "lock_created": st.LockCreated,
		"last_poll": st.LastPoll} {
		if d := now.Sub(ts); d < -5*time.Second || d > 10*time.Second {
			t.Errorf("NodeStatus %s = %v, not about now (%v)", name, ts, now)
		}
	}
	if !st.LockExpires.After(st.LockCreated) {
		t.Errorf("lock_expires %v not after lock_created %v", st.LockExpires, st.LockCreated)
	}
	bst, err := b.NodeStatus(bg)
	if err != nil || bst.IsLeader || bst.LockOwned || !bst.LockCreated.IsZero() || bst.AppVersion != "" {
		t.Fatalf("follower NodeStatus() = %+v, %v", bst, err)
	}
	detail, err := b.ClusterDetail(bg)
	if err != nil {
		t.Fatal(err)
	}
	if detail.Leader == nil || detail.Leader.UUID != uuid || detail.Leader.PID <= 0 || detail.Leader.Host == "" {
		t.Fatalf("ClusterDetail() leader = %+v, want uuid %s", detail.Leader, uuid)
	}
	if len(detail.Members) < 2 || detail.Timestamp.IsZero() {
		t.Fatalf("ClusterDetail() = %+v", detail)
	}
	var sawA bool
	for _, m := range detail.Members {
		if m.UUID == uuid {
			sawA = m.IsLeader && m.AppVersion == "go-test" && m.TTL == 4*time.Second && !m.Timestamp.IsZero()
		}
	}
	if !sawA {
		t.Fatalf("ClusterDetail() members %+v: a's status missing or wrong", detail.Members)
	}

	if err := a.Release(bg); err != nil {
		t.Fatal(err)
	}
	if loss.Load() != 1 {
		t.Fatalf("OnStoppedLeading ran %d times after Release", loss.Load())
	}
	if term.Err() == nil {
		t.Fatal("the term's context is not cancelled after Release")
	}
	if is, _ := a.IsLeader(); is {
		t.Fatal("leader after Release")
	}
	if err := b.Poll(bg); err != nil {
		t.Fatal(err)
	}
	if is, _ := b.IsLeader(); !is {
		t.Fatal("b did not take the released leadership")
	}
	if f, _ := b.Fence(); f <= fence {
		t.Fatalf("new leader's token %d not above %d", f, fence)
	}
}

// The library's defaults, read from the C config inits (not restated in Go).
func TestDefaultsComeFromTheLibrary(t *testing.T) {
	lo, eo := DefaultLockerOptions(), DefaultElectorOptions()
	if lo.DeleteOnRelease == nil || *lo.DeleteOnRelease {
		t.Errorf("locker DeleteOnRelease default = %v, want false", lo.DeleteOnRelease)
	}
	if eo.DeleteOnRelease == nil || !*eo.DeleteOnRelease {
		t.Errorf("elector DeleteOnRelease default = %v, want true", eo.DeleteOnRelease)
	}
	if lo.TTL != 600*time.Second || eo.TTL != 15*time.Second || lo.MaxOffset != 500*time.Millisecond ||
		lo.DisableTimeParanoid || lo.Collection != "mongolocker" || lo.OpTimeout != 0 || eo.DisableStatusReport {
		t.Errorf("defaults: locker %+v, elector %+v", lo, eo)
	}
	c, err := NewClient("mongodb://127.0.0.1:1/", "db")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// OpTimeout is checked by the library: at most TTL/2.
	if _, err := NewLocker(bg, c, "k", &LockerOptions{TTL: time.Second, OpTimeout: time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("OpTimeout above TTL/2: %v", err)
	}
	if _, err := NewElector(bg, c, "k", &ElectorOptions{TTL: time.Second, OpTimeout: -time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative elector OpTimeout: %v", err)
	}
}

func TestElectorStartStopAndClose(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	started := make(chan struct{}, 1)
	var loss atomic.Int32
	e := newTestElector(t, c, key, &ElectorOptions{
		TTL:              2 * time.Second,
		OnStartedLeading: func(context.Context) { started <- struct{}{} },
		OnStoppedLeading: func() { loss.Add(1) },
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatalf("second Start is a no-op: %v", err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("sole elector did not become leader")
	}
	if r, _ := e.Running(); !r {
		t.Fatal("not running after Start")
	}
	if err := e.Stop(bg); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Running(); r {
		t.Fatal("running after Stop")
	}
	if loss.Load() != 1 {
		t.Fatalf("OnStoppedLeading ran %d times on Stop", loss.Load())
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("restarted elector did not lead again")
	}
	e.Close()
	if loss.Load() != 2 {
		t.Fatalf("Close of a leader ran OnStoppedLeading %d times in total, want 2", loss.Load())
	}
	e.Close()
	for name, fn := range map[string]func() error{
		"Start":         e.Start,
		"Stop":          func() error { return e.Stop(bg) },
		"Poll":          func() error { return e.Poll(bg) },
		"Release":       func() error { return e.Release(bg) },
		"Resign":        func() error { return e.Resign(bg) },
		"Campaign":      func() error { return e.Campaign(bg) },
		"IsLeader":      func() error { _, err := e.IsLeader(); return err },
		"LeaderExists":  func() error { _, err := e.LeaderExists(); return err },
		"Running":       func() error { _, err := e.Running(); return err },
		"PollWait":      func() error { _, err := e.PollWait(); return err },
		"Fence":         func() error { _, err := e.Fence(); return err },
		"UUID":          func() error { _, err := e.UUID(); return err },
		"NodeStatus":    func() error { _, err := e.NodeStatus(bg); return err },
		"ClusterDetail": func() error { _, err := e.ClusterDetail(bg); return err },
	} {
		if err := fn(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed elector: %v", name, err)
		}
	}
	if _, ok := <-e.Observe(bg); ok {
		t.Error("Observe of a closed elector gives a change instead of a closed channel")
	}
}

// C forbids freeing an elector from its own callback; Close from one must still work.
func TestElectorCloseFromCallback(t *testing.T) {
	c := newTestClient(t)
	var e *Elector
	closed := make(chan error, 1)
	var err error
	e, err = NewElector(bg, c, uniqueKey(t), &ElectorOptions{
		TTL: 2 * time.Second,
		OnLoop: func() {
			if is, _ := e.IsLeader(); !is {
				return
			}
			closed <- e.Close()
			if _, err := e.IsLeader(); !errors.Is(err, ErrClosed) {
				t.Errorf("IsLeader from the callback after Close: %v", err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("never led")
	}
	waitFor(t, "the elector to be freed", 5*time.Second, func() bool {
		e.g.mu.Lock()
		defer e.g.mu.Unlock()
		return e.ptr == nil
	})
}

// Release and Stop from inside a callback run on the callback's thread (the library
// must see its own callback: stop must not join the thread it runs on).
func TestElectorStopFromCallback(t *testing.T) {
	c := newTestClient(t)
	var e *Elector
	stopped := make(chan error, 1)
	var err error
	e, err = NewElector(bg, c, uniqueKey(t), &ElectorOptions{
		TTL: 2 * time.Second,
		OnLoop: func() {
			if is, _ := e.IsLeader(); is {
				ctx, cancel := context.WithTimeout(bg, 5*time.Second)
				defer cancel()
				if err := e.Release(ctx); err != nil {
					stopped <- err
					return
				}
				stopped <- e.Stop(ctx)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop from a callback did not return")
	}
	waitFor(t, "the loop to end", 5*time.Second, func() bool {
		r, _ := e.Running()
		return !r
	})
}

// Campaign blocks until this node leads, Resign gives leadership up (another node then
// takes over), Observe reports each transition, and OnStartedLeading's context ends
// with the leadership: at Resign, and when the lock is taken from under a leader.
func TestCampaignResignObserve(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	const ttl = 2 * time.Second
	terms := make(chan context.Context, 10)
	var stopped atomic.Int32
	a := newTestElector(t, c, key, &ElectorOptions{
		TTL:              ttl,
		OnStartedLeading: func(ctx context.Context) { terms <- ctx },
		OnStoppedLeading: func() { stopped.Add(1) },
	})
	b := newTestElector(t, c, key, &ElectorOptions{TTL: ttl})
	auuid, _ := a.UUID()

	octx, ocancel := context.WithCancel(bg)
	changes := a.Observe(octx)
	if ch := nextChange(t, changes, time.Second); ch.Leading || ch.Fence != 0 {
		t.Fatalf("first change (the current state) = %+v, want not leading", ch)
	}

	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := a.Campaign(ctx); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if is, _ := a.IsLeader(); !is {
		t.Fatal("Campaign returned but a does not lead")
	}
	fence, _ := a.Fence()
	if ch := nextChange(t, changes, time.Second); !ch.Leading || ch.Fence != fence || ch.Leader != auuid {
		t.Fatalf("change after winning = %+v, want leading with fence %d, leader %s", ch, fence, auuid)
	}
	var term context.Context
	select {
	case term = <-terms:
	case <-time.After(2 * time.Second):
		t.Fatal("OnStartedLeading not called")
	}
	if err := a.Campaign(ctx); err != nil {
		t.Fatalf("Campaign of the leader: %v", err)
	}

	// b cannot win while a leads.
	short, cancelShort := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	if err := b.Campaign(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign while another leads: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Campaign with a 300 ms deadline returned after %v", el)
	}

	// Resign: a's term ends at once, b (a candidate since its Campaign) takes over.
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if term.Err() == nil || stopped.Load() != 1 {
		t.Fatalf("after Resign: term ctx err %v, OnStoppedLeading ran %d times", term.Err(), stopped.Load())
	}
	if r, _ := a.Running(); r {
		t.Fatal("a still campaigns after Resign")
	}
	if ch := nextChange(t, changes, time.Second); ch.Leading || ch.Fence != 0 {
		t.Fatalf("change after Resign = %+v", ch)
	}
	if err := b.Campaign(ctx); err != nil {
		t.Fatalf("b's Campaign after a resigned: %v", err)
	}
	bfence, _ := b.Fence()
	if bfence <= fence {
		t.Fatalf("b's token %d not above a's %d", bfence, fence)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	// a leads again; the lock is then taken from under it: the term's context ends.
	if err := a.Campaign(ctx); err != nil {
		t.Fatalf("Campaign again: %v", err)
	}
	nextChange(t, changes, time.Second)
	select {
	case term = <-terms:
	case <-time.After(2 * time.Second):
		t.Fatal("OnStartedLeading not called for the second term")
	}
	thief, err := NewLocker(bg, c, key, &LockerOptions{Collection: "elector.locks", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Close()
	if _, err := thief.TryAcquire(bg, WithForce()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.Done():
	case <-time.After(3 * ttl):
		t.Fatal("OnStartedLeading's context not cancelled after the lock was taken")
	}
	if ch := nextChange(t, changes, time.Second); ch.Leading {
		t.Fatalf("change after the takeover = %+v", ch)
	}
	// OnStoppedLeading runs after the term's context was cancelled and the change queued.
	waitFor(t, "OnStoppedLeading for the second term", time.Second, func() bool { return stopped.Load() == 2 })
	if err := thief.Release(bg); err != nil {
		t.Fatal(err)
	}

	// The channel closes when its context ends.
	ocancel()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Observe channel not closed after its context ended")
		}
	}
}

// Run takes part until its context ends, then stops and releases leadership.
func TestElectorRun(t *testing.T) {
	c := newTestClient(t)
	terms := make(chan context.Context, 1)
	e := newTestElector(t, c, uniqueKey(t), &ElectorOptions{
		TTL:              2 * time.Second,
		OnStartedLeading: func(ctx context.Context) { terms <- ctx },
	})
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var term context.Context
	select {
	case term = <-terms:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not lead")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if term.Err() == nil {
		t.Fatal("term context live after Run returned")
	}
	if r, _ := e.Running(); r {
		t.Fatal("running after Run returned")
	}
}

func TestElectorFailoverBetweenProcesses(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	const ttl = 2 * time.Second
	h := startHelper(t, "elect", "HELPER_KEY="+key, "HELPER_TTL="+ttl.String())
	childFence, _ := strconv.ParseInt(h.expect(t, "LEADER", 30*time.Second), 10, 64)

	leader := make(chan time.Time, 1)
	e := newTestElector(t, c, key, &ElectorOptions{TTL: ttl, OnStartedLeading: func(context.Context) { leader <- time.Now() }})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower to see the other process lead", 5*time.Second, func() bool {
		ex, _ := e.LeaderExists()
		return ex
	})
	// The other process keeps renewing: no takeover over a few ttls.
	select {
	case <-leader:
		t.Fatal("follower became leader while the other process was alive")
	case <-time.After(2 * ttl):
	}
	if losses := h.seen("LOSS"); len(losses) > 0 {
		t.Fatalf("the live leader stepped down %d times while nothing disturbed it", len(losses))
	}
	h.kill(t)
	killed := time.Now()
	select {
	case at := <-leader:
		took := at.Sub(killed)
		t.Logf("failover took %v (ttl %v)", took, ttl)
		if took > ttl+1500*time.Millisecond {
			t.Fatalf("failover took %v, want within ttl + 1.5 s", took)
		}
	case <-time.After(4 * ttl):
		t.Fatalf("no failover within %v of the leader's death", 4*ttl)
	}
	if f, _ := e.Fence(); f <= childFence {
		t.Fatalf("new leader's token %d not above the dead leader's %d", f, childFence)
	}
}

func TestLoneLeaderKeepsLeading(t *testing.T) {
	c := newTestClient(t)
	const ttl = 2 * time.Second
	var loss atomic.Int32
	e := newTestElector(t, c, uniqueKey(t), &ElectorOptions{
		TTL:              ttl,
		OnStoppedLeading: func() { loss.Add(1) },
	})
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := e.Campaign(ctx); err != nil {
		t.Fatalf("sole elector did not become leader: %v", err)
	}
	fence, _ := e.Fence()
	time.Sleep(3 * ttl)
	if n := loss.Load(); n != 0 {
		t.Fatalf("a healthy leader stepped down %d times in %v (renewals not keeping up)", n, 3*ttl)
	}
	if f, _ := e.Fence(); f != fence {
		t.Fatalf("leadership lost and re-won: token %d -> %d", fence, f)
	}
}
