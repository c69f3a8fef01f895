package mongoelector

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func newTestElector(t *testing.T, c *Client, key string, opts *ElectorOptions) *Elector {
	t.Helper()
	e, err := NewElector(c, key, opts)
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

func TestElectorPollCallbacksAndStatus(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	var leader, loss, loops atomic.Int32
	a := newTestElector(t, c, key, &ElectorOptions{
		TTL: 4 * time.Second, AppVersion: "go-test",
		OnLeader: func() { leader.Add(1) }, OnLeaderLoss: func() { loss.Add(1) },
		OnLoop: func() { loops.Add(1); panic("a panicking callback must not kill the process") },
	})
	b := newTestElector(t, c, key, &ElectorOptions{TTL: 4 * time.Second})

	if err := a.Poll(); err != nil {
		t.Fatal(err)
	}
	if leader.Load() != 1 || loops.Load() != 1 {
		t.Fatalf("after the first poll: on_leader %d, on_loop %d", leader.Load(), loops.Load())
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
	if err := b.Poll(); err != nil {
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

	st, err := a.NodeStatus()
	if err != nil {
		t.Fatal(err)
	}
	uuid, _ := a.UUID()
	if st["is_leader"] != true || st["uuid"] != uuid || st["app_version"] != "go-test" {
		t.Fatalf("NodeStatus() = %v", st)
	}
	detail, err := b.ClusterDetail()
	if err != nil {
		t.Fatal(err)
	}
	ld, _ := detail["leader"].(map[string]any)
	if ld == nil || ld["uuid"] != uuid {
		t.Fatalf("ClusterDetail() leader = %v, want uuid %s", detail["leader"], uuid)
	}
	if members, _ := detail["member_detail"].([]any); len(members) == 0 {
		t.Fatalf("ClusterDetail() member_detail = %v", detail["member_detail"])
	}

	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if loss.Load() != 1 {
		t.Fatalf("on_leader_loss fired %d times after Release", loss.Load())
	}
	if is, _ := a.IsLeader(); is {
		t.Fatal("leader after Release")
	}
	if err := b.Poll(); err != nil {
		t.Fatal(err)
	}
	if is, _ := b.IsLeader(); !is {
		t.Fatal("b did not take the released leadership")
	}
	if f, _ := b.Fence(); f <= fence {
		t.Fatalf("new leader's token %d not above %d", f, fence)
	}
}

func TestElectorStartStopAndClose(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	leader := make(chan struct{}, 1)
	var loss atomic.Int32
	e := newTestElector(t, c, key, &ElectorOptions{
		TTL:          2 * time.Second,
		OnLeader:     func() { leader <- struct{}{} },
		OnLeaderLoss: func() { loss.Add(1) },
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatalf("second Start is a no-op: %v", err)
	}
	select {
	case <-leader:
	case <-time.After(5 * time.Second):
		t.Fatal("sole elector did not become leader")
	}
	if r, _ := e.Running(); !r {
		t.Fatal("not running after Start")
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Running(); r {
		t.Fatal("running after Stop")
	}
	if loss.Load() != 1 {
		t.Fatalf("on_leader_loss fired %d times on Stop", loss.Load())
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader:
	case <-time.After(5 * time.Second):
		t.Fatal("restarted elector did not lead again")
	}
	e.Close()
	if loss.Load() != 2 {
		t.Fatalf("Close of a leader fired on_leader_loss %d times in total, want 2", loss.Load())
	}
	e.Close()
	for name, fn := range map[string]func() error{
		"Start": e.Start, "Stop": e.Stop, "Poll": e.Poll, "Release": e.Release,
		"IsLeader":      func() error { _, err := e.IsLeader(); return err },
		"LeaderExists":  func() error { _, err := e.LeaderExists(); return err },
		"Running":       func() error { _, err := e.Running(); return err },
		"PollWait":      func() error { _, err := e.PollWait(); return err },
		"Fence":         func() error { _, err := e.Fence(); return err },
		"UUID":          func() error { _, err := e.UUID(); return err },
		"NodeStatus":    func() error { _, err := e.NodeStatus(); return err },
		"ClusterDetail": func() error { _, err := e.ClusterDetail(); return err },
	} {
		if err := fn(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed elector: %v", name, err)
		}
	}
}

// C forbids freeing an elector from its own callback; Close from one must still work.
func TestElectorCloseFromCallback(t *testing.T) {
	c := newTestClient(t)
	var e *Elector
	closed := make(chan error, 1)
	var err error
	e, err = NewElector(c, uniqueKey(t), &ElectorOptions{
		TTL: 2 * time.Second,
		OnLeader: func() {
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
		t.Fatal("on_leader never fired")
	}
	waitFor(t, "the elector to be freed", 5*time.Second, func() bool {
		e.g.mu.Lock()
		defer e.g.mu.Unlock()
		return e.ptr == nil
	})
}

func TestElectorFailoverBetweenProcesses(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	const ttl = 2 * time.Second
	h := startHelper(t, "elect", "HELPER_KEY="+key, "HELPER_TTL="+ttl.String())
	childFence, _ := strconv.ParseInt(h.expect(t, "LEADER", 30*time.Second), 10, 64)

	leader := make(chan time.Time, 1)
	e := newTestElector(t, c, key, &ElectorOptions{TTL: ttl, OnLeader: func() { leader <- time.Now() }})
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
	leader := make(chan struct{}, 10)
	var loss atomic.Int32
	e := newTestElector(t, c, uniqueKey(t), &ElectorOptions{
		TTL:          ttl,
		OnLeader:     func() { leader <- struct{}{} },
		OnLeaderLoss: func() { loss.Add(1) },
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader:
	case <-time.After(5 * time.Second):
		t.Fatal("sole elector did not become leader")
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

func TestLogHandlerReceivesLibraryMessages(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	got := make(chan string, 100)
	if err := SetLogHandler(func(level LogLevel, msg string) {
		select {
		case got <- msg:
		default:
		}
		panic("a panicking log handler must not kill the process")
	}); err != nil {
		t.Fatal(err)
	}
	defer SetLogHandler(nil)
	e := newTestElector(t, c, key, &ElectorOptions{TTL: 2 * time.Second})
	if err := e.Poll(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(2 * time.Second)
	for {
		select {
		case msg := <-got:
			if msg == "became leader of "+key {
				return
			}
		case <-deadline:
			t.Fatalf("no %q log message delivered", "became leader of "+key)
		}
	}
}
