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
	"sync/atomic"
	"time"
)

// LockerOptions configures a Locker. Zero fields (nil for the *bool ones) take the
// library's defaults, which mongoelector_locker_config_init defines for every binding
// (DefaultLockerOptions shows them).
type LockerOptions struct {
	Collection          string        // "" = default ("mongolocker")
	TTL                 time.Duration // 0 = default (600 s); the lease of a lock
	DisableTimeParanoid bool          // skip the host/server clock check before acquiring
	MaxOffset           time.Duration // 0 = default (500 ms); allowed host/server clock difference
	// DeleteOnRelease: release deletes the lock document instead of marking it free, so
	// that nodes of the original mongoelector 1.0.2 take over at once (mixed fleets, see
	// the README). nil = default (false for lockers).
	DeleteOnRelease *bool
	// OpTimeout bounds one round trip (server selection, connect, socket, maxTimeMS).
	// 0 = default (TTL/10 clamped to [100 ms, 5 s]); else at most TTL/2.
	OpTimeout         time.Duration
	AllowUnsafeServer bool // run on servers with non-atomic findAndModify (FerretDB)
	// Fair queues a blocking Acquire that finds the lock held in the key's queue, served
	// in arrival order (a waiter that dies holds the queue up for at most one TTL; a
	// timeout or a cancel leaves the queue). Every acquire of a fair locker honours the
	// live queue: TryAcquire while others wait returns ErrLockExists, naming the waiters.
	// A locker without Fair does not queue and may pass them: make every locker of the
	// key fair.
	Fair bool
}

// DefaultLockerOptions is the library's default locker configuration (from
// mongoelector_locker_config_init), every field filled in.
func DefaultLockerOptions() LockerOptions {
	var c C.mongoelector_locker_config
	if st := C.mongoelector_locker_config_init(&c, C.MONGOELECTOR_LOCKER_CONFIG_VERSION); st != C.MONGOELECTOR_OK {
		panic("mongoelector_locker_config_init failed: " + Status(st).String())
	}
	coll := "mongolocker" // the C default is NULL, documented as "mongolocker"
	if c.collection != nil {
		coll = C.GoString(c.collection)
	}
	return LockerOptions{
		Collection:          coll,
		TTL:                 fromSeconds(c.ttl_seconds),
		DisableTimeParanoid: c.timeparanoid == 0,
		MaxOffset:           fromSeconds(c.max_offset_seconds),
		DeleteOnRelease:     Bool(c.delete_on_release != 0),
		OpTimeout:           fromSeconds(c.op_timeout_seconds),
		AllowUnsafeServer:   c.allow_unsafe_server != 0,
		Fair:                c.fair != 0,
	}
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

// Locker is a distributed lock on one key. Safe for concurrent use: while an Acquire
// waits, the other methods answer (the C library does not hold the locker during the
// wait). Close frees it without releasing a held lock, which then expires at its TTL.
type Locker struct {
	g       guard
	ptr     *C.mongoelector_locker
	client  *Client
	key     string
	closing chan struct{} // closed by Close: cancels the waits in flight

	// Holds released in the background because their acquire succeeded after its
	// caller gave up (tests).
	lateReleases atomic.Int32

	leaseMu sync.Mutex
	lease   *Lease // the live lease (Hold), closed before the locker
}

// NewLocker creates a locker for key (non-empty UTF-8, at most 1024 bytes). It ensures
// the collection's TTL index (one round trip, bounded by ctx). opts may be nil.
func NewLocker(ctx context.Context, client *Client, key string, opts *LockerOptions) (*Locker, error) {
	if client == nil {
		return nil, invalidArgument("client is nil")
	}
	if opts == nil {
		opts = &LockerOptions{}
	}
	var cfg C.mongoelector_locker_config
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_locker_config_init(&cfg, C.MONGOELECTOR_LOCKER_CONFIG_VERSION)
	}); err != nil {
		return nil, err
	}
	var cstrs []*C.char
	freeAll := func() {
		for _, p := range cstrs {
			freeC(p)
		}
	}
	ckey, err := cstring("key", key)
	if err != nil {
		return nil, err
	}
	cstrs = append(cstrs, ckey)
	if opts.Collection != "" {
		ccoll, err := cstring("collection", opts.Collection)
		if err != nil {
			freeAll()
			return nil, err
		}
		cstrs = append(cstrs, ccoll)
		cfg.collection = ccoll
	}
	// Only 0 means "default": C rejects a negative TTL, MaxOffset or OpTimeout before any I/O.
	if opts.TTL != 0 {
		cfg.ttl_seconds = seconds(opts.TTL)
	}
	if opts.DisableTimeParanoid {
		cfg.timeparanoid = 0
	}
	if opts.MaxOffset != 0 {
		cfg.max_offset_seconds = seconds(opts.MaxOffset)
	}
	if opts.DeleteOnRelease != nil {
		cfg.delete_on_release = cbool(*opts.DeleteOnRelease)
	}
	if opts.OpTimeout != 0 {
		cfg.op_timeout_seconds = seconds(opts.OpTimeout)
	}
	if opts.AllowUnsafeServer {
		cfg.allow_unsafe_server = 1
	}
	cfg.fair = cbool(opts.Fair)

	ptr, err := newChild(ctx, client, "new locker for "+key, func(cptr *C.mongoelector_client) (*C.mongoelector_locker, error) {
		var p *C.mongoelector_locker
		err := call(func() C.mongoelector_status { return C.mongoelector_locker_new_with(cptr, ckey, &cfg, &p) })
		return p, err
	}, func(p *C.mongoelector_locker) { C.mongoelector_locker_free(p) }, freeAll, nil)
	if err != nil {
		return nil, err
	}
	l := &Locker{ptr: ptr, client: client, key: key, closing: make(chan struct{})}
	runtime.SetFinalizer(l, (*Locker).Close)
	return l, nil
}

// Key is the locked key.
func (l *Locker) Key() string { return l.key }

type acquireConfig struct {
	timeout *time.Duration
	step    *time.Duration
	force   bool
}

// AcquireOption tunes Acquire, TryAcquire, Hold and TryHold (of a Locker), Acquire and
// TryAcquire of a Semaphore, and RLock, Lock, RHold and Hold of an RWLock.
type AcquireOption func(*acquireConfig)

// WithTimeout bounds a blocking Acquire or Hold (ErrTimeout); d < 0 means no bound. A
// context deadline bounds it too (ErrTimeout wrapping context.DeadlineExceeded); the
// earlier wins.
func WithTimeout(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.timeout = &d }
}

// WithStep sets the interval between attempts of a blocking Acquire or Hold (default:
// the library's, 250 ms).
func WithStep(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.step = &d } }

// WithForce takes the lock whoever holds it (not for Hold, a Semaphore or an RWLock).
func WithForce() AcquireOption { return func(c *acquireConfig) { c.force = true } }

// cancelToken is a C per-call cancel token cancelled when ctx ends or the locker closes.
type cancelToken struct {
	ptr  *C.mongoelector_cancel_token
	stop chan struct{}
	wg   sync.WaitGroup
}

func newCancelToken(ctx context.Context, closing <-chan struct{}) (*cancelToken, error) {
	t := &cancelToken{stop: make(chan struct{})}
	if err := call(func() C.mongoelector_status { return C.mongoelector_cancel_token_new(&t.ptr) }); err != nil {
		return nil, err
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		select {
		case <-ctx.Done():
		case <-closing:
		case <-t.stop:
			return
		}
		C.mongoelector_cancel_token_cancel(t.ptr)
	}()
	return t, nil
}

// free stops the watcher and frees the token: only once the call given it returned.
func (t *cancelToken) free() {
	close(t.stop)
	t.wg.Wait()
	C.mongoelector_cancel_token_free(t.ptr)
}

// acquireOptions builds the C options of one acquire: the library's defaults
// (mongoelector_acquire_options_init) with opts applied.
func acquireOptions(blocking bool, opts []AcquireOption) (C.mongoelector_acquire_options, acquireConfig, error) {
	var cfg acquireConfig
	for _, o := range opts {
		o(&cfg)
	}
	var o C.mongoelector_acquire_options
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_acquire_options_init(&o, C.MONGOELECTOR_ACQUIRE_OPTIONS_VERSION)
	}); err != nil {
		return o, cfg, err
	}
	o.blocking = cbool(blocking)
	o.force = cbool(cfg.force)
	if blocking {
		if cfg.timeout != nil {
			switch {
			case *cfg.timeout == 0:
				return o, cfg, invalidArgument("timeout must be positive (or use TryAcquire/TryHold)")
			case *cfg.timeout > 0:
				o.timeout_seconds = seconds(*cfg.timeout)
			default:
				o.timeout_seconds = -1
			}
		}
		if cfg.step != nil {
			o.step_seconds = seconds(*cfg.step)
		}
	}
	return o, cfg, nil
}

// withToken runs one call given a per-call cancel token (acquire, lease acquire) under
// ctx: the token is cancelled when ctx ends or the locker closes, so the C wait ends
// too, and the caller returns at once when ctx ends (runCtx). late cleans up a success
// that came after the caller gave up.
func withToken[T any](ctx context.Context, l *Locker, what string, o *C.mongoelector_acquire_options,
	op func() (T, error), late func(T, error)) (T, error) {
	return withTokenOn(ctx, &l.g, l.closing, "locker", what, o, op, late)
}

// withTokenOn is withToken for any handle: g keeps it alive, closing is closed by its
// Close, handle names it in ErrClosed errors.
func withTokenOn[T any](ctx context.Context, g *guard, closing <-chan struct{}, handle, what string,
	o *C.mongoelector_acquire_options, op func() (T, error), late func(T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, contextError(err, what)
	}
	if !g.enter() {
		return zero, closedError(handle)
	}
	tok, err := newCancelToken(ctx, closing)
	if err != nil {
		g.exit()
		return zero, err
	}
	o.cancel = tok.ptr
	v, err := runCtx(ctx, what, op, late, func() {
		tok.free()
		g.exit()
	})
	if err != nil && errors.Is(err, ErrCancelled) {
		var e *Error
		if errors.As(err, &e) && e.cause == nil { // the C call's CANCELLED, not runCtx's
			if ctx.Err() != nil {
				return v, contextError(ctx.Err(), what)
			}
			if g.isClosed() {
				return v, closedError(handle)
			}
		}
	}
	return v, err
}

// Acquire waits until it holds the lock and returns the fencing token, strictly
// greater than every token handed out before for this key. It stops waiting when ctx
// is done (within about 100 ms in the library, at once for the caller): the error then
// matches ErrCancelled and context.Canceled, or ErrTimeout and
// context.DeadlineExceeded. A lock the library obtains after the caller gave up is
// released in the background. Close of the locker ends the wait with ErrClosed.
func (l *Locker) Acquire(ctx context.Context, opts ...AcquireOption) (int64, error) {
	return l.acquire(ctx, true, "acquire of "+l.key, opts)
}

// TryAcquire makes one attempt: the fencing token, or an error matching ErrLockExists
// when another holds the lock. Only WithForce applies.
func (l *Locker) TryAcquire(ctx context.Context, opts ...AcquireOption) (int64, error) {
	return l.acquire(ctx, false, "try-acquire of "+l.key, opts)
}

func (l *Locker) acquire(ctx context.Context, blocking bool, what string, opts []AcquireOption) (int64, error) {
	o, _, err := acquireOptions(blocking, opts)
	if err != nil {
		return 0, err
	}
	return withToken(ctx, l, what, &o, func() (int64, error) {
		var fence C.int64_t
		err := call(func() C.mongoelector_status { return C.mongoelector_locker_acquire_with(l.ptr, &o, &fence) })
		return int64(fence), err
	}, func(_ int64, err error) {
		if err == nil { // taken after the caller gave up: nobody will release it
			l.lateRelease()
		}
	})
}

func (l *Locker) lateRelease() {
	call(func() C.mongoelector_status { return C.mongoelector_locker_release(l.ptr, 0) })
	l.lateReleases.Add(1)
}

func (l *Locker) do(ctx context.Context, what string, fn func() C.mongoelector_status) error {
	return guarded(ctx, &l.g, "locker", what+" of "+l.key, fn)
}

// Release releases this locker's lock. Not holding it is not an error. When ctx ends
// first, the release goes on in the background (it may or may not happen).
func (l *Locker) Release(ctx context.Context) error { return l.release(ctx, false) }

// ForceRelease releases the lock whoever holds it.
func (l *Locker) ForceRelease(ctx context.Context) error { return l.release(ctx, true) }

func (l *Locker) release(ctx context.Context, force bool) error {
	return l.do(ctx, "release", func() C.mongoelector_status { return C.mongoelector_locker_release(l.ptr, cbool(force)) })
}

// Touch renews a held, unexpired lock: renewed and the new expiry (server time), or
// false when this locker does not hold it any more.
func (l *Locker) Touch(ctx context.Context) (renewed bool, expire time.Time, err error) {
	var r C.int
	var ms C.int64_t
	if err = l.do(ctx, "touch", func() C.mongoelector_status { return C.mongoelector_locker_touch(l.ptr, &r, &ms) }); err != nil {
		return false, time.Time{}, err
	}
	if r == 0 {
		return false, time.Time{}, nil
	}
	return true, time.UnixMilli(int64(ms)), nil
}

// Locked reports whether anyone holds an unexpired lock on the key (one round trip).
func (l *Locker) Locked(ctx context.Context) (bool, error) {
	return boolCall(ctx, &l.g, "locker", "locked of "+l.key, func(o *C.int) C.mongoelector_status {
		return C.mongoelector_locker_locked(l.ptr, o)
	})
}

// Owned reports whether this locker holds the lock (one round trip).
func (l *Locker) Owned(ctx context.Context) (bool, error) {
	return boolCall(ctx, &l.g, "locker", "owned of "+l.key, func(o *C.int) C.mongoelector_status {
		return C.mongoelector_locker_owned(l.ptr, o)
	})
}

// Fence is the fencing token of this locker's current hold, 0 when it holds nothing
// (local, no round trip). Guard writes with it: a resource that refuses tokens below
// the highest it has seen refuses every superseded holder.
func (l *Locker) Fence() (int64, error) {
	var f C.int64_t
	if err := local(&l.g, "locker", func() C.mongoelector_status { return C.mongoelector_locker_fence(l.ptr, &f) }); err != nil {
		return 0, err
	}
	return int64(f), nil
}

// UUID is this locker's identity in the lock document (local).
func (l *Locker) UUID() (string, error) {
	// The string belongs to the handle: copy it while the guard keeps the handle alive.
	var uuid string
	err := local(&l.g, "locker", func() C.mongoelector_status {
		var s *C.char
		st := C.mongoelector_locker_uuid(l.ptr, &s)
		if st == C.MONGOELECTOR_OK {
			uuid = C.GoString(s)
		}
		return st
	})
	return uuid, err
}

// VerifyTime measures server minus host clock (one round trip); the error matches
// ErrTimeOffset when the difference exceeds MaxOffset (the offset is returned in both
// cases).
func (l *Locker) VerifyTime(ctx context.Context) (time.Duration, error) {
	if !l.g.enter() {
		return 0, closedError("locker")
	}
	return runCtx(ctx, "verify time of "+l.key, func() (time.Duration, error) {
		off := C.double(math.NaN())
		err := call(func() C.mongoelector_status { return C.mongoelector_locker_verify_time(l.ptr, &off) })
		if math.IsNaN(float64(off)) {
			return 0, err
		}
		return fromSeconds(off), err
	}, nil, l.g.exit)
}

// Current is the unexpired lock document of the key, nil when nobody holds it (one
// round trip).
func (l *Locker) Current(ctx context.Context) (*LockInfo, error) {
	if !l.g.enter() {
		return nil, closedError("locker")
	}
	return runCtx(ctx, "current of "+l.key, func() (*LockInfo, error) {
		var d C.mongoelector_lock_details
		d.version = C.MONGOELECTOR_LOCK_DETAILS_VERSION
		var found C.int
		if err := call(func() C.mongoelector_status { return C.mongoelector_locker_current_details(l.ptr, &d, &found) }); err != nil {
			return nil, err
		}
		defer C.mongoelector_lock_details_clear(&d)
		if found == 0 {
			return nil, nil
		}
		return &LockInfo{
			UUID:    C.GoString(d.uuid),
			Host:    C.GoString(d.host),
			PID:     int64(d.pid),
			Created: time.UnixMilli(int64(d.created_ms)),
			Expire:  time.UnixMilli(int64(d.expire_ms)),
			Fence:   int64(d.fence),
		}, nil
	}, nil, l.g.exit)
}

// Close frees the locker; a blocking Acquire in progress returns ErrClosed. A lock this
// locker still holds is released first (fenced, one round trip bounded by the per-call
// timeout; its error is returned, the locker is freed anyway and the lock then ends at
// its TTL), so `defer lock.Close()` never leaves a key held for a TTL. It waits for the
// calls still running in the background (each bounded by the per-call timeout).
// Idempotent and safe for concurrent use.
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
	close(l.closing) // cancels the per-call tokens of the waits in flight
	l.g.wait()
	// A Hold that completed while Close waited made a lease: close it first.
	l.leaseMu.Lock()
	lease = l.lease
	l.leaseMu.Unlock()
	if lease != nil {
		lease.Close()
	}
	var releaseErr error
	var fence C.int64_t
	if C.mongoelector_locker_fence(l.ptr, &fence) == C.MONGOELECTOR_OK && fence != 0 {
		releaseErr = call(func() C.mongoelector_status { return C.mongoelector_locker_release(l.ptr, 0) })
	}
	C.mongoelector_locker_free(l.ptr)
	l.ptr = nil
	l.client.childDone()
	return releaseErr
}
