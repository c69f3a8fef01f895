package mongoelector

/*
#include <stdlib.h>
#include "mongoelector.h"
*/
import "C"

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync"
	"time"
)

// LockerOptions configures a Locker. The zero value gives the library's defaults.
type LockerOptions struct {
	Collection          string        // "" = "mongolocker"
	TTL                 time.Duration // 0 = 600 s; the lease of a lock
	DisableTimeParanoid bool          // skip the host/server clock check before acquiring
	MaxOffset           time.Duration // 0 = 500 ms; allowed host/server clock difference
	DeleteOnRelease     bool          // release deletes the document (mixed fleets, see README)
	AllowUnsafeServer   bool          // run on servers with non-atomic findAndModify (FerretDB)
}

// LockInfo is the current, unexpired lock document of a key.
type LockInfo struct {
	UUID    string
	Host    string
	PID     int64
	Created time.Time // server time
	Expire  time.Time // server time
	Fence   int64     // 0 if written by a node without fencing
}

// Locker is a distributed lock on one key. Safe for concurrent use (the C library
// serialises calls on one locker). Close frees it without releasing a held lock, which
// then expires at its TTL.
type Locker struct {
	g      guard
	ptr    *C.mongoelector_locker
	client *Client
	key    string

	leaseMu sync.Mutex
	lease   *Lease // the live lease (Hold), closed before the locker
}

// NewLocker creates a locker for key (non-empty UTF-8, at most 1024 bytes). It ensures
// the collection's TTL index (one round trip). opts may be nil.
func NewLocker(client *Client, key string, opts *LockerOptions) (*Locker, error) {
	if client == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "client is nil"}
	}
	if opts == nil {
		opts = &LockerOptions{}
	}
	ckey, err := cstring("key", key)
	if err != nil {
		return nil, err
	}
	defer freeC(ckey)
	var o C.mongoelector_locker_options
	C.mongoelector_locker_options_init(&o)
	if opts.Collection != "" {
		ccoll, err := cstring("collection", opts.Collection)
		if err != nil {
			return nil, err
		}
		defer freeC(ccoll)
		o.collection = ccoll
	}
	// Only 0 means "default": C rejects a negative TTL or MaxOffset, before any I/O.
	if opts.TTL != 0 {
		o.ttl_seconds = C.double(opts.TTL.Seconds())
	}
	if opts.DisableTimeParanoid {
		o.timeparanoid = 0
	}
	if opts.MaxOffset != 0 {
		o.max_offset_seconds = C.double(opts.MaxOffset.Seconds())
	}
	o.delete_on_release = cbool(opts.DeleteOnRelease)
	o.allow_unsafe_server = cbool(opts.AllowUnsafeServer)

	cptr, err := client.acquireChild()
	if err != nil {
		return nil, err
	}
	var ptr *C.mongoelector_locker
	err = call(func() C.mongoelector_status { return C.mongoelector_locker_new(cptr, ckey, &o, &ptr) })
	client.g.exit()
	if err != nil {
		client.childDone()
		return nil, err
	}
	l := &Locker{ptr: ptr, client: client, key: key}
	runtime.SetFinalizer(l, (*Locker).Close)
	return l, nil
}

// Key is the locked key.
func (l *Locker) Key() string { return l.key }

type acquireConfig struct {
	timeout time.Duration // < 0: none
	step    time.Duration
	force   bool
}

// AcquireOption tunes Acquire and TryAcquire.
type AcquireOption func(*acquireConfig)

// WithTimeout bounds a blocking Acquire (ErrTimeout). A context deadline bounds it too;
// the earlier wins.
func WithTimeout(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.timeout = d }
}

// WithStep sets the interval between attempts of a blocking Acquire (default 250 ms).
func WithStep(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.step = d } }

// WithForce takes the lock whoever holds it.
func WithForce() AcquireOption { return func(c *acquireConfig) { c.force = true } }

func newAcquireConfig(opts []AcquireOption) acquireConfig {
	c := acquireConfig{timeout: -1, step: 250 * time.Millisecond}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Acquire waits until it holds the lock and returns the fencing token, strictly
// greater than every token handed out before for this key. It stops waiting when ctx
// is done: the error then matches ErrCancelled and context.Canceled, or ErrTimeout and
// context.DeadlineExceeded. A ctx deadline maps to the C timeout.
func (l *Locker) Acquire(ctx context.Context, opts ...AcquireOption) (int64, error) {
	cfg := newAcquireConfig(opts)
	if cfg.timeout == 0 {
		return 0, &Error{Code: CodeInvalidArgument, Message: "timeout must be positive (or use TryAcquire)"}
	}
	var fence C.int64_t
	err := l.blockingWait(ctx, "acquire", cfg.timeout, func(timeout float64) error {
		return call(func() C.mongoelector_status {
			return C.mongoelector_locker_acquire(l.ptr, 1, C.double(timeout), C.double(cfg.step.Seconds()),
				cbool(cfg.force), &fence)
		})
	})
	if err != nil {
		return 0, err
	}
	return int64(fence), nil
}

// blockingWait runs wait (a blocking C call on this locker, given its timeout in
// seconds, < 0 for none) under ctx: the shorter of ctx's deadline and timeout bounds
// it, ctx's end cancels it, and the result maps to ErrCancelled/ErrTimeout wrapping the
// context's error. Shared by Acquire and Hold.
func (l *Locker) blockingWait(ctx context.Context, what string, timeoutOpt time.Duration,
	wait func(timeout float64) error) error {
	if err := ctx.Err(); err != nil {
		return contextError(err, what+" of "+l.key+" not started")
	}
	timeout := -1.0
	if timeoutOpt > 0 {
		timeout = timeoutOpt.Seconds()
	}
	ctxBound := false
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl).Seconds()
		if rem <= 0 {
			return contextError(context.DeadlineExceeded, what+" of "+l.key+" not started")
		}
		if timeout < 0 || rem < timeout {
			timeout, ctxBound = rem, true
		}
	}
	if !l.g.enter() {
		return closedError("locker")
	}
	defer l.g.exit()

	// The watcher cancels the C wait when ctx ends. It may fire just after the C call
	// returned; that cancel then stays pending in C and the next blocking wait consumes
	// it, which is why a CANCELLED with ctx still live is retried below.
	done := make(chan struct{})
	var wg sync.WaitGroup
	if ctx.Done() != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				C.mongoelector_locker_cancel(l.ptr)
			case <-done:
			}
		}()
	}
	var err error
	for attempt := 0; ; attempt++ {
		err = wait(timeout)
		if errors.Is(err, ErrCancelled) && ctx.Err() == nil && !l.g.isClosed() && attempt < 3 {
			continue // a stale cancel left by an earlier call
		}
		break
	}
	close(done)
	wg.Wait()
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Code == CodeCancelled && l.g.isClosed():
		return closedError("locker")
	case e.Code == CodeCancelled && ctx.Err() != nil:
		return contextError(ctx.Err(), e.Message)
	case e.Code == CodeTimeout && ctxBound:
		e.cause = context.DeadlineExceeded
	}
	return err
}

// contextError maps a context error to ErrCancelled or ErrTimeout, wrapping it.
func contextError(ctxErr error, msg string) error {
	code := CodeCancelled
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		code = CodeTimeout
	}
	return &Error{Code: code, Message: msg + ": " + ctxErr.Error(), cause: ctxErr}
}

// TryAcquire makes one attempt: the fencing token, or an error matching ErrLockHeld
// when another holds the lock. Only WithForce applies.
func (l *Locker) TryAcquire(opts ...AcquireOption) (int64, error) {
	cfg := newAcquireConfig(opts)
	var fence C.int64_t
	err := l.do(func() C.mongoelector_status {
		return C.mongoelector_locker_acquire(l.ptr, 0, -1, 0.25, cbool(cfg.force), &fence)
	})
	if err != nil {
		return 0, err
	}
	return int64(fence), nil
}

// Release releases this locker's lock. Not holding it is not an error.
func (l *Locker) Release() error { return l.release(false) }

// ForceRelease releases the lock whoever holds it.
func (l *Locker) ForceRelease() error { return l.release(true) }

func (l *Locker) release(force bool) error {
	return l.do(func() C.mongoelector_status { return C.mongoelector_locker_release(l.ptr, cbool(force)) })
}

// Touch renews a held, unexpired lock: renewed and the new expiry (server time), or
// false when this locker does not hold it any more.
func (l *Locker) Touch() (renewed bool, expire time.Time, err error) {
	var r C.int
	var ms C.int64_t
	if err = l.do(func() C.mongoelector_status { return C.mongoelector_locker_touch(l.ptr, &r, &ms) }); err != nil {
		return false, time.Time{}, err
	}
	if r == 0 {
		return false, time.Time{}, nil
	}
	return true, time.UnixMilli(int64(ms)), nil
}

func (l *Locker) do(fn func() C.mongoelector_status) error { return guarded(&l.g, "locker", fn) }

func (l *Locker) boolCall(fn func(*C.int) C.mongoelector_status) (bool, error) {
	return boolCall(&l.g, "locker", fn)
}

// Locked reports whether anyone holds an unexpired lock on the key (one round trip).
func (l *Locker) Locked() (bool, error) {
	return l.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_locker_locked(l.ptr, o) })
}

// Owned reports whether this locker holds the lock (one round trip).
func (l *Locker) Owned() (bool, error) {
	return l.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_locker_owned(l.ptr, o) })
}

// Fence is the fencing token of this locker's current hold, 0 when it holds nothing
// (local, no round trip). Guard writes with it: a resource that refuses tokens below
// the highest it has seen refuses every superseded holder.
func (l *Locker) Fence() (int64, error) {
	var f C.int64_t
	if err := l.do(func() C.mongoelector_status { return C.mongoelector_locker_fence(l.ptr, &f) }); err != nil {
		return 0, err
	}
	return int64(f), nil
}

// UUID is this locker's identity in the lock document.
func (l *Locker) UUID() (string, error) {
	// The string belongs to the handle: copy it while the guard keeps the handle alive.
	var uuid string
	err := l.do(func() C.mongoelector_status {
		var s *C.char
		st := C.mongoelector_locker_uuid(l.ptr, &s)
		if st == C.MONGOELECTOR_OK {
			uuid = C.GoString(s)
		}
		return st
	})
	return uuid, err
}

// VerifyTime measures server minus host clock; the error matches ErrClockOffset when
// the difference exceeds MaxOffset (the offset is returned in both cases).
func (l *Locker) VerifyTime() (time.Duration, error) {
	off := C.double(math.NaN())
	err := l.do(func() C.mongoelector_status { return C.mongoelector_locker_verify_time(l.ptr, &off) })
	if math.IsNaN(float64(off)) {
		return 0, err
	}
	return time.Duration(float64(off) * float64(time.Second)), err
}

// Current is the unexpired lock document of the key, nil when nobody holds it.
func (l *Locker) Current() (*LockInfo, error) {
	var info C.mongoelector_lock_info
	var found C.int
	if err := l.do(func() C.mongoelector_status { return C.mongoelector_locker_current(l.ptr, &info, &found) }); err != nil {
		return nil, err
	}
	if found == 0 {
		return nil, nil
	}
	return &LockInfo{
		UUID:    C.GoString(&info.uuid[0]),
		Host:    C.GoString(&info.host[0]),
		PID:     int64(info.pid),
		Created: time.UnixMilli(int64(info.created_ms)),
		Expire:  time.UnixMilli(int64(info.expire_ms)),
		Fence:   int64(info.fence),
	}, nil
}

// Close frees the locker; a blocking Acquire in progress returns ErrClosed. It does
// not release a held lock (that expires at its TTL): call Release first. Idempotent
// and safe for concurrent use.
func (l *Locker) Close() error {
	l.leaseMu.Lock()
	lease := l.lease
	l.leaseMu.Unlock()
	if lease != nil {
		lease.Close() // the C locker must outlive its lease
	}
	if !l.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(l, nil)
	// Wake a blocking Acquire so wait() does not hang; the C call is allowed
	// concurrently with others and the handle is still alive here.
	C.mongoelector_locker_cancel(l.ptr)
	l.g.wait()
	C.mongoelector_locker_free(l.ptr)
	l.ptr = nil
	l.client.childDone()
	return nil
}
