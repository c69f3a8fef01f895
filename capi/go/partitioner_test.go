package mongoelector

// The partitioner (two members sharing a group: graceful moves, tokens, status, Close
// from a callback) and fair queueing (Fair on semaphores and read-write lock writers),
// on memory:// driven by a fake clock, and two members against the server.

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

const testPartitions = 8

// memberLog records what a group's members' callbacks said, in one order.
type memberLog struct {
	mu     sync.Mutex
	events []partitionEvent
}

type partitionEvent struct {
	member    string
	assigned  bool
	partition int
	token     int64
}

func (l *memberLog) options(member string, ttl time.Duration) *PartitionerOptions {
	rec := func(ev partitionEvent) {
		l.mu.Lock()
		l.events = append(l.events, ev)
		l.mu.Unlock()
	}
	return &PartitionerOptions{
		Partitions: testPartitions,
		TTL:        ttl,
		OnAssigned: func(p int, token int64) { rec(partitionEvent{member, true, p, token}) },
		OnRevoked:  func(p int) { rec(partitionEvent{member, false, p, 0}) },
	}
}

// believed is the partitions `member` was assigned and not revoked since, with their tokens.
func (l *memberLog) believed(member string) map[int]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]int64{}
	for _, e := range l.events {
		if e.member != member {
			continue
		}
		if e.assigned {
			out[e.partition] = e.token
		} else {
			delete(out, e.partition)
		}
	}
	return out
}

// checkHandovers: every partition that passed from `from` to `to` was revoked at `from`
// before `to` was assigned it, with a greater token; `expected` partitions moved.
func (l *memberLog) checkHandovers(t *testing.T, from, to string, expected int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	moved := 0
	for i, e := range l.events {
		if e.member != to || !e.assigned {
			continue
		}
		last := -1 // from's last event on this partition before i
		for j := 0; j < i; j++ {
			if o := l.events[j]; o.member == from && o.partition == e.partition {
				last = j
			}
		}
		if last < 0 {
			continue
		}
		if o := l.events[last]; o.assigned {
			t.Fatalf("%s got partition %d while %s had not revoked it: %+v", to, e.partition, from, l.events)
		}
		for j := last; j >= 0; j-- {
			if o := l.events[j]; o.member == from && o.partition == e.partition && o.assigned {
				if o.token >= e.token {
					t.Fatalf("partition %d: token %d after %d", e.partition, e.token, o.token)
				}
				break
			}
		}
		moved++
	}
	if moved != expected {
		t.Fatalf("%d partitions moved from %s to %s, want %d: %+v", moved, from, to, expected, l.events)
	}
}

func newTestPartitioner(t *testing.T, c *Client, group string, opts *PartitionerOptions) *Partitioner {
	t.Helper()
	p, err := NewPartitioner(bg, c, group, opts)
	if err != nil {
		t.Fatalf("NewPartitioner(%q): %v", group, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func mustOwned(t *testing.T, p *Partitioner) map[int]int64 {
	t.Helper()
	owned, err := p.Owned()
	if err != nil {
		t.Fatalf("Owned: %v", err)
	}
	for part, token := range owned {
		if tok, ok, err := p.Token(part); err != nil || !ok || tok != token {
			t.Fatalf("Token(%d) = %d, %v, %v; Owned says %d", part, tok, ok, err, token)
		}
	}
	return owned
}

// sameOwned: what owned() says and what the callbacks said agree.
func sameOwned(a, b map[int]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// partitionerScenario: A alone owns every partition; B joins and the group splits with
// graceful moves; B leaves and A takes everything back. step moves time (fake or real)
// until cond holds, or fails.
func partitionerScenario(t *testing.T, c *Client, ttl time.Duration, step func(what string, cond func() bool)) {
	var log memberLog
	group := uniqueKey(t)
	a := newTestPartitioner(t, c, group, log.options("A", ttl))
	b := newTestPartitioner(t, c, group, log.options("B", ttl))
	if a.UUID() == "" || a.UUID() == b.UUID() {
		t.Fatalf("uuids %q %q", a.UUID(), b.UUID())
	}
	if err := a.Start(bg); err != nil {
		t.Fatalf("A.Start: %v", err)
	}
	step("A owns all", func() bool {
		o := mustOwned(t, a)
		return len(o) == testPartitions && sameOwned(o, log.believed("A"))
	})
	st, err := a.Status(bg)
	if err != nil || !st.Settled || st.Partitions != testPartitions || len(st.Owners) != testPartitions ||
		len(st.Members) != 1 || st.Members[0].UUID != a.UUID() || !st.Members[0].Live {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	for _, o := range st.Owners {
		if o.Owner != a.UUID() || o.Assigned != a.UUID() || o.Token <= 0 || o.Expires.IsZero() {
			t.Fatalf("owner %+v", o)
		}
	}
	if rs, err := ReadPartitionStatus(bg, c, group, 0); err != nil || rs.Partitions != testPartitions || !rs.Settled {
		t.Fatalf("ReadPartitionStatus = %+v, %v", rs, err)
	}

	// Another partition count is refused at Start, naming it.
	odd := newTestPartitioner(t, c, group, &PartitionerOptions{Partitions: testPartitions + 1, TTL: ttl})
	if err := odd.Start(bg); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Start with another count: %v", err)
	}

	if err := b.Start(bg); err != nil {
		t.Fatalf("B.Start: %v", err)
	}
	// Both live, each partition held by the member rendezvous hashing assigns it (one of
	// them may be assigned none).
	step("split", func() bool {
		oa, ob := mustOwned(t, a), mustOwned(t, b)
		if len(oa)+len(ob) != testPartitions || !sameOwned(oa, log.believed("A")) || !sameOwned(ob, log.believed("B")) {
			return false
		}
		st, err := ReadPartitionStatus(bg, c, group, testPartitions)
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, m := range st.Members {
			if m.Live {
				live++
			}
		}
		return st.Settled && live == 2
	})
	nb := len(mustOwned(t, b))
	log.checkHandovers(t, "A", "B", nb) // all of B's came from A

	if err := b.Stop(bg); err != nil {
		t.Fatalf("B.Stop: %v", err)
	}
	if running, _ := b.Running(); running {
		t.Fatal("B runs after Stop")
	}
	if n := len(log.believed("B")); n != 0 {
		t.Fatalf("B still believes it owns %d partitions after Stop", n)
	}
	step("A owns all again", func() bool {
		o := mustOwned(t, a)
		return len(o) == testPartitions && sameOwned(o, log.believed("A"))
	})
	log.checkHandovers(t, "B", "A", nb) // and went back
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(log.believed("A")); n != 0 {
		t.Fatalf("A still believes it owns %d partitions after Close", n)
	}
	if _, err := a.Owned(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Owned after Close: %v", err)
	}
}

func TestPartitionerFake(t *testing.T) {
	clock, _, c := fakeWorld(t)
	partitionerScenario(t, c, 6*time.Second, func(what string, cond func() bool) {
		for i := 0; !cond(); i++ {
			if i == 100 {
				t.Fatalf("%s: not after %v of fake time", what, 100*500*time.Millisecond)
			}
			mustAdvance(t, clock, 500*time.Millisecond)
		}
	})
}

func TestPartitionerServer(t *testing.T) {
	c := newTestClient(t)
	partitionerScenario(t, c, 4*time.Second, func(what string, cond func() bool) {
		waitFor(t, what, 40*time.Second, cond)
	})
}

func TestPartitionerBadInput(t *testing.T) {
	_, _, c := fakeWorld(t)
	for _, tc := range []struct {
		opts *PartitionerOptions
		says string
	}{
		{nil, "Partitions"},
		{&PartitionerOptions{}, "partitions must be a whole number"},
		{&PartitionerOptions{Partitions: MaxPartitions + 1}, "got 100001"},
		{&PartitionerOptions{Partitions: 4, TTL: 6 * time.Second, Poll: 4 * time.Second}, "poll"},
		{&PartitionerOptions{Partitions: 4, TTL: -time.Second}, "negative"},
		{&PartitionerOptions{Partitions: 4, LocksCollection: "x", MembersCollection: "x"}, "two collections"},
	} {
		_, err := NewPartitioner(bg, c, "g", tc.opts)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("NewPartitioner(%+v) = %v, want ErrInvalidArgument saying %q", tc.opts, err, tc.says)
		}
	}
	p := newTestPartitioner(t, c, "g", &PartitionerOptions{Partitions: 4})
	if _, _, err := p.Token(4); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Token(4) = %v", err)
	}
	if _, err := ReadPartitionStatus(bg, c, "nobody", 0); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "no live member") {
		t.Fatalf("ReadPartitionStatus without members = %v", err)
	}
}

// Close from a member's own OnAssigned: returns at once, no callback after it, and the
// member leaves the group.
func TestPartitionerCloseInCallback(t *testing.T) {
	clock, _, c := fakeWorld(t)
	group := uniqueKey(t)
	var mu sync.Mutex
	calls := 0
	var p *Partitioner
	ready := make(chan struct{})
	opts := &PartitionerOptions{Partitions: testPartitions, TTL: 6 * time.Second,
		OnAssigned: func(int, int64) {
			<-ready
			mu.Lock()
			calls++
			mu.Unlock()
			p.Close()
		}}
	p = newTestPartitioner(t, c, group, opts)
	close(ready)
	if err := p.Start(bg); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		mustAdvance(t, clock, 500*time.Millisecond)
		st, err := ReadPartitionStatus(bg, c, group, testPartitions)
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, o := range st.Owners {
			if o.Owner != "" {
				held++
			}
		}
		if len(st.Members) == 1 && !st.Members[0].Live && held == 0 {
			break
		}
		if i == 100 {
			t.Fatalf("the member did not leave: %+v", st)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d callbacks, want the one that closed it", calls)
	}
}

// A fair waiter queued behind a holder keeps a latecomer's TryAcquire out once the
// holder releases; without Fair the latecomer gets in.
func TestFairSemaphoreFake(t *testing.T) {
	for _, fair := range []bool{true, false} {
		clock, _, c := fakeWorld(t)
		key := uniqueKey(t)
		opts := &SemaphoreOptions{TTL: 30 * time.Second, Fair: fair}
		newSem := func() *Semaphore {
			s, err := NewSemaphore(bg, c, key, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		holder, waiter, late := newSem(), newSem(), newSem()
		first, err := holder.TryAcquire(bg)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := clock.WaitForWaiters(0, 0)
		got := make(chan error, 1)
		var fence int64
		go func() {
			f, err := waiter.Acquire(bg, WithStep(500*time.Millisecond))
			fence = f
			got <- err
		}()
		if _, err := clock.WaitForWaiters(n+1, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := holder.Release(bg); err != nil {
			t.Fatal(err)
		}
		_, err = late.TryAcquire(bg)
		if fair && !errors.Is(err, ErrLockExists) {
			t.Fatalf("fair: a latecomer passed the queued waiter: %v", err)
		}
		if !fair {
			if err != nil {
				t.Fatalf("not fair: latecomer refused: %v", err)
			}
			late.Release(bg)
		}
		mustAdvance(t, clock, time.Second)
		if err := <-got; err != nil || fence <= first {
			t.Fatalf("waiter: %d, %v (holder had %d)", fence, err, first)
		}
		waiter.Release(bg)
	}
}

// The same for read-write lock writers.
func TestFairRWLockWritersFake(t *testing.T) {
	clock, _, c := fakeWorld(t)
	key := uniqueKey(t)
	opts := &RWLockOptions{TTL: 30 * time.Second, Fair: true, DisableWriterPreference: true}
	var locks []*RWLock
	for i := 0; i < 3; i++ {
		l, err := NewRWLock(bg, c, key, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		locks = append(locks, l)
	}
	holder, waiter, late := locks[0], locks[1], locks[2]
	if _, err := holder.TryLock(bg); err != nil {
		t.Fatal(err)
	}
	n, _ := clock.WaitForWaiters(0, 0)
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(bg, WithStep(500*time.Millisecond))
		got <- err
	}()
	if _, err := clock.WaitForWaiters(n+1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := holder.Unlock(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := late.TryLock(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("a latecomer passed the queued writer: %v", err)
	}
	mustAdvance(t, clock, time.Second)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := DefaultRWLockOptions(); d.Fair {
		t.Fatal("Fair on by default")
	}
	if d := DefaultSemaphoreOptions(); d.Fair {
		t.Fatal("Fair on by default")
	}
}
