package mongoelector

import (
	"context"
	"errors"
	"testing"
	"time"
)

// queueWaiter is one kind of fair hold for TestReadQueue: take makes the holder hold
// the key, wait blocks in a fair acquire until it holds (or ctx ends), uuid is the
// waiter's identity once it holds (after wait), release lets go of the holder's hold.
type queueWaiter struct {
	take, release func(t *testing.T)
	wait          func(ctx context.Context) error
	uuid          func(t *testing.T) string
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// twoOf makes a holder and a waiter with mk, closed when t ends.
func twoOf[T interface{ Close() error }](t *testing.T, mk func() (T, error)) (holder, waiter T) {
	t.Helper()
	for _, p := range []*T{&holder, &waiter} {
		v, err := mk()
		mustNil(t, err)
		t.Cleanup(func() { v.Close() })
		*p = v
	}
	return holder, waiter
}

// queueKinds makes, for each kind of fair queue, a holder and a fair waiter of key on c.
func queueKinds(c *Client) map[QueueOf]func(t *testing.T, key string) queueWaiter {
	return map[QueueOf]func(*testing.T, string) queueWaiter{
		QueueLock: func(t *testing.T, key string) queueWaiter {
			opts := &LockerOptions{TTL: 30 * time.Second, Fair: true}
			holder, waiter := twoOf(t, func() (*Locker, error) { return NewLocker(bg, c, key, opts) })
			return queueWaiter{
				take:    func(t *testing.T) { _, err := holder.TryAcquire(bg); mustNil(t, err) },
				release: func(t *testing.T) { mustNil(t, holder.Release(bg)) },
				wait: func(ctx context.Context) error {
					_, err := waiter.Acquire(ctx, WithStep(20*time.Millisecond))
					return err
				},
				uuid: func(t *testing.T) string {
					u, err := waiter.UUID()
					mustNil(t, err)
					return u
				},
			}
		},
		QueueSemaphore: func(t *testing.T, key string) queueWaiter {
			opts := &SemaphoreOptions{Limit: 1, TTL: 30 * time.Second, Fair: true}
			holder, waiter := twoOf(t, func() (*Semaphore, error) { return NewSemaphore(bg, c, key, opts) })
			return queueWaiter{
				take:    func(t *testing.T) { _, err := holder.TryAcquire(bg); mustNil(t, err) },
				release: func(t *testing.T) { mustNil(t, holder.Release(bg)) },
				wait: func(ctx context.Context) error {
					_, err := waiter.Acquire(ctx, WithStep(20*time.Millisecond))
					return err
				},
				// A Semaphore shows its identity in the holders once it holds.
				uuid: func(t *testing.T) string {
					hs, err := waiter.Holders(bg)
					mustNil(t, err)
					if len(hs) != 1 {
						t.Fatalf("semaphore holders after the waiter's turn: %+v", hs)
					}
					return hs[0].UUID
				},
			}
		},
		QueueRWLock: func(t *testing.T, key string) queueWaiter {
			opts := &RWLockOptions{TTL: 30 * time.Second, Fair: true}
			holder, waiter := twoOf(t, func() (*RWLock, error) { return NewRWLock(bg, c, key, opts) })
			return queueWaiter{
				take:    func(t *testing.T) { _, err := holder.TryLock(bg); mustNil(t, err) },
				release: func(t *testing.T) { mustNil(t, holder.Unlock(bg)) },
				wait: func(ctx context.Context) error {
					_, err := waiter.Lock(ctx, WithStep(20*time.Millisecond))
					return err
				},
				uuid: func(*testing.T) string { return waiter.UUID() },
			}
		},
	}
}

// A fair waiter blocked while another holds is listed by ReadQueue (its uuid, a
// ticket, an expiry after the reading's server time); before it queues and once it has
// its turn, nobody is. On the test server and on SQLite.
func TestReadQueue(t *testing.T) {
	backends := map[string]func(t *testing.T) *Client{
		"server": newTestClient,
		"sqlite": func(t *testing.T) *Client {
			c, err := NewClient("sqlite://"+t.TempDir()+"/locks.db", "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
	}
	for name, newClient := range backends {
		t.Run(name, func(t *testing.T) {
			c := newClient(t)
			for of, newWaiter := range queueKinds(c) {
				t.Run(of.String(), func(t *testing.T) {
					key := uniqueKey(t)
					read := func() *QueueStatus {
						t.Helper()
						st, err := ReadQueue(bg, c, of, "", key)
						if err != nil {
							t.Fatalf("ReadQueue(%v, %q): %v", of, key, err)
						}
						return st
					}
					if st := read(); len(st.Waiting) != 0 || st.Waiting == nil || st.ServerTime.IsZero() {
						t.Fatalf("no document yet: %+v", st)
					}
					w := newWaiter(t, key)
					w.take(t)
					if st := read(); len(st.Waiting) != 0 {
						t.Fatalf("held, nobody waiting: %+v", st)
					}
					ctx, cancel := context.WithCancel(bg)
					defer cancel()
					done := make(chan error, 1)
					go func() { done <- w.wait(ctx) }()

					// Queued: the listing itself says so, within a deadline.
					deadline := time.Now().Add(20 * time.Second)
					var st *QueueStatus
					for st = read(); len(st.Waiting) == 0; st = read() {
						select {
						case err := <-done:
							t.Fatalf("the waiter did not wait: %v", err)
						case <-time.After(10 * time.Millisecond):
						}
						if time.Now().After(deadline) {
							t.Fatal("the fair waiter was never listed")
						}
					}
					if len(st.Waiting) != 1 {
						t.Fatalf("one waiter, listed: %+v", st.Waiting)
					}
					queued := st.Waiting[0]
					if queued.Ticket <= 0 || !queued.Expires.After(st.ServerTime) || queued.UUID == "" {
						t.Fatalf("queued waiter %+v at %v", queued, st.ServerTime)
					}

					w.release(t)
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("the waiter's turn: %v", err)
						}
					case <-time.After(20 * time.Second):
						t.Fatal("the waiter never got its turn")
					}
					if u := w.uuid(t); queued.UUID != u {
						t.Fatalf("listed uuid %q, the waiter is %q", queued.UUID, u)
					}
					if st := read(); len(st.Waiting) != 0 {
						t.Fatalf("served, still listed: %+v", st.Waiting)
					}
				})
			}
		})
	}
}

func TestReadQueueInvalid(t *testing.T) {
	c, err := NewClient("sqlite://"+t.TempDir()+"/locks.db", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := ReadQueue(bg, c, QueueOf(7), "", "k"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown QueueOf: %v", err)
	}
	if _, err := ReadQueue(bg, c, QueueLock, "", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := ReadQueue(bg, nil, QueueLock, "", "k"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil client: %v", err)
	}
	c.Close()
	if _, err := ReadQueue(bg, c, QueueLock, "", "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed client: %v", err)
	}
}
