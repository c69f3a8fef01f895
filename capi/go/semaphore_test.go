package mongoelector

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func newTestSemaphore(t *testing.T, c *Client, key string, limit int, ttl time.Duration) *Semaphore {
	t.Helper()
	s, err := NewSemaphore(bg, c, key, &SemaphoreOptions{Limit: limit, TTL: ttl})
	if err != nil {
		t.Fatalf("NewSemaphore(%q): %v", key, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDefaultSemaphoreOptions(t *testing.T) {
	d := DefaultSemaphoreOptions()
	if d.Limit != 1 || d.TTL != 600*time.Second || d.Collection != "mongosemaphore" ||
		d.DisableTimeParanoid || d.MaxOffset != 500*time.Millisecond || d.AllowUnsafeServer {
		t.Fatalf("DefaultSemaphoreOptions() = %+v", d)
	}
}

func TestSemaphoreLimitFencesAndHolders(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	a := newTestSemaphore(t, c, key, 2, 10*time.Second)
	b := newTestSemaphore(t, c, key, 2, 10*time.Second)
	x := newTestSemaphore(t, c, key, 2, 10*time.Second)

	fa, err := a.Acquire(bg, WithTimeout(5*time.Second))
	if err != nil || fa <= 0 {
		t.Fatalf("a.Acquire = %d, %v", fa, err)
	}
	fb, err := b.TryAcquire(bg)
	if err != nil || fb <= fa {
		t.Fatalf("b.TryAcquire = %d, %v (a's token %d)", fb, err, fa)
	}
	if got, _ := a.Fence(); got != fa {
		t.Fatalf("a.Fence() = %d, want %d", got, fa)
	}
	if _, err := x.TryAcquire(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("TryAcquire with every slot held: %v", err)
	}
	start := time.Now()
	if _, err := x.Acquire(bg, WithTimeout(200*time.Millisecond), WithStep(50*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("bounded Acquire with every slot held: %v", err)
	}
	if el := time.Since(start); el < 150*time.Millisecond || el > 3*time.Second {
		t.Fatalf("Acquire with a 200 ms timeout returned after %v", el)
	}
	if got, _ := x.Fence(); got != 0 {
		t.Fatalf("non-holder Fence() = %d", got)
	}

	hs, err := x.Holders(bg)
	if err != nil || len(hs) != 2 {
		t.Fatalf("Holders() = %+v, %v; want 2", hs, err)
	}
	fences := map[int64]bool{}
	for _, h := range hs {
		fences[h.Fence] = true
		if h.PID != int64(os.Getpid()) || h.UUID == "" || h.Host == "" || !h.Expires.After(h.Created) {
			t.Fatalf("holder %+v", h)
		}
	}
	if !fences[fa] || !fences[fb] || hs[0].UUID == hs[1].UUID {
		t.Fatalf("Holders() = %+v, want the holds %d and %d", hs, fa, fb)
	}

	renewed, exp, err := a.Touch(bg)
	if err != nil || !renewed || exp.IsZero() {
		t.Fatalf("a.Touch() = %v %v %v", renewed, exp, err)
	}
	if renewed, _, err := x.Touch(bg); err != nil || renewed {
		t.Fatalf("non-holder Touch() = %v, %v", renewed, err)
	}

	if err := a.Release(bg); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(bg); err != nil {
		t.Fatalf("releasing a slot not held is not an error: %v", err)
	}
	if got, _ := a.Fence(); got != 0 {
		t.Fatalf("Fence() after release = %d", got)
	}
	fx, err := x.Acquire(bg, WithTimeout(5*time.Second), WithStep(50*time.Millisecond))
	if err != nil || fx <= fb {
		t.Fatalf("Acquire after a release = %d, %v (previous tokens %d, %d)", fx, err, fa, fb)
	}
	if hs, err := a.Holders(bg); err != nil || len(hs) != 2 {
		t.Fatalf("Holders() after the handover = %+v, %v", hs, err)
	}
	// One slot per handle.
	if _, err := x.TryAcquire(bg); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("TryAcquire while holding: %v", err)
	}
	if _, err := a.TryAcquire(bg, WithForce()); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("TryAcquire WithForce: %v", err)
	}
}

func TestSemaphoreLimitMismatch(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	a := newTestSemaphore(t, c, key, 2, 10*time.Second)
	if _, err := a.TryAcquire(bg); err != nil { // creates the key's document with limit 2
		t.Fatal(err)
	}
	b := newTestSemaphore(t, c, key, 3, 10*time.Second)
	if _, err := b.TryAcquire(bg); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("TryAcquire with limit 3 on a limit-2 key: %v", err)
	}
	if _, err := b.Acquire(bg, WithTimeout(time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Acquire with limit 3 on a limit-2 key: %v", err)
	}
	if _, err := NewSemaphore(bg, c, key, &SemaphoreOptions{Limit: -1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewSemaphore with limit -1: %v", err)
	}
}

func TestSemaphoreCloseReleases(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	a, err := NewSemaphore(bg, c, key, &SemaphoreOptions{TTL: time.Minute}) // limit 1
	if err != nil {
		t.Fatal(err)
	}
	b := newTestSemaphore(t, c, key, 1, time.Minute)
	fa, err := a.TryAcquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("TryAcquire of a held limit-1 semaphore: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Fence(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fence after Close: %v", err)
	}
	if _, err := a.TryAcquire(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryAcquire after Close: %v", err)
	}
	fb, err := b.TryAcquire(bg)
	if err != nil || fb <= fa {
		t.Fatalf("TryAcquire after the holder's Close = %d, %v (its token %d): Close must release", fb, err, fa)
	}
}

func TestSemaphoreAcquireContextAndClose(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	holder := newTestSemaphore(t, c, key, 1, time.Minute)
	if _, err := holder.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	w := newTestSemaphore(t, c, key, 1, time.Minute)

	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	if _, err := w.Acquire(ctx, WithStep(50*time.Millisecond)); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire ended by a deadline: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(bg)
	time.AfterFunc(100*time.Millisecond, cancel2)
	if _, err := w.Acquire(ctx2, WithStep(50*time.Millisecond)); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire ended by cancel: %v", err)
	}

	// Close ends a blocking Acquire with ErrClosed.
	errc := make(chan error, 1)
	go func() {
		_, err := w.Acquire(bg, WithStep(50*time.Millisecond))
		errc <- err
	}()
	time.Sleep(150 * time.Millisecond)
	w.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Acquire ended by Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the blocking Acquire")
	}
	if hs, err := holder.Holders(bg); err != nil || len(hs) != 1 {
		t.Fatalf("Holders() = %+v, %v; want only the first holder", hs, err)
	}
}

func TestSemaphoreContention(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	const limit, workers, rounds = 3, 8, 10
	var current, maxSeen atomic.Int32
	contend(t, workers, rounds, 5*time.Millisecond, func(int) contender {
		s := newTestSemaphore(t, c, key, limit, 30*time.Second)
		return contender{
			take: func() (int64, error) {
				return s.Acquire(bg, WithTimeout(60*time.Second), WithStep(20*time.Millisecond))
			},
			entered: func() error { atomicMax(&maxSeen, current.Add(1)); return nil },
			left:    func() { current.Add(-1) },
			give:    func() error { return s.Release(bg) },
		}
	})
	if m := maxSeen.Load(); m > limit {
		t.Fatalf("%d holders at once on a limit-%d semaphore", m, limit)
	}
	t.Logf("at most %d holders at once (limit %d)", maxSeen.Load(), limit)
}
