package mongoelector

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fair lockers on memory:// with a fake clock: a holder, then waiter A (retrying every
// 10 s), then waiter B (every 250 ms). The holder releases; one second later B looks
// again, long before A. Fair: B is behind A in the queue and keeps waiting, a TryAcquire
// is refused while both wait, A gets the lock at its next look and B after A. Not fair: B
// takes the free lock first.
func TestFairLockerFake(t *testing.T) {
	for _, fair := range []bool{true, false} {
		clock, _, c := fakeWorld(t)
		key := uniqueKey(t)
		opts := &LockerOptions{TTL: 30 * time.Second, Fair: fair}
		newLocker := func() *Locker {
			l, err := NewLocker(bg, c, key, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}
		holder, a, b, late := newLocker(), newLocker(), newLocker(), newLocker()
		first, err := holder.TryAcquire(bg)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var turns []string
		type result struct {
			fence int64
			err   error
		}
		wait := func(name string, l *Locker, step time.Duration) chan result {
			n, _ := clock.WaitForWaiters(0, 0)
			got := make(chan result, 1)
			go func() {
				f, err := l.Acquire(bg, WithStep(step))
				if err == nil {
					mu.Lock()
					turns = append(turns, name)
					mu.Unlock()
				}
				got <- result{f, err}
			}()
			if _, err := clock.WaitForWaiters(n+1, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			return got
		}
		gotA := wait("A", a, 10*time.Second)
		gotB := wait("B", b, 250*time.Millisecond)
		if err := holder.Release(bg); err != nil {
			t.Fatal(err)
		}
		if fair {
			_, err := late.TryAcquire(bg)
			if !errors.Is(err, ErrLockExists) || !strings.Contains(err.Error(), "2 waiter(s)") {
				t.Fatalf("fair: a latecomer passed the queued waiters: %v", err)
			}
		}
		mustAdvance(t, clock, time.Second) // B looks again, A does not yet
		var ra, rb result
		if fair {
			if owned, err := b.Owned(bg); err != nil || owned {
				t.Fatalf("fair: B passed A: owned %v, %v", owned, err)
			}
			mustAdvance(t, clock, 10*time.Second) // A's turn
			ra = <-gotA
			if owned, err := b.Owned(bg); err != nil || owned {
				t.Fatalf("fair: B holds with A: owned %v, %v", owned, err)
			}
			a.Release(bg)
			mustAdvance(t, clock, time.Second)
			rb = <-gotB
			b.Release(bg)
		} else {
			rb = <-gotB
			b.Release(bg)
			mustAdvance(t, clock, 10*time.Second)
			ra = <-gotA
			a.Release(bg)
		}
		if ra.err != nil || rb.err != nil || ra.fence <= first || rb.fence <= first {
			t.Fatalf("fair %v: A %d %v, B %d %v (holder had %d)", fair, ra.fence, ra.err, rb.fence, rb.err, first)
		}
		want := "B A"
		if fair {
			want = "A B"
		}
		if got := strings.Join(turns, " "); got != want {
			t.Fatalf("fair %v: turns %q, want %q", fair, got, want)
		}
	}
	if DefaultLockerOptions().Fair {
		t.Fatal("Fair on by default")
	}
}
