package mongoelector

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A cancel that comes when no acquire is in flight has no effect on later ones: each
// call has its own C cancel token (the 1.0 API's pending cancel leaked into the next
// acquire).
func TestCancelWithNoAcquireInFlightDoesNotLeak(t *testing.T) {
	c := newTestClient(t)
	l := newTestLocker(t, c, uniqueKey(t), 10*time.Second)
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(bg)
		if _, err := l.Acquire(ctx); err != nil {
			t.Fatalf("round %d: Acquire: %v", i, err)
		}
		cancel() // after Acquire returned: nothing to cancel
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithCancel(bg)
		if _, err := l.TryAcquire(ctx); err != nil {
			t.Fatalf("round %d: TryAcquire: %v", i, err)
		}
		cancel()
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		lease, err := l.Hold(ctx) // ctx cancelled: refused before any C call
		if !errors.Is(err, context.Canceled) || lease != nil {
			t.Fatalf("Hold with a cancelled ctx: %v", err)
		}
		// The next acquire, with a fresh context, is not cancelled by any of the above.
		fence, err := l.Acquire(bg, WithTimeout(5*time.Second))
		if err != nil || fence <= 0 {
			t.Fatalf("round %d: Acquire after cancels with nothing in flight: %d, %v", i, fence, err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
}

// While an Acquire waits, the other calls on the same locker answer at once: the wait
// holds neither a Go-side lock nor the C locker.
func TestOtherCallsAnswerWhileAcquireWaits(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	holder := newTestLocker(t, c, key, 20*time.Second)
	if _, err := holder.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	l := newTestLocker(t, c, key, 20*time.Second)
	actx, acancel := context.WithCancel(bg)
	res := make(chan error, 1)
	go func() { _, err := l.Acquire(actx, WithStep(2*time.Second)); res <- err }()
	time.Sleep(300 * time.Millisecond)
	for name, fn := range map[string]func(context.Context) error{
		"Locked":     func(ctx context.Context) error { _, err := l.Locked(ctx); return err },
		"Owned":      func(ctx context.Context) error { _, err := l.Owned(ctx); return err },
		"Current":    func(ctx context.Context) error { _, err := l.Current(ctx); return err },
		"Touch":      func(ctx context.Context) error { _, _, err := l.Touch(ctx); return err },
		"VerifyTime": func(ctx context.Context) error { _, err := l.VerifyTime(ctx); return err },
		"Release":    l.Release,
		"Fence":      func(context.Context) error { _, err := l.Fence(); return err },
	} {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		start := time.Now()
		err := fn(ctx)
		cancel()
		if err != nil {
			t.Errorf("%s while Acquire waits: %v", name, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("%s took %v while Acquire waited", name, el)
		}
	}
	select {
	case err := <-res:
		t.Fatalf("Acquire returned while the lock was held: %v", err)
	default:
	}
	acancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Acquire not cancelled")
	}
}

// ---- a server of our own, frozen with SIGSTOP ------------------------------------------

// startOwnServer starts a mongo-java-server for this test alone (stopped at cleanup) and
// returns its URI and pid.
func startOwnServer(t *testing.T) (string, int) {
	t.Helper()
	script, err := filepath.Abs("../../tests/servers/testserver.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "start", "java")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testserver.sh start java: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	uri := strings.TrimSpace(lines[len(lines)-1])
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", uri).CombinedOutput(); err != nil {
			t.Errorf("testserver.sh stop %s: %v\n%s", uri, err, out)
		}
	})
	list, err := exec.Command("bash", script, "list").Output()
	if err != nil {
		t.Fatalf("testserver.sh list: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(list)))
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // port kind pid uri
		if len(f) == 4 && f[3] == uri {
			pid, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("testserver.sh list: %q", sc.Text())
			}
			return uri, pid
		}
	}
	t.Fatalf("testserver.sh list does not name %s:\n%s", uri, list)
	return "", 0
}

// Every call that waits on the network returns within 100 ms of its context's end,
// even while the server is frozen and the C call hangs in a round trip. Results that
// arrive later are cleaned up: a lock taken after its caller gave up is released, a
// locker or elector made too late is freed.
func TestCallsHonourContextWhileServerFrozen(t *testing.T) {
	testURI(t) // runs only where the test servers are available
	uri, pid := startOwnServer(t)
	c, err := NewClient(uri, testDB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	key := uniqueKey(t)
	// Before the freeze: connections open, the server clock sampled.
	l := newTestLocker(t, c, key, 20*time.Second) // per-call timeout 2 s
	late, err := NewLocker(bg, c, key+"-late", &LockerOptions{TTL: 30 * time.Second, DisableTimeParanoid: true,
		OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { late.Close() })
	if _, err := late.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	if err := late.Release(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	// The same for a semaphore: a late claim (this handle made the key's last claim, so
	// its acquire is one round trip) and calls that wait on the server.
	lateSem, err := NewSemaphore(bg, c, key+"-latesem", &SemaphoreOptions{Limit: 2, TTL: 30 * time.Second,
		DisableTimeParanoid: true, OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lateSem.Close() })
	if _, err := lateSem.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	if err := lateSem.Release(bg); err != nil {
		t.Fatal(err)
	}
	sem := newTestSemaphore(t, c, key+"-sem", 2, 20*time.Second)
	if _, err := sem.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	e := newTestElector(t, c, key, &ElectorOptions{TTL: 20 * time.Second})
	if err := e.Poll(bg); err != nil {
		t.Fatal(err)
	}
	if is, _ := e.IsLeader(); !is {
		t.Fatal("elector does not lead before the freeze")
	}
	follower := newTestElector(t, c, key, &ElectorOptions{TTL: 20 * time.Second})
	// Never polled: no server clock sample, so its NodeStatus samples one (a round trip).
	unsampled := newTestElector(t, c, key+"-unsampled", &ElectorOptions{TTL: 20 * time.Second})
	c2, err := NewClient(uri, testDB) // its ServerInfo is not cached yet
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })

	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var thawOnce sync.Once
	thaw := func() { thawOnce.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(thaw) // before the handles' cleanups close them (also on failure)

	// check runs fn with a context that ends 60 ms later (cancelled, or past its
	// deadline) and wants it to return within 100 ms of that, with the context's error
	// (or success when okFast: a call that may not need the server).
	n := 0
	check := func(name string, okFast bool, fn func(context.Context) error) {
		t.Helper()
		n++
		var ctx context.Context
		var cancel context.CancelFunc
		var endsAt time.Time
		deadline := n%2 == 0
		if deadline {
			ctx, cancel = context.WithTimeout(bg, 60*time.Millisecond)
			endsAt = time.Now().Add(60 * time.Millisecond)
		} else {
			ctx, cancel = context.WithCancel(bg)
		}
		defer cancel()
		res := make(chan error, 1)
		go func() { res <- fn(ctx) }()
		if !deadline {
			time.Sleep(60 * time.Millisecond)
			endsAt = time.Now()
			cancel()
		}
		select {
		case err := <-res:
			el := time.Since(endsAt)
			want := context.Canceled
			if deadline {
				want = context.DeadlineExceeded
			}
			switch {
			case err == nil && okFast:
				t.Logf("%s: answered without the server", name)
			case !errors.Is(err, want):
				t.Errorf("%s on a frozen server: %v, want %v", name, err, want)
			case el > 100*time.Millisecond:
				t.Errorf("%s returned %v after its context ended", name, el)
			default:
				t.Logf("%s: %v, %v after the context ended", name, err, el.Round(time.Millisecond))
			}
		case <-time.After(3 * time.Second):
			t.Errorf("%s still waiting 3 s after its context ended", name)
		}
	}
	// First: a claim sent to the frozen server, which the server carries out after the
	// thaw; its caller gave up, so the hold must be released in the background.
	check("TryAcquire (late)", false, func(ctx context.Context) error { _, err := late.TryAcquire(ctx); return err })
	check("Semaphore.TryAcquire (late)", false, func(ctx context.Context) error { _, err := lateSem.TryAcquire(ctx); return err })
	check("Acquire", false, func(ctx context.Context) error { _, err := l.Acquire(ctx); return err })
	check("TryAcquire", false, func(ctx context.Context) error { _, err := l.TryAcquire(ctx); return err })
	check("Locked", false, func(ctx context.Context) error { _, err := l.Locked(ctx); return err })
	check("Owned", false, func(ctx context.Context) error { _, err := l.Owned(ctx); return err })
	check("Current", false, func(ctx context.Context) error { _, err := l.Current(ctx); return err })
	check("Touch", false, func(ctx context.Context) error { _, _, err := l.Touch(ctx); return err })
	check("VerifyTime", false, func(ctx context.Context) error { _, err := l.VerifyTime(ctx); return err })
	check("Release", false, l.Release)
	check("Semaphore.Holders", false, func(ctx context.Context) error { _, err := sem.Holders(ctx); return err })
	check("Semaphore.Touch", false, func(ctx context.Context) error { _, _, err := sem.Touch(ctx); return err })
	check("Semaphore.Release", false, sem.Release)
	check("Hold", false, func(ctx context.Context) error { _, err := l.Hold(ctx); return err })
	check("NewLocker", false, func(ctx context.Context) error {
		x, err := NewLocker(ctx, c, key+"-new", &LockerOptions{Collection: "go_frozen_new"})
		if err == nil {
			x.Close()
		}
		return err
	})
	check("NewElector", false, func(ctx context.Context) error {
		x, err := NewElector(ctx, c, key+"-new", nil)
		if err == nil {
			x.Close()
		}
		return err
	})
	check("Elector.Poll", false, e.Poll)
	check("Elector.ClusterDetail", false, func(ctx context.Context) error { _, err := e.ClusterDetail(ctx); return err })
	check("Elector.NodeStatus", true, func(ctx context.Context) error { _, err := e.NodeStatus(ctx); return err })
	check("Elector.NodeStatus (no clock sample yet)", true, func(ctx context.Context) error {
		_, err := unsampled.NodeStatus(ctx)
		return err
	})
	check("Elector.Release", false, e.Release)
	check("Client.ServerInfo", false, func(ctx context.Context) error { _, _, err := c2.ServerInfo(ctx); return err })
	check("Elector.Resign", false, e.Resign)
	// A node that does not lead: Campaign waits for its loop, which waits for the server.
	check("Elector.Campaign", false, follower.Campaign)
	check("Elector.Stop", false, follower.Stop)

	thaw()
	// The late claim: once the server answers, the hold is released in the background.
	waitFor(t, "the hold taken after its caller gave up to be released", 20*time.Second, func() bool {
		return late.lateReleases.Load() > 0
	})
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if info, err := late.Current(ctx); err != nil || info != nil {
		t.Fatalf("the late hold is still there: %+v, %v", info, err)
	}
	waitFor(t, "the semaphore slot taken after its caller gave up to be released", 20*time.Second, func() bool {
		return lateSem.lateReleases.Load() > 0
	})
	if hs, err := lateSem.Holders(ctx); err != nil || len(hs) != 0 {
		t.Fatalf("the late semaphore hold is still there: %+v, %v", hs, err)
	}
	// Everything made too late was freed: the client goes once its children are closed.
	e.Close()
	follower.Close()
	unsampled.Close()
	l.Close()
	late.Close()
	lateSem.Close()
	sem.Close()
	c.Close()
	waitFor(t, "the client to be freed (no locker or elector made too late left)", 20*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ptr == nil
	})
}
