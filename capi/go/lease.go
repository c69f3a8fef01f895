package mongoelector

/*
#include <stdint.h>
#include <stdlib.h>
#include "mongoelector.h"

extern void mongoelectorGoOnLeaseLost(void *);

// The handle travels as an integer; only C turns it into the void* user_data.
static void me_set_lease_lost(mongoelector_lease_options *o, uintptr_t handle) {
  o->user_data = (void *)handle;
  o->on_lost = mongoelectorGoOnLeaseLost;
}
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"runtime/cgo"
	"time"
)

// ErrLeaseLost is the cause of a lost lease's Context (context.Cause).
var ErrLeaseLost = errors.New("mongoelector: lease lost")

// ErrLeaseClosed is the cause of a closed lease's Context.
var ErrLeaseClosed = errors.New("mongoelector: lease closed")

// Lease is a lock kept alive by the library (one renewer thread per process, renewing
// about every TTL/3) until Close. It is declared lost on this host's monotonic clock at
// its renew deadline (lease end minus a margin, before anyone else can take the lock),
// whether or not a renewal call still hangs, or as soon as a renewal finds the lock
// taken; loss is final. Context() is cancelled at that moment (as an etcd session's
// Done()), with context.Cause ErrLeaseLost. Safe for concurrent use.
type Lease struct {
	g      guard
	ptr    *C.mongoelector_lease
	locker *Locker
	handle cgo.Handle
	ctx    context.Context
	cancel context.CancelCauseFunc
	fence  int64
}

// Hold waits for the lock like Acquire (ctx and WithTimeout bound the wait, WithStep
// sets its interval; WithForce is refused) and keeps it alive until the Lease is
// closed. One live lease per locker (ErrInvalidArgument); closing the locker closes its
// lease first. The lease's Context does not derive from ctx: ctx only bounds the wait.
func (l *Locker) Hold(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	cfg := newAcquireConfig(opts)
	if cfg.force {
		return nil, &Error{Code: CodeInvalidArgument, Message: "Hold takes no WithForce"}
	}
	if cfg.timeout == 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "timeout must be positive (or use TryHold)"}
	}
	var lease *Lease
	err := l.blockingWait(ctx, "hold", cfg.timeout, func(timeout float64) error {
		var err error
		lease, err = l.hold(true, timeout, cfg.step)
		return err
	})
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// TryHold makes one attempt (an error matching ErrLockHeld when another holds the
// lock), then keeps the lock alive as Hold does.
func (l *Locker) TryHold() (*Lease, error) {
	if !l.g.enter() {
		return nil, closedError("locker")
	}
	defer l.g.exit()
	return l.hold(false, -1, 250*time.Millisecond)
}

// hold runs mongoelector_lease_acquire once (Hold's waiting and cancelling are
// blockingWait's).
func (l *Locker) hold(blocking bool, timeout float64, step time.Duration) (*Lease, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	lost := &leaseLost{cancel: func() { cancel(ErrLeaseLost) }}
	h := cgo.NewHandle(lost)
	var o C.mongoelector_lease_options
	C.mongoelector_lease_options_init(&o)
	o.blocking = cbool(blocking)
	o.timeout_seconds = C.double(timeout)
	o.step_seconds = C.double(step.Seconds())
	C.me_set_lease_lost(&o, C.uintptr_t(h))
	var ptr *C.mongoelector_lease
	err := call(func() C.mongoelector_status { return C.mongoelector_lease_acquire(l.ptr, &o, &ptr) })
	if err != nil {
		h.Delete()
		cancel(err)
		return nil, err
	}
	var fence C.int64_t
	C.mongoelector_lease_fence(ptr, &fence)
	lease := &Lease{ptr: ptr, locker: l, handle: h, ctx: ctx, cancel: cancel, fence: int64(fence)}
	l.leaseMu.Lock()
	l.lease = lease
	l.leaseMu.Unlock()
	runtime.SetFinalizer(lease, (*Lease).Close)
	return lease, nil
}

// Context is cancelled the moment the lease is lost (context.Cause: ErrLeaseLost) or
// closed (ErrLeaseClosed). Stop acting on the lock when it is done.
func (s *Lease) Context() context.Context { return s.ctx }

// Done is Context().Done().
func (s *Lease) Done() <-chan struct{} { return s.ctx.Done() }

// Fence is the fencing token of the lease's hold: pass it with every write the lock
// guards.
func (s *Lease) Fence() int64 { return s.fence }

// Lost reports whether the lease is lost (it never comes back).
func (s *Lease) Lost() bool {
	lost, err := boolCall(&s.g, "lease", func(o *C.int) C.mongoelector_status {
		return C.mongoelector_lease_lost(s.ptr, o)
	})
	return err == nil && lost
}

// Close stops keeping the lock alive and releases it (fenced; a lost lease is not
// released). Idempotent and safe for concurrent use.
func (s *Lease) Close() error {
	if !s.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(s, nil)
	s.g.wait()
	C.mongoelector_lease_free(s.ptr) // waits for a running on_lost
	s.ptr = nil
	s.handle.Delete()
	s.cancel(ErrLeaseClosed)
	s.locker.leaseMu.Lock()
	if s.locker.lease == s {
		s.locker.lease = nil
	}
	s.locker.leaseMu.Unlock()
	return nil
}
