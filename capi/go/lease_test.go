package mongoelector

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLeaseHoldKeepsAliveAndLosesWhenTaken(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	ttl := time.Second
	a := newTestLocker(t, c, key, ttl)
	b := newTestLocker(t, c, key, ttl)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := a.Hold(ctx)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	if lease.Fence() <= 0 {
		t.Fatalf("fence %d", lease.Fence())
	}
	if _, err := a.TryHold(bg); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("second lease on one locker: %v", err)
	}
	// Kept alive while idle for 3 ttl, although ctx (which only bounded the wait) ends.
	cancel()
	time.Sleep(3 * ttl)
	if lease.Lost() || lease.Context().Err() != nil {
		t.Fatalf("lease lost while idle: %v", context.Cause(lease.Context()))
	}
	if owned, err := a.Owned(bg); err != nil || !owned {
		t.Fatalf("Owned = %v, %v", owned, err)
	}
	if _, err := b.TryHold(bg); !errors.Is(err, ErrLockExists) {
		t.Fatalf("TryHold of a held lock: %v", err)
	}
	if _, err := b.Hold(context.Background(), WithTimeout(300*time.Millisecond), WithStep(50*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Hold with timeout: %v", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := b.Hold(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Hold with ctx deadline: %v", err)
	}

	// Taken by force: the lease's Context is cancelled within about ttl/3.
	f2, err := b.TryAcquire(bg, WithForce())
	if err != nil || f2 <= lease.Fence() {
		t.Fatalf("forced acquire: %d, %v", f2, err)
	}
	start := time.Now()
	select {
	case <-lease.Context().Done():
	case <-time.After(3 * ttl):
		t.Fatal("lease not lost after the lock was taken")
	}
	if d := time.Since(start); d > ttl/3+500*time.Millisecond {
		t.Fatalf("loss noticed after %v", d)
	}
	if !errors.Is(context.Cause(lease.Context()), ErrLeaseLost) || !lease.Lost() {
		t.Fatalf("cause %v, lost %v", context.Cause(lease.Context()), lease.Lost())
	}
	// Closing a lost lease releases nothing: b keeps its hold.
	lease.Close()
	lease.Close()
	if owned, err := b.Owned(bg); err != nil || !owned {
		t.Fatalf("b.Owned = %v, %v", owned, err)
	}
	if err := b.Release(bg); err != nil {
		t.Fatal(err)
	}

	// Close releases: b takes the lock at once; the closed lease's cause is ErrLeaseClosed.
	l2, err := a.Hold(context.Background())
	if err != nil {
		t.Fatalf("Hold after close: %v", err)
	}
	l2.Close()
	if !errors.Is(context.Cause(l2.Context()), ErrLeaseClosed) {
		t.Fatalf("cause after Close: %v", context.Cause(l2.Context()))
	}
	l3, err := b.TryHold(bg)
	if err != nil {
		t.Fatalf("TryHold after release: %v", err)
	}
	if l3.Fence() <= f2 {
		t.Fatalf("fence %d after %d", l3.Fence(), f2)
	}
	// Closing the locker closes its lease first (and releases the lock).
	b.Close()
	if l3.Context().Err() == nil {
		t.Fatal("lease still live after its locker was closed")
	}
	if locked, err := a.Locked(bg); err != nil || locked {
		t.Fatalf("Locked after the locker closed its lease = %v, %v", locked, err)
	}
}
