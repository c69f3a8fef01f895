package k8slock_test

// Real client-go LeaderElectors over k8slock: exactly one leads, a released or
// abandoned lease passes to the other, and no candidate starts leading while another's
// leadership still runs. memory:// and sqlite:// always; the server of
// MONGOELECTOR_TEST_URI when it is set.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
	"github.com/mongoelector/mongoelector/capi/go/k8slock"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

const (
	renewDeadline = time.Second
	retryPeriod   = 200 * time.Millisecond
	waitLimit     = 20 * time.Second // for what must happen within a few retry periods
)

// counting wraps a Lock and counts client-go's reads, writes and successful writes.
type counting struct {
	rl.Interface
	gets, writes, succeeded atomic.Int64
}

func (c *counting) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	c.gets.Add(1)
	return c.Interface.Get(ctx)
}

func (c *counting) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	c.writes.Add(1)
	err := c.Interface.Create(ctx, ler)
	if err == nil {
		c.succeeded.Add(1)
	}
	return err
}

func (c *counting) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	c.writes.Add(1)
	err := c.Interface.Update(ctx, ler)
	if err == nil {
		c.succeeded.Add(1)
	}
	return err
}

// referee records leaderships: a candidate that starts leading while another's
// leadership context is still live is a violation.
type referee struct {
	t       *testing.T
	mu      sync.Mutex
	leading map[string]context.Context
	bad     []string
	started chan string
}

func newReferee(t *testing.T) *referee {
	return &referee{t: t, leading: map[string]context.Context{}, started: make(chan string, 16)}
}

func (r *referee) start(id string, ctx context.Context) {
	r.mu.Lock()
	for other, octx := range r.leading {
		if other != id && octx.Err() == nil {
			r.bad = append(r.bad, fmt.Sprintf("%s started leading while %s still led", id, other))
		}
	}
	r.leading[id] = ctx
	r.mu.Unlock()
	r.started <- id
}

func (r *referee) check() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		r.t.Error(b)
	}
}

func (r *referee) next(what string) string {
	r.t.Helper()
	select {
	case id := <-r.started:
		return id
	case <-time.After(waitLimit):
		r.t.Fatalf("%s: nobody started leading within %v", what, waitLimit)
		return ""
	}
}

// candidate is one LeaderElector running on its own context.
type candidate struct {
	id      string
	lock    *counting
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run has returned
	stopped atomic.Bool   // OnStoppedLeading ran
}

// startCandidate runs a LeaderElector for id once gate is closed.
func startCandidate(t *testing.T, r *referee, c *mongoelector.Client, key, id string, releaseOnCancel bool,
	gate <-chan struct{}) *candidate {
	t.Helper()
	cand := &candidate{id: id, lock: &counting{Interface: newLock(t, c, key, id)}, done: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            cand.lock,
		LeaseDuration:   testLease,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: releaseOnCancel,
		Name:            key,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { r.start(id, ctx) },
			OnStoppedLeading: func() { cand.stopped.Store(true) },
		},
	})
	if err != nil {
		t.Fatalf("NewLeaderElector: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cand.cancel = cancel
	go func() {
		defer close(cand.done)
		<-gate
		le.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-cand.done
	})
	return cand
}

// eventually polls cond (a counter reaching a value) until it holds or waitLimit ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// twoElectors: a and b compete; the leader is stopped (released or abandoned) and the
// other takes over.
func twoElectors(t *testing.T, uri string, release bool) {
	c1, c2, c3 := newClient(t, uri), newClient(t, uri), newClient(t, uri)
	key := uniqueKey(t)
	r := newReferee(t)
	gate := make(chan struct{}) // both start at once: their first Creates race
	a := startCandidate(t, r, c1, key, "a", release, gate)
	b := startCandidate(t, r, c2, key, "b", release, gate)
	watcher := newLock(t, c3, key, "watcher")
	close(gate)

	first := r.next("first election")
	leader, follower := a, b
	if first == "b" {
		leader, follower = b, a
	}
	wantHolder(t, watcher, leader.id, "first election")
	// The leader renews and the follower keeps looking, in vain.
	renewedFrom, readFrom := leader.lock.succeeded.Load(), follower.lock.gets.Load()
	eventually(t, "three renewals", func() bool { return leader.lock.succeeded.Load() >= renewedFrom+3 })
	eventually(t, "three looks of the follower", func() bool { return follower.lock.gets.Load() >= readFrom+3 })
	if n := follower.lock.succeeded.Load(); n != 0 {
		t.Fatalf("the follower's writes succeeded %d times while %s led", n, leader.id)
	}
	select {
	case id := <-r.started:
		t.Fatalf("%s started leading while %s led", id, leader.id)
	default:
	}

	stoppedAt := time.Now()
	leader.cancel()
	if got := r.next("take-over"); got != follower.id {
		t.Fatalf("%s took over, want %s", got, follower.id)
	}
	took := time.Since(stoppedAt)
	wantHolder(t, watcher, follower.id, "take-over")
	select {
	case <-leader.done:
	case <-time.After(waitLimit):
		t.Fatalf("the former leader's Run did not return")
	}
	if !leader.stopped.Load() {
		t.Fatal("OnStoppedLeading did not run on the former leader")
	}
	if !release && took < testLease/2 {
		// Without a release the lease ends only at its TTL on the server.
		t.Fatalf("took over %v after an abandoned lease, before it could expire", took)
	}
	t.Logf("take-over after %v", took)
	r.check()
}

func sqliteURI(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "locks.db")
}

func TestLeaderElectorsReleaseOnCancel(t *testing.T) {
	t.Run("memory", func(t *testing.T) { twoElectors(t, memoryURI(t), true) })
	t.Run("sqlite", func(t *testing.T) { twoElectors(t, sqliteURI(t), true) })
}

func TestLeaderElectorsAbandonedLease(t *testing.T) {
	t.Run("memory", func(t *testing.T) { twoElectors(t, memoryURI(t), false) })
}

func testURI(t *testing.T) string {
	uri := os.Getenv("MONGOELECTOR_TEST_URI")
	if uri == "" {
		t.Skip("MONGOELECTOR_TEST_URI is not set: this test needs a server")
	}
	return uri
}

func TestLeaderElectorsServer(t *testing.T) {
	uri := testURI(t)
	t.Run("release", func(t *testing.T) { twoElectors(t, uri, true) })
	t.Run("abandoned", func(t *testing.T) { twoElectors(t, uri, false) })
}

// The conditional writes against the server: concurrent Creates, one winner; stale
// Updates refused.
func TestConformanceServer(t *testing.T) {
	uri := testURI(t)
	ctx := context.Background()
	key := uniqueKey(t)
	a, b := newLock(t, newClient(t, uri), key, "a"), newLock(t, newClient(t, uri), key, "b")
	if _, _, err := a.Get(ctx); err == nil {
		t.Fatalf("Get of a fresh key found a record")
	}
	get := func(l *k8slock.Lock) { l.Get(ctx) }
	get(a)
	get(b)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, l := range []*k8slock.Lock{a, b} {
		wg.Go(func() { errs[i] = l.Create(ctx, record(l.Identity(), 0)) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("concurrent Creates: %v, %v; want exactly one success", errs[0], errs[1])
	}
	win, lose := a, b
	if errs[0] != nil {
		win, lose = b, a
	}
	want := record(win.Identity(), 0)
	if err := win.Update(ctx, want); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	got, _, err := lose.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, "Get from the server", got, want)
	if err := win.Update(ctx, record(win.Identity(), 0)); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if err := lose.Update(ctx, record(lose.Identity(), 1)); err == nil {
		t.Fatal("Update from a stale observation succeeded")
	}
}
