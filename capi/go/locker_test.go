package mongoelector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServerInfo(t *testing.T) {
	c := newTestClient(t)
	name, version, err := c.ServerInfo(bg)
	if err != nil {
		t.Fatal(err)
	}
	if name == "" || version == "" {
		t.Fatalf("ServerInfo = %q %q", name, version)
	}
	t.Logf("server: %s %s", name, version)
}

func TestAcquireReleaseTouchAndFence(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	a := newTestLocker(t, c, key, 5*time.Second)
	b := newTestLocker(t, c, key, 5*time.Second)

	f1, err := a.Acquire(bg, WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Fence(); got != f1 || f1 <= 0 {
		t.Fatalf("Fence() = %d, Acquire returned %d", got, f1)
	}
	if owned, err := a.Owned(bg); err != nil || !owned {
		t.Fatalf("a.Owned() = %v, %v", owned, err)
	}
	if owned, err := b.Owned(bg); err != nil || owned {
		t.Fatalf("b.Owned() = %v, %v", owned, err)
	}
	if locked, err := b.Locked(bg); err != nil || !locked {
		t.Fatalf("b.Locked() = %v, %v", locked, err)
	}
	info, err := b.Current(bg)
	if err != nil || info == nil {
		t.Fatalf("Current() = %v, %v", info, err)
	}
	uuid, _ := a.UUID()
	if info.UUID != uuid || info.PID != int64(os.Getpid()) || info.Fence != f1 || !info.Expire.After(info.Created) {
		t.Fatalf("Current() = %+v, want holder %s pid %d fence %d", info, uuid, os.Getpid(), f1)
	}
	if _, err := b.TryAcquire(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("TryAcquire on a held lock: %v", err)
	}
	if got, _ := b.Fence(); got != 0 {
		t.Fatalf("non-holder Fence() = %d", got)
	}

	renewed, exp, err := a.Touch(bg)
	if err != nil || !renewed || !exp.After(info.Expire.Add(-time.Millisecond)) {
		t.Fatalf("Touch() = %v %v %v (old expiry %v)", renewed, exp, err, info.Expire)
	}
	if renewed, _, err := b.Touch(bg); err != nil || renewed {
		t.Fatalf("non-holder Touch() = %v, %v", renewed, err)
	}

	if err := a.Release(bg); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(bg); err != nil {
		t.Fatalf("releasing a lock not held is not an error: %v", err)
	}
	if info, err := b.Current(bg); err != nil || info != nil {
		t.Fatalf("Current() after release = %+v, %v", info, err)
	}
	f2, err := b.TryAcquire(bg)
	if err != nil || f2 <= f1 {
		t.Fatalf("TryAcquire after release = %d, %v (previous token %d)", f2, err, f1)
	}
	// force takes a held lock, with a greater token.
	f3, err := a.TryAcquire(bg, WithForce())
	if err != nil || f3 <= f2 {
		t.Fatalf("forced TryAcquire = %d, %v (previous token %d)", f3, err, f2)
	}
	if owned, _ := b.Owned(bg); owned {
		t.Fatal("b still owns after a forced takeover")
	}
	if err := b.ForceRelease(bg); err != nil {
		t.Fatal(err)
	}
	if locked, _ := a.Locked(bg); locked {
		t.Fatal("locked after ForceRelease")
	}
	if off, err := a.VerifyTime(bg); err != nil || off > time.Second || off < -time.Second {
		t.Fatalf("VerifyTime() = %v, %v", off, err)
	}
}

func TestShortTTLExpiresWithoutRenewal(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	a := newTestLocker(t, c, key, time.Second)
	b := newTestLocker(t, c, key, time.Second)
	fa, err := a.TryAcquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("before expiry: %v", err)
	}
	time.Sleep(1300 * time.Millisecond)
	fb, err := b.TryAcquire(bg)
	if err != nil {
		t.Fatalf("after expiry the lock must be free without any cleaner: %v", err)
	}
	if fb <= fa {
		t.Fatalf("takeover token %d not above %d", fb, fa)
	}
	if renewed, _, err := a.Touch(bg); err != nil || renewed {
		t.Fatalf("expired holder renewed its lock: %v, %v", renewed, err)
	}
}

func TestContentionBetweenProcesses(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	h := startHelper(t, "hold", "HELPER_KEY="+key, "HELPER_TTL=20s", "HELPER_HOLD=3s")
	childFence, _ := strconv.ParseInt(h.expect(t, "ACQUIRED", 30*time.Second), 10, 64)
	heldAt := time.Now()

	l := newTestLocker(t, c, key, 20*time.Second)
	_, err := l.TryAcquire(bg)
	if !errors.Is(err, ErrLockExists) {
		t.Fatalf("TryAcquire while another process holds: %v", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(h.cmd.Process.Pid)) {
		t.Errorf("held message %q does not name the holder's pid %d", err, h.cmd.Process.Pid)
	}
	info, err := l.Current(bg)
	if err != nil || info == nil || info.PID != int64(h.cmd.Process.Pid) || info.Fence != childFence {
		t.Fatalf("Current() = %+v, %v; want pid %d fence %d", info, err, h.cmd.Process.Pid, childFence)
	}
	start := time.Now()
	_, err = l.Acquire(bg, WithTimeout(500*time.Millisecond), WithStep(50*time.Millisecond))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("bounded Acquire while held: %v", err)
	}
	if el := time.Since(start); el < 450*time.Millisecond || el > 3*time.Second {
		t.Fatalf("Acquire with a 500 ms timeout returned after %v", el)
	}

	fence, err := l.Acquire(bg, WithTimeout(30*time.Second), WithStep(50*time.Millisecond))
	if err != nil {
		t.Fatalf("Acquire after the holder releases: %v", err)
	}
	if time.Since(heldAt) < 2500*time.Millisecond {
		t.Fatalf("acquired after %v, while the other process still held the lock", time.Since(heldAt))
	}
	if fence <= childFence {
		t.Fatalf("token %d not above the previous holder's %d", fence, childFence)
	}
	h.expect(t, "RELEASED", 5*time.Second)
	h.wait(t, 10*time.Second)
}

func TestMutualExclusionBetweenProcesses(t *testing.T) {
	testURI(t)
	key := uniqueKey(t)
	file := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(file, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const rounds = 15
	var hs []*helperProc
	for i := 0; i < 2; i++ {
		hs = append(hs, startHelper(t, "count", "HELPER_KEY="+key, "HELPER_TTL=30s", "HELPER_FILE="+file,
			"HELPER_N="+strconv.Itoa(rounds)))
	}
	for _, h := range hs {
		h.expect(t, "DONE", 120*time.Second)
		h.wait(t, 10*time.Second)
	}
	data, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != strconv.Itoa(2*rounds) || len(lines) != 2*rounds+1 {
		t.Fatalf("counter %s with %d log lines, want %d: a lost update means two holders at once",
			lines[0], len(lines)-1, 2*rounds)
	}
	pids := map[string]bool{}
	var last int64
	for _, line := range lines[1:] {
		var f int64
		parts := strings.Fields(line)
		f, _ = strconv.ParseInt(parts[0], 10, 64)
		if f <= last {
			t.Fatalf("fencing tokens not increasing in write order: %d after %d", f, last)
		}
		last = f
		pids[parts[1]] = true
	}
	if len(pids) != 2 {
		t.Fatalf("writes came from %d processes, want 2", len(pids))
	}
}

func TestExpiryTakeoverAfterHolderKilled(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	const ttl = 2 * time.Second
	h := startHelper(t, "hold", "HELPER_KEY="+key, "HELPER_TTL="+ttl.String())
	childFence, _ := strconv.ParseInt(h.expect(t, "ACQUIRED", 30*time.Second), 10, 64)
	acquiredAt := time.Now()
	h.kill(t)

	l := newTestLocker(t, c, key, 10*time.Second)
	if _, err := l.TryAcquire(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("a killed holder's lock is held until its ttl: %v", err)
	}
	fence, err := l.Acquire(bg, WithTimeout(15*time.Second), WithStep(50*time.Millisecond))
	if err != nil {
		t.Fatalf("takeover after expiry: %v", err)
	}
	el := time.Since(acquiredAt)
	t.Logf("took over %v after the killed holder acquired (ttl %v)", el, ttl)
	if el < ttl-300*time.Millisecond || el > ttl+2*time.Second {
		t.Fatalf("takeover after %v, want about the ttl %v", el, ttl)
	}
	if fence <= childFence {
		t.Fatalf("takeover token %d not above %d", fence, childFence)
	}
}

func TestAcquireStopsWhenContextEnds(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	h := startHelper(t, "hold", "HELPER_KEY="+key, "HELPER_TTL=20s", "HELPER_HOLD=6s")
	h.expect(t, "ACQUIRED", 30*time.Second)
	l := newTestLocker(t, c, key, 20*time.Second)

	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := l.Acquire(ctx)
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("cancelled Acquire returned after %v", el)
	}

	ctx, cancel2 := context.WithTimeout(bg, 400*time.Millisecond)
	defer cancel2()
	start = time.Now()
	_, err = l.Acquire(ctx)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past the context deadline: %v", err)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("Acquire with a 400 ms deadline returned after %v", el)
	}

	if _, err := l.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with an expired context: %v", err)
	}

	// Cancels must not leak into the next acquire: this one waits for the release.
	fence, err := l.Acquire(bg, WithTimeout(30*time.Second))
	if err != nil || fence <= 0 {
		t.Fatalf("Acquire after cancelled ones: %d, %v", fence, err)
	}
	h.wait(t, 10*time.Second)
}

// Many goroutines, one locker: the race detector checks the Go side, C serialises.
func TestConcurrentUseAndClose(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	l, err := NewLocker(bg, c, key, &LockerOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				_, err := l.TryAcquire(bg)
				if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrLockExists) {
					t.Errorf("TryAcquire: %v", err)
				}
				if _, err := l.Fence(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("Fence: %v", err)
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); l.Close() }()
	}
	wg.Wait()

	for name, fn := range map[string]func() error{
		"TryAcquire": func() error { _, err := l.TryAcquire(bg); return err },
		"Acquire":    func() error { _, err := l.Acquire(bg); return err },
		"Release":    func() error { return l.Release(bg) },
		"Touch":      func() error { _, _, err := l.Touch(bg); return err },
		"Locked":     func() error { _, err := l.Locked(bg); return err },
		"Owned":      func() error { _, err := l.Owned(bg); return err },
		"Fence":      func() error { _, err := l.Fence(); return err },
		"Current":    func() error { _, err := l.Current(bg); return err },
		"UUID":       func() error { _, err := l.UUID(); return err },
		"VerifyTime": func() error { _, err := l.VerifyTime(bg); return err },
	} {
		if err := fn(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed locker: %v", name, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close is idempotent: %v", err)
	}
}

func TestCloseInterruptsBlockingAcquire(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	holder := newTestLocker(t, c, key, 20*time.Second)
	if _, err := holder.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	l, err := NewLocker(bg, c, key, &LockerOptions{TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { _, err := l.Acquire(bg); res <- err }()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	l.Close()
	select {
	case err := <-res:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Acquire interrupted by Close: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not interrupt a blocking Acquire")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Close took %v", el)
	}
}

// Lockers keep their client usable after the client's Close (the C client is freed
// only with the last child).
func TestClientCloseKeepsChildrenWorking(t *testing.T) {
	c, err := NewClient(testURI(t), testDB)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLocker(bg, c, uniqueKey(t), &LockerOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := l.TryAcquire(bg); err != nil {
		t.Fatalf("locker after its client was closed: %v", err)
	}
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if c.ptr != nil {
		t.Fatal("client not freed after its last locker closed")
	}
}

// Close releases a lock the locker still holds: `defer lock.Close()` never leaves the key
// held for a TTL (here 60 s): another locker takes it at once.
func TestCloseReleasesAHeldLock(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	a := newTestLocker(t, c, key, time.Minute)
	b := newTestLocker(t, c, key, time.Minute)
	if _, err := a.Acquire(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("TryAcquire while held: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := b.TryAcquire(bg); err != nil {
		t.Fatalf("TryAcquire after the holder's Close: %v (the lock was left held)", err)
	}
	if err := a.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}
