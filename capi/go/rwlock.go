package mongoelector

/*
#include <stdint.h>
#include <stdlib.h>
#include "mongoelector.h"

extern void mongoelectorGoOnLeaseLost(void *);

// The handle travels as an integer; only C turns it into the void* user_data.
static mongoelector_status me_rwlock_lease_acquire(mongoelector_rwlock *rwlock,
                                                   mongoelector_rwlock_side side,
                                                   const mongoelector_acquire_options *acquire,
                                                   uintptr_t handle,
                                                   mongoelector_rwlock_lease **out) {
  return mongoelector_rwlock_lease_acquire(rwlock, side, acquire, mongoelectorGoOnLeaseLost,
                                           (void *)handle, out);
}
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// RWSide is a side of a read-write lock: what an RWLock holds (Side), or what a holder
// of its key holds (RWLockHolders).
type RWSide int

const (
	RWNone  RWSide = C.MONGOELECTOR_RWLOCK_NONE  // holds nothing
	RWRead  RWSide = C.MONGOELECTOR_RWLOCK_READ  // shared: up to MaxReaders holders at once
	RWWrite RWSide = C.MONGOELECTOR_RWLOCK_WRITE // exclusive: one holder, no readers
	// A writer waiting for the lock (writer preference): new readers wait for it.
	RWWaitingWriter RWSide = C.MONGOELECTOR_RWLOCK_WAITING_WRITER
)

// String is "none", "read", "write", "waiting_writer" (the library's names).
func (s RWSide) String() string {
	return C.GoString(C.mongoelector_rwlock_side_name(C.mongoelector_rwlock_side(s)))
}

// RWLockOptions configures an RWLock. Zero fields take the library's defaults, which
// mongoelector_rwlock_config_init defines for every binding (DefaultRWLockOptions shows
// them).
type RWLockOptions struct {
	// MaxReaders is how many readers the key admits at once, 1..1000 (0 = default, 64).
	// It is fixed when the key's document is created: an RWLock with another value on
	// the same key gets ErrInvalidArgument from its first lock.
	MaxReaders int
	// DisableWriterPreference lets new readers in while a writer waits (which may then
	// wait as long as readers keep overlapping). By default a waiting writer stops new
	// readers until it has the lock or gives up.
	DisableWriterPreference bool
	TTL                     time.Duration // 0 = default (600 s); the lease of a hold
	Collection              string        // "" = default ("mongorwlock"; tokens in "<collection>.fences")
	DisableTimeParanoid     bool          // skip the host/server clock check before locking
	MaxOffset               time.Duration // 0 = default (500 ms); allowed host/server clock difference
	// OpTimeout bounds one round trip (server selection, connect, socket, maxTimeMS).
	// 0 = default (TTL/10 clamped to [100 ms, 5 s]).
	OpTimeout         time.Duration
	AllowUnsafeServer bool // run on servers with non-atomic findAndModify (FerretDB)
	// Fair queues blocking writers that find the lock taken in the key's queue, served in
	// arrival order, instead of the waiting mark; with writer preference a live queue
	// stops new readers as the mark does. A writer that dies holds the queue up for at
	// most one TTL.
	Fair bool
}

func rwlockSlotConfig(c *C.mongoelector_rwlock_config) slotConfig {
	return slotConfig{collection: &c.collection, ttl: &c.ttl_seconds, maxOffset: &c.max_offset_seconds,
		opTimeout: &c.op_timeout_seconds, timeparanoid: &c.timeparanoid, allowUnsafe: &c.allow_unsafe_server,
		fair: &c.fair}
}

// DefaultRWLockOptions is the library's default read-write lock configuration (from
// mongoelector_rwlock_config_init), every field filled in.
func DefaultRWLockOptions() RWLockOptions {
	var c C.mongoelector_rwlock_config
	if st := C.mongoelector_rwlock_config_init(&c, C.MONGOELECTOR_RWLOCK_CONFIG_VERSION); st != C.MONGOELECTOR_OK {
		panic("mongoelector_rwlock_config_init failed: " + Status(st).String())
	}
	d := rwlockSlotConfig(&c).defaults("mongorwlock") // the C default is NULL, documented as "mongorwlock"
	return RWLockOptions{
		MaxReaders:              int(c.max_readers),
		DisableWriterPreference: c.writer_preference == 0,
		TTL:                     d.ttl,
		Collection:              d.collection,
		DisableTimeParanoid:     d.disableTimeParanoid,
		MaxOffset:               d.maxOffset,
		OpTimeout:               d.opTimeout,
		AllowUnsafeServer:       d.allowUnsafeServer,
		Fair:                    d.fair,
	}
}

// RWLockHolders are the unexpired holders of a read-write lock's key.
type RWLockHolders struct {
	Readers []SemaphoreHolder // in slot order
	Writer  *SemaphoreHolder  // nil when no writer holds the key
	// A writer waiting for the key (writer preference; nil when none): its Fence is its
	// waiting mark's, not a hold's.
	WaitingWriter *SemaphoreHolder
}

// RWLock is a read-write lock on one key: many readers (up to MaxReaders) OR one writer
// at any instant, each hold with a lease (TTL) and a fencing token; tokens strictly
// increase per key across readers and writers, so a writer's token is greater than
// every token granted before it. By default a writer that waits (Lock) stops new readers
// until it has the lock or gives up, so that overlapping readers cannot starve it.
//
// One RWLock holds at most one hold, a read or the write: use one per concurrent holder
// (goroutine, worker); taking a second is ErrInvalidArgument. Safe for concurrent use:
// while a lock call waits, the other methods answer. Close releases a held side.
type RWLock struct {
	slotHandle
	ptr *C.mongoelector_rwlock

	leaseMu sync.Mutex
	lease   *Lease // the live lease (RHold, Hold), closed before the RWLock
}

// NewRWLock creates a read-write lock on key (non-empty UTF-8, at most 1024 bytes). It
// makes no round trip; ctx is checked for symmetry with NewLocker. opts may be nil
// (defaults).
func NewRWLock(ctx context.Context, client *Client, key string, opts *RWLockOptions) (*RWLock, error) {
	if opts == nil {
		opts = &RWLockOptions{}
	}
	var cfg C.mongoelector_rwlock_config
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_rwlock_config_init(&cfg, C.MONGOELECTOR_RWLOCK_CONFIG_VERSION)
	}); err != nil {
		return nil, err
	}
	free, err := slotOptions{collection: opts.Collection, ttl: opts.TTL, maxOffset: opts.MaxOffset,
		opTimeout: opts.OpTimeout, disableTimeParanoid: opts.DisableTimeParanoid,
		allowUnsafeServer: opts.AllowUnsafeServer, fair: opts.Fair}.set(rwlockSlotConfig(&cfg))
	defer free() // the C library copies the collection
	if err != nil {
		return nil, err
	}
	// Only 0 means "default": C rejects a negative MaxReaders, naming it.
	if opts.MaxReaders != 0 {
		cfg.max_readers = C.int64_t(opts.MaxReaders)
	}
	if opts.DisableWriterPreference {
		cfg.writer_preference = 0
	}
	l := &RWLock{}
	if err := l.open(ctx, client, key, "read-write lock", func(c *C.mongoelector_client, k *C.char) C.mongoelector_status {
		var ptr *C.mongoelector_rwlock
		st := C.mongoelector_rwlock_new(c, k, &cfg, &ptr)
		l.ptr = ptr
		return st
	}); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(l, (*RWLock).Close)
	return l, nil
}

// Key is the read-write lock's key.
func (l *RWLock) Key() string { return l.key }

// RLock waits until it holds the read side and returns the hold's fencing token.
// WithTimeout and WithStep apply (not WithForce). It stops waiting when ctx is done: the
// error then matches ErrCancelled and context.Canceled, or ErrTimeout and
// context.DeadlineExceeded. A hold the library obtains after the caller gave up is
// released in the background. Close ends the wait with ErrClosed. Locking while this
// RWLock holds, with a MaxReaders other than the key's, or on a key whose document is
// another kind's (a semaphore's) is ErrInvalidArgument.
func (l *RWLock) RLock(ctx context.Context, opts ...AcquireOption) (int64, error) {
	return l.acquire(ctx, RWRead, true, "read lock", opts)
}

// TryRLock makes one attempt at the read side: the fencing token, or an error matching
// ErrLockExists when a writer holds the key, a writer waits for it (writer preference)
// or every read slot is held.
func (l *RWLock) TryRLock(ctx context.Context) (int64, error) {
	return l.acquire(ctx, RWRead, false, "read try-lock", nil)
}

// Lock waits until it holds the write side (no reader, no other writer) and returns the
// hold's fencing token, greater than every token granted before it. While it waits, new
// readers wait too (unless DisableWriterPreference). Options, ctx and errors as RLock's.
func (l *RWLock) Lock(ctx context.Context, opts ...AcquireOption) (int64, error) {
	return l.acquire(ctx, RWWrite, true, "write lock", opts)
}

// TryLock makes one attempt at the write side: the fencing token, or an error matching
// ErrLockExists when anyone holds the key. It does not stop new readers.
func (l *RWLock) TryLock(ctx context.Context) (int64, error) {
	return l.acquire(ctx, RWWrite, false, "write try-lock", nil)
}

func (l *RWLock) acquire(ctx context.Context, side RWSide, blocking bool, what string, opts []AcquireOption) (int64, error) {
	return l.slotHandle.acquire(ctx, blocking, what+" of "+l.key, opts,
		func(o *C.mongoelector_acquire_options, fence *C.int64_t) C.mongoelector_status {
			return C.mongoelector_rwlock_acquire(l.ptr, C.mongoelector_rwlock_side(side), o, fence)
		}, l.release)
}

func (l *RWLock) release() C.mongoelector_status { return C.mongoelector_rwlock_release(l.ptr) }

// RUnlock releases the read side this RWLock holds (fenced: a hold that expired and was
// taken over is left alone). Holding nothing is not an error; holding the write side is
// ErrInvalidArgument (Unlock releases it). When ctx ends first, the release goes on in
// the background (it may or may not happen).
func (l *RWLock) RUnlock(ctx context.Context) error { return l.unlock(ctx, RWRead, "RUnlock") }

// Unlock releases the write side this RWLock holds, as RUnlock does the read side.
func (l *RWLock) Unlock(ctx context.Context) error { return l.unlock(ctx, RWWrite, "Unlock") }

func (l *RWLock) unlock(ctx context.Context, side RWSide, what string) error {
	held, err := l.Side()
	if err != nil {
		return err
	}
	if held != RWNone && held != side {
		other := map[RWSide]string{RWRead: "RUnlock", RWWrite: "Unlock"}[held]
		return invalidArgument(what + " of " + l.key + ": this RWLock holds the " + held.String() +
			" side, not the " + side.String() + " side (" + other + " releases it)")
	}
	return l.do(ctx, "release", l.release)
}

// Touch renews the held side to now + TTL: renewed and the new expiry (server time), or
// false when this RWLock holds nothing unexpired any more.
func (l *RWLock) Touch(ctx context.Context) (renewed bool, expire time.Time, err error) {
	return l.touch(ctx, func(r *C.int, ms *C.int64_t) C.mongoelector_status {
		return C.mongoelector_rwlock_touch(l.ptr, r, ms)
	})
}

// Fence is the fencing token of this RWLock's current hold, 0 when it holds none (local,
// no round trip).
func (l *RWLock) Fence() (int64, error) { return l.fence(l.cfence) }

func (l *RWLock) cfence(f *C.int64_t) C.mongoelector_status {
	return C.mongoelector_rwlock_fence(l.ptr, f)
}

// Side is the side this RWLock holds: RWRead, RWWrite or RWNone (local, no round trip).
func (l *RWLock) Side() (RWSide, error) {
	var s C.mongoelector_rwlock_side
	if err := local(&l.g, l.kind, func() C.mongoelector_status { return C.mongoelector_rwlock_held_side(l.ptr, &s) }); err != nil {
		return RWNone, err
	}
	return RWSide(s), nil
}

// UUID is this RWLock's identity, the one its holds carry (RWLockHolders); "" once
// closed.
func (l *RWLock) UUID() string {
	var u *C.char
	if err := local(&l.g, l.kind, func() C.mongoelector_status { return C.mongoelector_rwlock_uuid(l.ptr, &u) }); err != nil {
		return ""
	}
	return C.GoString(u)
}

// Holders lists the key's unexpired holders (one round trip).
func (l *RWLock) Holders(ctx context.Context) (RWLockHolders, error) {
	return slotRead(ctx, &l.slotHandle, "holders", func() (RWLockHolders, error) {
		var hs *C.mongoelector_rwlock_holder
		var n C.size_t
		if err := call(func() C.mongoelector_status { return C.mongoelector_rwlock_holders(l.ptr, &hs, &n) }); err != nil {
			return RWLockHolders{}, err
		}
		defer C.mongoelector_rwlock_holders_free(hs, n)
		var out RWLockHolders
		if hs != nil && n > 0 {
			for _, h := range unsafe.Slice(hs, int(n)) {
				hold := holderOf(h.uuid, h.host, h.pid, h.fence, h.created_ms, h.expire_ms)
				switch RWSide(h.side) {
				case RWRead:
					out.Readers = append(out.Readers, hold)
				case RWWrite:
					out.Writer = &hold
				default:
					out.WaitingWriter = &hold
				}
			}
		}
		return out, nil
	})
}

// RHold waits for the read side like RLock (ctx and WithTimeout bound the wait, WithStep
// sets its interval) and keeps it alive on the library's renewer until the Lease is
// closed, as Locker.Hold does a lock: the Lease's Context ends when the hold is lost.
// One live lease per RWLock (ErrInvalidArgument); closing the RWLock closes its lease
// first. A lease obtained after the caller gave up is closed (released) in the
// background.
func (l *RWLock) RHold(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return l.hold(ctx, RWRead, true, "read hold", opts)
}

// Hold is RHold for the write side (new readers wait while it waits).
func (l *RWLock) Hold(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return l.hold(ctx, RWWrite, true, "write hold", opts)
}

// TryRHold makes one attempt at the read side (ErrLockExists when refused), then keeps
// it alive as RHold does.
func (l *RWLock) TryRHold(ctx context.Context) (*Lease, error) {
	return l.hold(ctx, RWRead, false, "read try-hold", nil)
}

// TryHold makes one attempt at the write side, then keeps it alive as Hold does.
func (l *RWLock) TryHold(ctx context.Context) (*Lease, error) {
	return l.hold(ctx, RWWrite, false, "write try-hold", nil)
}

func (l *RWLock) hold(ctx context.Context, side RWSide, blocking bool, what string, opts []AcquireOption) (*Lease, error) {
	o, cfg, err := acquireOptions(blocking, opts)
	if err != nil {
		return nil, err
	}
	if cfg.force {
		return nil, invalidArgument("a read-write lock takes no WithForce")
	}
	return withTokenOn(ctx, &l.g, l.closing, l.kind, what+" of "+l.key, &o, func() (*Lease, error) {
		var ptr *C.mongoelector_rwlock_lease
		lease, err := startLease(func(h C.uintptr_t) (leaseCalls, error) {
			err := call(func() C.mongoelector_status {
				return C.me_rwlock_lease_acquire(l.ptr, C.mongoelector_rwlock_side(side), &o, h, &ptr)
			})
			return leaseCalls{
				fence: func(f *C.int64_t) C.mongoelector_status { return C.mongoelector_rwlock_lease_fence(ptr, f) },
				lost:  func(v *C.int) C.mongoelector_status { return C.mongoelector_rwlock_lease_lost(ptr, v) },
				free:  func() { C.mongoelector_rwlock_lease_free(ptr) },
			}, err
		})
		if err != nil {
			return nil, err
		}
		lease.attach(&l.leaseMu, &l.lease) // Close closes it before the RWLock
		return lease, nil
	}, func(lease *Lease, err error) {
		if err == nil { // held after the caller gave up: let go of it
			lease.Close()
		}
	})
}

// Close frees the RWLock; a waiting RLock or Lock returns ErrClosed. Its lease is closed
// first; a side it still holds is released (fenced, one round trip bounded by the
// per-call timeout; its error is returned, the handle is freed anyway and the hold then
// ends at its TTL), so `defer rw.Close()` never keeps a hold for a TTL. It waits for the
// calls still running in the background. Idempotent and safe for concurrent use.
func (l *RWLock) Close() error {
	l.closeLease() // the C handle must outlive its lease
	// closeLease again once no call is inside: a hold that completed meanwhile.
	closed, err := l.close(l, l.closeLease, l.cfence, l.release, func() { C.mongoelector_rwlock_free(l.ptr) })
	if closed {
		l.ptr = nil
	}
	return err
}

func (l *RWLock) closeLease() {
	l.leaseMu.Lock()
	lease := l.lease
	l.leaseMu.Unlock()
	if lease != nil {
		lease.Close()
	}
}
