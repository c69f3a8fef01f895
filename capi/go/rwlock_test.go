package mongoelector

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newTestRWLock(t *testing.T, c *Client, key string, opts *RWLockOptions) *RWLock {
	t.Helper()
	if opts == nil {
		opts = &RWLockOptions{}
	}
	if opts.TTL == 0 {
		opts.TTL = 30 * time.Second
	}
	opts.MaxOffset = 2 * time.Second // the test server runs on this host; allow a loaded machine
	l, err := NewRWLock(bg, c, key, opts)
	if err != nil {
		t.Fatalf("NewRWLock(%q): %v", key, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// eventually polls cond every 10 ms for at most 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 10 s", what)
}

func TestDefaultRWLockOptions(t *testing.T) {
	d := DefaultRWLockOptions()
	if d.MaxReaders != 64 || d.DisableWriterPreference || d.TTL != 600*time.Second ||
		d.Collection != "mongorwlock" || d.DisableTimeParanoid || d.MaxOffset != 500*time.Millisecond ||
		d.AllowUnsafeServer || d.OpTimeout != 0 {
		t.Fatalf("DefaultRWLockOptions() = %+v", d)
	}
	if RWRead.String() != "read" || RWWrite.String() != "write" || RWNone.String() != "none" ||
		RWWaitingWriter.String() != "waiting_writer" || RWSide(9).String() != "unknown" {
		t.Fatal("RWSide names")
	}
}

func TestRWLockReadersThenWriter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *Client) {
		key := uniqueKey(t)
		opts := &RWLockOptions{MaxReaders: 3}
		r1, r2, r3 := newTestRWLock(t, c, key, opts), newTestRWLock(t, c, key, opts), newTestRWLock(t, c, key, opts)
		w, late := newTestRWLock(t, c, key, opts), newTestRWLock(t, c, key, opts)

		f1, err := r1.RLock(bg, WithTimeout(5*time.Second))
		if err != nil || f1 <= 0 {
			t.Fatalf("r1.RLock = %d, %v", f1, err)
		}
		f2, err := r2.TryRLock(bg)
		if err != nil || f2 <= f1 {
			t.Fatalf("r2.TryRLock = %d, %v (r1's token %d)", f2, err, f1)
		}
		f3, err := r3.RLock(bg)
		if err != nil || f3 <= f2 {
			t.Fatalf("r3.RLock = %d, %v", f3, err)
		}
		if side, _ := r1.Side(); side != RWRead {
			t.Fatalf("r1.Side() = %v", side)
		}
		if f, _ := r2.Fence(); f != f2 {
			t.Fatalf("r2.Fence() = %d, want %d", f, f2)
		}
		if _, err := late.TryRLock(bg); !errors.Is(err, ErrLockExists) || !strings.Contains(err.Error(), "read slots held") {
			t.Fatalf("a 4th reader with MaxReaders 3: %v", err)
		}
		if _, err := r1.TryRLock(bg); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("a second hold on one RWLock: %v", err)
		}
		hs, err := w.Holders(bg)
		if err != nil || len(hs.Readers) != 3 || hs.Writer != nil || hs.WaitingWriter != nil {
			t.Fatalf("Holders() = %+v, %v", hs, err)
		}
		if hs.Readers[0].UUID != r1.UUID() || hs.Readers[0].PID != int64(os.Getpid()) || hs.Readers[0].Fence != f1 {
			t.Fatalf("first reader %+v, r1 is %s", hs.Readers[0], r1.UUID())
		}

		// The writer: refused, timed out, then waiting (stopping new readers).
		if _, err := w.TryLock(bg); !errors.Is(err, ErrLockExists) || !strings.Contains(err.Error(), "held for reading") {
			t.Fatalf("TryLock with readers in: %v", err)
		}
		if _, err := w.Lock(bg, WithTimeout(200*time.Millisecond), WithStep(50*time.Millisecond)); !errors.Is(err, ErrTimeout) {
			t.Fatalf("bounded Lock with readers in: %v", err)
		}
		if err := r3.RUnlock(bg); err != nil {
			t.Fatal(err)
		}
		f3, err = late.TryRLock(bg) // the timed-out writer's mark is gone
		if err != nil {
			t.Fatalf("a reader after the writer gave up: %v", err)
		}
		if err := late.RUnlock(bg); err != nil {
			t.Fatal(err)
		}
		type result struct {
			fence int64
			err   error
		}
		done := make(chan result, 1)
		go func() {
			f, err := w.Lock(bg, WithTimeout(30*time.Second), WithStep(20*time.Millisecond))
			done <- result{f, err}
		}()
		eventually(t, "the waiting writer in Holders", func() bool {
			hs, err := r1.Holders(bg)
			return err == nil && hs.WaitingWriter != nil && hs.WaitingWriter.UUID == w.UUID()
		})
		if _, err := late.TryRLock(bg); !errors.Is(err, ErrLockExists) || !strings.Contains(err.Error(), "a writer is waiting") {
			t.Fatalf("a new reader while a writer waits: %v", err)
		}
		if renewed, exp, err := r1.Touch(bg); err != nil || !renewed || exp.IsZero() {
			t.Fatalf("a reader in keeps renewing: %v %v %v", renewed, exp, err)
		}
		if err := r1.Unlock(bg); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "RUnlock") {
			t.Fatalf("Unlock of a read hold: %v", err)
		}
		if err := r1.RUnlock(bg); err != nil {
			t.Fatal(err)
		}
		if err := r2.RUnlock(bg); err != nil {
			t.Fatal(err)
		}
		var got result
		select {
		case got = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the writer did not get the lock after the readers left")
		}
		if got.err != nil || got.fence <= f3 {
			t.Fatalf("w.Lock = %d, %v; every token before it is <= %d", got.fence, got.err, f3)
		}
		if side, _ := w.Side(); side != RWWrite {
			t.Fatalf("w.Side() = %v", side)
		}

		// While it writes: no reader, no other writer.
		if _, err := r1.TryRLock(bg); !errors.Is(err, ErrLockExists) || !strings.Contains(err.Error(), "held for writing") {
			t.Fatalf("TryRLock while written: %v", err)
		}
		if _, err := late.TryLock(bg); !errors.Is(err, ErrLockExists) {
			t.Fatalf("TryLock while written: %v", err)
		}
		if hs, err := r1.Holders(bg); err != nil || len(hs.Readers) != 0 || hs.Writer == nil || hs.Writer.Fence != got.fence {
			t.Fatalf("Holders() while written = %+v, %v", hs, err)
		}
		if err := w.RUnlock(bg); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("RUnlock of a write hold: %v", err)
		}
		if err := w.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		if err := w.Unlock(bg); err != nil {
			t.Fatalf("unlocking when holding nothing is not an error: %v", err)
		}
		if f, err := r1.TryRLock(bg); err != nil || f <= got.fence {
			t.Fatalf("a reader after the writer: %d, %v", f, err)
		}
	})
}

func TestRWLockBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *Client) {
		key := uniqueKey(t)
		for _, n := range []int{-1, 1001} {
			if _, err := NewRWLock(bg, c, key, &RWLockOptions{MaxReaders: n}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "max_readers") {
				t.Fatalf("MaxReaders %d: %v", n, err)
			}
		}
		if _, err := NewRWLock(bg, c, "", nil); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("empty key: %v", err)
		}
		if _, err := NewRWLock(bg, nil, key, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("nil client: %v", err)
		}
		a := newTestRWLock(t, c, key, &RWLockOptions{MaxReaders: 2})
		if _, err := a.TryRLock(bg); err != nil {
			t.Fatal(err)
		}
		b := newTestRWLock(t, c, key, &RWLockOptions{MaxReaders: 5})
		if _, err := b.RLock(bg, WithTimeout(time.Second)); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "max_readers 2") {
			t.Fatalf("another MaxReaders: %v", err)
		}
		if _, err := a.Lock(bg, WithForce()); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("WithForce: %v", err)
		}
		if _, err := a.Lock(bg, WithTimeout(0)); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("WithTimeout(0): %v", err)
		}
		// A key whose document is a semaphore's (same collection): refused by name.
		skey := uniqueKey(t)
		sem, err := NewSemaphore(bg, c, skey, &SemaphoreOptions{Limit: 2, Collection: "mongorwlock", MaxOffset: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer sem.Close()
		if _, err := sem.TryAcquire(bg); err != nil {
			t.Fatal(err)
		}
		onSem := newTestRWLock(t, c, skey, nil)
		if _, err := onSem.TryLock(bg); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "semaphore") {
			t.Fatalf("a read-write lock on a semaphore's key: %v", err)
		}
		if _, err := onSem.TryRHold(bg); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("a read-write lock's lease on a semaphore's key: %v", err)
		}
		// Still working: the reader holds, a writer gets the key after it.
		if err := a.RUnlock(bg); err != nil {
			t.Fatal(err)
		}
		if _, err := a.TryLock(bg); err != nil {
			t.Fatalf("TryLock after the bad calls: %v", err)
		}
	})
}

func TestRWLockContextAndClose(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	holder := newTestRWLock(t, c, key, nil)
	if _, err := holder.TryRLock(bg); err != nil {
		t.Fatal(err)
	}
	w := newTestRWLock(t, c, key, nil)
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	if _, err := w.Lock(ctx, WithStep(50*time.Millisecond)); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock ended by a deadline: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(bg)
	time.AfterFunc(100*time.Millisecond, cancel2)
	if _, err := w.Lock(ctx2, WithStep(50*time.Millisecond)); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock ended by cancel: %v", err)
	}
	// The cancelled writer's mark is gone: a new reader enters.
	r := newTestRWLock(t, c, key, nil)
	eventually(t, "a reader after the cancelled writer", func() bool {
		_, err := r.TryRLock(bg)
		return err == nil
	})

	// Close ends a waiting Lock with ErrClosed.
	errc := make(chan error, 1)
	go func() {
		_, err := w.Lock(bg, WithStep(50*time.Millisecond))
		errc <- err
	}()
	time.Sleep(150 * time.Millisecond)
	w.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Lock ended by Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the waiting Lock")
	}
	if _, err := w.Fence(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fence after Close: %v", err)
	}
	// Close releases: after the readers' Close, a writer gets the key at once.
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := newTestRWLock(t, c, key, nil)
	if _, err := w2.TryLock(bg); err != nil {
		t.Fatalf("TryLock after the readers' Close: %v", err)
	}
}

func TestRWLockLeases(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *Client) {
		key := uniqueKey(t)
		ttl := time.Second
		a := newTestRWLock(t, c, key, &RWLockOptions{TTL: ttl})
		b := newTestRWLock(t, c, key, &RWLockOptions{TTL: ttl})
		w := newTestRWLock(t, c, key, &RWLockOptions{TTL: ttl})
		la, err := a.RHold(bg, WithTimeout(5*time.Second))
		if err != nil {
			t.Fatalf("RHold: %v", err)
		}
		if _, err := a.TryRHold(bg); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("a second lease on one RWLock: %v", err)
		}
		lb, err := b.TryRHold(bg)
		if err != nil || lb.Fence() <= la.Fence() {
			t.Fatalf("TryRHold: %v", err)
		}
		time.Sleep(3 * ttl) // kept alive while idle
		if la.Lost() || lb.Lost() || la.Context().Err() != nil {
			t.Fatalf("read leases lost while idle: %v", context.Cause(la.Context()))
		}
		if _, err := w.TryHold(bg); !errors.Is(err, ErrLockExists) {
			t.Fatalf("TryHold with readers in: %v", err)
		}
		la.Close()
		if err := b.Close(); err != nil { // closes its lease first
			t.Fatal(err)
		}
		if lb.Context().Err() == nil || !errors.Is(context.Cause(lb.Context()), ErrLeaseClosed) {
			t.Fatalf("the lease of a closed RWLock: %v", context.Cause(lb.Context()))
		}
		lw, err := w.Hold(bg, WithTimeout(5*time.Second), WithStep(20*time.Millisecond))
		if err != nil || lw.Fence() <= lb.Fence() {
			t.Fatalf("Hold after the readers: %v", err)
		}
		if side, _ := w.Side(); side != RWWrite {
			t.Fatalf("w.Side() = %v", side)
		}
		if _, err := a.TryRLock(bg); !errors.Is(err, ErrLockExists) {
			t.Fatalf("TryRLock under a write lease: %v", err)
		}
		lw.Close()
		if _, err := a.TryRLock(bg); err != nil {
			t.Fatalf("TryRLock after the write lease: %v", err)
		}
	})
}

// Readers and writers from many goroutines: a writer is always alone, readers never
// exceed MaxReaders, every token is new and each holder's increase.
func TestRWLockContention(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	const maxReaders, workers, rounds = 3, 8, 8
	var readers, writers, maxSeen atomic.Int32
	contend(t, workers, rounds, 3*time.Millisecond, func(i int) contender {
		l := newTestRWLock(t, c, key, &RWLockOptions{MaxReaders: maxReaders})
		lock, unlock, count, other := l.RLock, l.RUnlock, &readers, &writers
		if i%3 == 0 {
			lock, unlock, count, other = l.Lock, l.Unlock, &writers, &readers
		}
		return contender{
			take: func() (int64, error) {
				return lock(bg, WithTimeout(60*time.Second), WithStep(10*time.Millisecond))
			},
			entered: func() error {
				n := count.Add(1)
				if count == &readers {
					atomicMax(&maxSeen, n)
				}
				if other.Load() != 0 || (count == &writers && n != 1) {
					return errors.New("a writer was not alone")
				}
				return nil
			},
			left: func() { count.Add(-1) },
			give: func() error { return unlock(bg) },
		}
	})
	if m := maxSeen.Load(); m > maxReaders {
		t.Fatalf("%d readers at once, MaxReaders %d", m, maxReaders)
	}
	t.Logf("at most %d readers at once (MaxReaders %d); writers alone", maxSeen.Load(), maxReaders)
}
