package mongoelector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// forEachBackend runs fn on the in-process memory:// backend (always) and on the test
// server (skipped without MONGOELECTOR_TEST_URI).
func forEachBackend(t *testing.T, fn func(t *testing.T, c *Client)) {
	t.Run("memory", func(t *testing.T) {
		name := strings.ReplaceAll(t.Name(), "/", "-")
		c, err := NewClient(fmt.Sprintf("memory://go-%s-%d", name, os.Getpid()), "")
		if err != nil {
			t.Fatalf("NewClient(memory://): %v", err)
		}
		t.Cleanup(func() { c.Close() })
		fn(t, c)
	})
	t.Run("server", func(t *testing.T) { fn(t, newTestClient(t)) })
}

func newTestObserver(t *testing.T, c *Client, key string) *LeaderObserver {
	t.Helper()
	o, err := NewLeaderObserver(c, key, &ObserverOptions{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewLeaderObserver: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// nextState reads one state within timeout.
func nextState(t *testing.T, ch <-chan LeaderState, timeout time.Duration) LeaderState {
	t.Helper()
	return recvWithin(t, ch, timeout, "leader state")
}

// startedElector is an elector whose loop runs and has polled once (so its status
// document exists: it can be a transfer target).
func startedElector(t *testing.T, c *Client, key string, opts ElectorOptions) (*Elector, string) {
	t.Helper()
	polled := make(chan struct{})
	var once atomic.Bool
	opts.OnLoop = func() {
		if once.CompareAndSwap(false, true) {
			close(polled)
		}
	}
	e := newTestElector(t, c, key, &opts)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-polled:
	case <-time.After(10 * time.Second):
		t.Fatal("the elector did not poll within 10 s")
	}
	uuid, err := e.UUID()
	if err != nil {
		t.Fatal(err)
	}
	return e, uuid
}

func waitLeader(t *testing.T, e *Elector, timeout time.Duration) int64 {
	t.Helper()
	waitFor(t, "leadership", timeout, func() bool { is, _ := e.IsLeader(); return is })
	f, err := e.Fence()
	if err != nil || f <= 0 {
		t.Fatalf("leader's Fence() = %d, %v", f, err)
	}
	return f
}

func TestLeaderObserverArguments(t *testing.T) {
	c, err := NewClient("memory://go-observer-args", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, f := range map[string]func() (*LeaderObserver, error){
		"nil client": func() (*LeaderObserver, error) { return NewLeaderObserver(nil, "k", nil) },
		"empty key":  func() (*LeaderObserver, error) { return NewLeaderObserver(c, "", nil) },
		"NUL in key": func() (*LeaderObserver, error) { return NewLeaderObserver(c, "a\x00b", nil) },
		"negative interval": func() (*LeaderObserver, error) {
			return NewLeaderObserver(c, "k", &ObserverOptions{Interval: -time.Second})
		},
		"interval too long": func() (*LeaderObserver, error) {
			return NewLeaderObserver(c, "k", &ObserverOptions{Interval: 2e6 * time.Second})
		},
	} {
		if o, err := f(); !errors.Is(err, ErrInvalidArgument) || o != nil {
			t.Errorf("%s: %v, %v; want ErrInvalidArgument", name, o, err)
		}
	}
	if _, err := NewElector(bg, c, "k", &ElectorOptions{HandoverPoll: -time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative HandoverPoll: %v", err)
	}

	o, err := NewLeaderObserver(c, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := nextState(t, o.C(), 10*time.Second); s.HasLeader || s.UUID != "" || s.Fence != 0 ||
		time.Since(s.ObservedAt).Abs() > time.Minute {
		t.Fatalf("first state of a fresh key = %+v", s)
	}
	s, err := o.Read(bg)
	if err != nil || s.HasLeader {
		t.Fatalf("Read = %+v, %v", s, err)
	}
	done, cancel := context.WithCancel(bg)
	cancel()
	if _, err := o.Read(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a cancelled context: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-o.C(); ok {
		t.Fatal("C() not closed after Close")
	}
	if err := o.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := o.Read(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}

	if ch, err := ObserveLeader(done, c, "k", nil); !errors.Is(err, context.Canceled) || ch != nil {
		t.Fatalf("ObserveLeader with a done context: %v, %v", ch, err)
	}
	ctx, stop := context.WithCancel(bg)
	ch, err := ObserveLeader(ctx, c, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	nextState(t, ch, 10*time.Second)
	stop()
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-deadline:
			t.Fatal("ObserveLeader's channel not closed after its context ended")
		}
	}
	c.Close()
	if _, err := NewLeaderObserver(c, "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewLeaderObserver on a closed client: %v", err)
	}
}

// Two electors and an observer: nobody -> A -> (Transfer) B -> (ResignFor) A -> (Stop)
// nobody. Asserts what is reported and in which order, never how long it took: every
// wait has a deadline about ten times what it should take.
func TestObserveTransferResign(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *Client) {
		const ttl = 2 * time.Second
		key := uniqueKey(t)
		o := newTestObserver(t, c, key)
		states := o.C()
		if s := nextState(t, states, 10*time.Second); s.HasLeader {
			t.Fatalf("first state of a fresh key = %+v", s)
		}

		var aStopped atomic.Int32
		a, auuid := startedElector(t, c, key, ElectorOptions{TTL: ttl, OnStoppedLeading: func() { aStopped.Add(1) }})
		fa := waitLeader(t, a, 10*time.Second)
		if s := nextState(t, states, 10*time.Second); !s.HasLeader || s.UUID != auuid || s.Fence != fa ||
			s.PID != int64(os.Getpid()) || s.Host == "" {
			t.Fatalf("state once A leads = %+v, want %s with fence %d", s, auuid, fa)
		}
		b, buuid := startedElector(t, c, key, ElectorOptions{TTL: ttl})
		if s, err := o.Read(bg); err != nil || s.UUID != auuid || s.Fence != fa {
			t.Fatalf("Read = %+v, %v", s, err)
		}

		// Refused: not the leader, to itself, to a uuid that never reported.
		for name, err := range map[string]error{
			"from a follower": b.Transfer(bg, auuid),
			"to itself":       a.Transfer(bg, auuid),
			"to nobody":       a.Transfer(bg, ""),
			"to a stranger":   a.Transfer(bg, "no-such-member"),
		} {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Transfer %s: %v, want ErrInvalidArgument", name, err)
			}
		}

		// Transfer: A's term ends before the call returns; the observer shows the
		// hand-over to B pending (nobody leads; B named as the target with the very next
		// token) until B has taken it, then B with that token. (A read may miss the
		// pending state when B takes the hand-over within one interval.)
		if err := a.Transfer(bg, buuid); err != nil {
			t.Fatalf("Transfer: %v", err)
		}
		if is, _ := a.IsLeader(); is || aStopped.Load() != 1 {
			t.Fatalf("after Transfer: A leads %v, OnStoppedLeading ran %d times", is, aStopped.Load())
		}
		s := nextState(t, states, 10*ttl)
		if s.Status == HandoverPending {
			if s.HasLeader || s.UUID != "" || s.HandoverUUID != buuid || s.HandoverFence != fa+1 ||
				s.HandoverPID != int64(os.Getpid()) || s.HandoverHost == "" || !s.ExpiresAt.After(s.ObservedAt) {
				t.Fatalf("pending hand-over = %+v, want the target %s with fence %d", s, buuid, fa+1)
			}
			s = nextState(t, states, 10*ttl)
		}
		if s.Status != Leading || !s.HasLeader || s.UUID != buuid || s.Fence != fa+1 ||
			s.HandoverUUID != "" || !s.ExpiresAt.After(s.ObservedAt) {
			t.Fatalf("state after Transfer = %+v, want %s with fence %d", s, buuid, fa+1)
		}
		if fb := waitLeader(t, b, 10*ttl); fb != fa+1 {
			t.Fatalf("B leads with fence %d, the observer saw %d", fb, fa+1)
		}

		// ResignFor: B stands aside for longer than the test; A takes over with a newer
		// token ("nobody" may show in between).
		if err := b.ResignFor(bg, time.Minute); err != nil {
			t.Fatalf("ResignFor: %v", err)
		}
		if is, _ := b.IsLeader(); is {
			t.Fatal("B leads after ResignFor")
		}
		fa2 := waitLeader(t, a, 10*ttl)
		if fa2 <= fa+1 {
			t.Fatalf("A's new token %d is not above B's %d", fa2, fa+1)
		}
		s = nextState(t, states, 10*time.Second)
		if !s.HasLeader {
			if s.Status != NoLeader {
				t.Fatalf("between B and A: %+v, want NoLeader", s)
			}
			s = nextState(t, states, 10*time.Second)
		}
		if !s.HasLeader || s.UUID != auuid || s.Fence != fa2 {
			t.Fatalf("state after ResignFor = %+v, want %s with fence %d", s, auuid, fa2)
		}

		// Every node stops: the observer reports that nobody leads.
		if err := a.Stop(bg); err != nil {
			t.Fatal(err)
		}
		if err := b.Stop(bg); err != nil {
			t.Fatal(err)
		}
		if s := nextState(t, states, 10*ttl); s.HasLeader || s.UUID != "" || s.Fence != 0 ||
			s.Status != NoLeader || !s.ExpiresAt.IsZero() {
			t.Fatalf("state after every node stopped = %+v", s)
		}
		if s, err := o.Read(bg); err != nil || s.HasLeader {
			t.Fatalf("Read after every node stopped = %+v, %v", s, err)
		}
		o.Close()
		if s, ok := <-states; ok {
			t.Fatalf("a state after the last change and Close: %+v", s)
		}
	})
}

// HandoverPoll reaches the library: with a 60 s TTL (default look every 15 s) a target
// looking every 50 ms takes a hand-over at once; with DisableHandoverPoll it has not
// taken it a while later: the observer shows it pending, not leading.
func TestElectorHandoverPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *Client) {
		const ttl = time.Minute
		key := uniqueKey(t)
		a, _ := startedElector(t, c, key, ElectorOptions{TTL: ttl})
		fa := waitLeader(t, a, 10*time.Second)
		fast, fastUUID := startedElector(t, c, key, ElectorOptions{TTL: ttl, HandoverPoll: 50 * time.Millisecond})
		off, offUUID := startedElector(t, c, key, ElectorOptions{TTL: ttl, DisableHandoverPoll: true})
		if err := a.Transfer(bg, fastUUID); err != nil {
			t.Fatal(err)
		}
		// At the default (15 s after its first poll) it would not lead within 5 s.
		if f := waitLeader(t, fast, 5*time.Second); f != fa+1 {
			t.Fatalf("fast leads with %d, want %d", f, fa+1)
		}
		if err := fast.Transfer(bg, offUUID); err != nil {
			t.Fatal(err)
		}
		o, err := NewLeaderObserver(c, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if s, err := o.Read(bg); err != nil || s.Status != HandoverPending || s.HasLeader ||
			s.HandoverUUID != offUUID || s.HandoverFence != fa+2 {
			t.Fatalf("Read after the second Transfer = %+v, %v; want %s pending", s, err, offUUID)
		}
		time.Sleep(1500 * time.Millisecond) // negative check: nothing may happen
		if is, _ := off.IsLeader(); is {
			t.Fatal("a target with DisableHandoverPoll took the hand-over at once")
		}
		if s, err := o.Read(bg); err != nil || s.Status != HandoverPending {
			t.Fatalf("Read a while later = %+v, %v; want still pending", s, err)
		}
	})
}

// On a fake clock: the leader's lease ends while every read fails; the observer reports
// LeaderUnknown at that instant (no read needed), carrying the lease's end; once the
// backend answers again, nobody leads.
func TestObserverReportsUnknownWhenTheLeaseEndsUnseen(t *testing.T) {
	clock, uri, c := fakeWorld(t)
	l, err := NewLocker(bg, c, "svc", &LockerOptions{TTL: 5 * time.Second, Collection: "elector.locks"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	o := newTestObserver(t, c, "svc")
	if err := clock.Settle(); err != nil {
		t.Fatal(err)
	}
	led := nextState(t, o.C(), 10*time.Second)
	if led.Status != Leading || !led.HasLeader || led.ExpiresAt.IsZero() ||
		led.ExpiresAt.After(clock.Now().Add(5*time.Second)) || !led.ExpiresAt.After(clock.Now()) {
		t.Fatalf("first state = %+v, want the locker leading until at most %v", led, clock.Now().Add(5*time.Second))
	}
	if err := MemorySetUnavailable(uri, true); err != nil {
		t.Fatal(err)
	}
	mustAdvance(t, clock, led.ExpiresAt.Sub(clock.Now())-100*time.Millisecond)
	select {
	case s := <-o.C():
		t.Fatalf("a state while the lease still runs: %+v", s)
	default:
	}
	mustAdvance(t, clock, 200*time.Millisecond)
	if s := nextState(t, o.C(), 10*time.Second); s.Status != LeaderUnknown || s.HasLeader ||
		s.UUID != "" || !s.ExpiresAt.Equal(led.ExpiresAt) || s.Status.String() != "unknown" {
		t.Fatalf("state after the lease ended unseen = %+v, want LeaderUnknown at %v", s, led.ExpiresAt)
	}
	if err := MemorySetUnavailable(uri, false); err != nil {
		t.Fatal(err)
	}
	mustAdvance(t, clock, time.Second)
	if s := nextState(t, o.C(), 10*time.Second); s.Status != NoLeader {
		t.Fatalf("state once the backend answers = %+v, want NoLeader", s)
	}
}

func TestDefaultElectorOptionsHandoverPoll(t *testing.T) {
	d := DefaultElectorOptions()
	if d.HandoverPoll != 0 || d.DisableHandoverPoll {
		t.Fatalf("defaults: HandoverPoll %v, DisableHandoverPoll %v; want 0 (TTL/4), false", d.HandoverPoll, d.DisableHandoverPoll)
	}
}
