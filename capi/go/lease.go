package mongoelector

/*
#include <stdint.h>
#include <stdlib.h>
#include "mongoelector.h"

extern void mongoelectorGoOnLeaseLost(void *);

// The handle travels as an integer; only C turns it into the void* user_data.
static mongoelector_status me_lease_acquire_with(mongoelector_locker *locker,
                                                 const mongoelector_acquire_options *acquire,
                                                 uintptr_t handle, mongoelector_lease **out) {
  return mongoelector_lease_acquire_with(locker, acquire, mongoelectorGoOnLeaseLost,
                                         (void *)handle, out);
}
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"runtime/cgo"
	"sync"
)

// ErrLeaseLost is the cause of a lost lease's Context (context.Cause).
var ErrLeaseLost = errors.New("mongoelector: lease lost")

// ErrLeaseClosed is the cause of a closed lease's Context.
var ErrLeaseClosed = errors.New("mongoelector: lease closed")

// Lease is a lock (Locker.Hold) or a side of a read-write lock (RWLock.RHold, Hold) kept
// alive by the library (a few renewer threads per process, renewing about every TTL/3,
// in batches) until Close. It is declared lost on this host's monotonic clock at
// its renew deadline (lease end minus a margin, before anyone else can take the lock),
// whether or not a renewal call still hangs, or as soon as a renewal finds the lock
// taken; loss is final. Lost() reads it from the deadline and the clock; Context() is
// cancelled when the library announces it (as an etcd session's Done()), with
// context.Cause ErrLeaseLost: at once, on a library callback thread, unless that pool is
// stuck in other callbacks. Safe for concurrent use.
type Lease struct {
	g      guard
	calls  leaseCalls
	detach func() // unregisters it from its holder (set by the holder; may be nil)
	handle cgo.Handle
	ctx    context.Context
	cancel context.CancelCauseFunc
	fence  int64
}

// leaseCalls are the C calls of one lease handle (a locker's, a read-write lock's).
type leaseCalls struct {
	fence func(*C.int64_t) C.mongoelector_status
	lost  func(*C.int) C.mongoelector_status
	free  func() // stops it and releases the hold (unless lost); waits for a running on_lost
}

// startLease makes a Lease: `acquire` calls a C lease acquire given h, the handle of
// its on_lost user data (mongoelectorGoOnLeaseLost), and returns the new lease's calls.
func startLease(acquire func(h C.uintptr_t) (leaseCalls, error)) (*Lease, error) {
	lctx, cancel := context.WithCancelCause(context.Background())
	lost := &leaseLost{cancel: func() { cancel(ErrLeaseLost) }}
	h := cgo.NewHandle(lost)
	calls, err := acquire(C.uintptr_t(h))
	if err != nil {
		h.Delete()
		cancel(err)
		return nil, err
	}
	var fence C.int64_t
	calls.fence(&fence)
	lease := &Lease{calls: calls, handle: h, ctx: lctx, cancel: cancel, fence: int64(fence)}
	runtime.SetFinalizer(lease, (*Lease).Close)
	return lease, nil
}

// Hold waits for the lock like Acquire (ctx and WithTimeout bound the wait, WithStep
// sets its interval; WithForce is refused) and keeps it alive until the Lease is
// closed. One live lease per locker (ErrInvalidArgument); closing the locker closes its
// lease first. The lease's Context does not derive from ctx: ctx only bounds the wait.
// A lease obtained after the caller gave up is closed (released) in the background.
func (l *Locker) Hold(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return l.hold(ctx, true, "hold of "+l.key, opts)
}

// TryHold makes one attempt (an error matching ErrLockExists when another holds the
// lock), then keeps the lock alive as Hold does.
func (l *Locker) TryHold(ctx context.Context) (*Lease, error) {
	return l.hold(ctx, false, "try-hold of "+l.key, nil)
}

func (l *Locker) hold(ctx context.Context, blocking bool, what string, opts []AcquireOption) (*Lease, error) {
	o, cfg, err := acquireOptions(blocking, opts)
	if err != nil {
		return nil, err
	}
	if cfg.force {
		return nil, invalidArgument("Hold takes no WithForce")
	}
	return withToken(ctx, l, what, &o, func() (*Lease, error) {
		var ptr *C.mongoelector_lease
		lease, err := startLease(func(h C.uintptr_t) (leaseCalls, error) {
			err := call(func() C.mongoelector_status { return C.me_lease_acquire_with(l.ptr, &o, h, &ptr) })
			return leaseCalls{
				fence: func(f *C.int64_t) C.mongoelector_status { return C.mongoelector_lease_fence(ptr, f) },
				lost:  func(v *C.int) C.mongoelector_status { return C.mongoelector_lease_lost(ptr, v) },
				free:  func() { C.mongoelector_lease_free(ptr) },
			}, err
		})
		if err != nil {
			return nil, err
		}
		// Registered while the locker's guard is held: Close closes it before the locker.
		lease.attach(&l.leaseMu, &l.lease)
		return lease, nil
	}, func(lease *Lease, err error) {
		if err == nil { // held after the caller gave up: let go of it
			lease.Close()
		}
	})
}

// attach makes s the live lease of its holder (*slot, guarded by mu) until it closes.
func (s *Lease) attach(mu *sync.Mutex, slot **Lease) {
	s.detach = func() {
		mu.Lock()
		if *slot == s {
			*slot = nil
		}
		mu.Unlock()
	}
	mu.Lock()
	*slot = s
	mu.Unlock()
}

// Context is cancelled when the lease's loss is announced (context.Cause: ErrLeaseLost)
// or when it is closed (ErrLeaseClosed). Stop acting on the lock when it is done (and
// check Lost() before a write: it is true from the deadline on, whatever any thread does).
func (s *Lease) Context() context.Context { return s.ctx }

// Done is Context().Done().
func (s *Lease) Done() <-chan struct{} { return s.ctx.Done() }

// Fence is the fencing token of the lease's hold: pass it with every write the lock
// guards.
func (s *Lease) Fence() int64 { return s.fence }

// Lost reports whether the lease is lost (it never comes back): true from its renew
// deadline on, read from the clock.
func (s *Lease) Lost() bool {
	var lost C.int
	err := local(&s.g, "lease", func() C.mongoelector_status { return s.calls.lost(&lost) })
	return err == nil && lost != 0
}

// Close stops keeping the lock alive and releases it (fenced; a lost lease is not
// released). Idempotent and safe for concurrent use.
func (s *Lease) Close() error {
	if !s.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(s, nil)
	s.g.wait()
	s.calls.free() // waits for a running on_lost
	s.handle.Delete()
	s.cancel(ErrLeaseClosed)
	if s.detach != nil {
		s.detach()
	}
	return nil
}
