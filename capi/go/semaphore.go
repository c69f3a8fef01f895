package mongoelector

/*
#include <stdlib.h>
#include "mongoelector.h"
*/
import "C"

import (
	"context"
	"runtime"
	"time"
	"unsafe"
)

// SemaphoreOptions configures a Semaphore. Zero fields take the library's defaults,
// which mongoelector_semaphore_config_init defines for every binding
// (DefaultSemaphoreOptions shows them).
type SemaphoreOptions struct {
	// Limit is the number of holders the key admits at once, 1..1000 (0 = default, 1).
	// It is fixed when the key's document is created: a semaphore with another limit
	// on the same key gets ErrInvalidArgument from Acquire.
	Limit               int
	TTL                 time.Duration // 0 = default (600 s); the lease of a slot
	Collection          string        // "" = default ("mongosemaphore"; tokens in "<collection>.fences")
	DisableTimeParanoid bool          // skip the host/server clock check before acquiring
	MaxOffset           time.Duration // 0 = default (500 ms); allowed host/server clock difference
	// OpTimeout bounds one round trip (server selection, connect, socket, maxTimeMS).
	// 0 = default (TTL/10 clamped to [100 ms, 5 s]).
	OpTimeout         time.Duration
	AllowUnsafeServer bool // run on servers with non-atomic findAndModify (FerretDB)
	// Fair queues blocking acquires that find every slot held in the key's queue, served
	// in arrival order (a waiter that dies holds the queue up for at most one TTL). Every
	// acquire honours a live queue, fair or not: TryAcquire never takes a slot ahead of a
	// queued waiter.
	Fair bool
}

// DefaultSemaphoreOptions is the library's default semaphore configuration (from
// mongoelector_semaphore_config_init), every field filled in.
func DefaultSemaphoreOptions() SemaphoreOptions {
	var c C.mongoelector_semaphore_config
	if st := C.mongoelector_semaphore_config_init(&c, C.MONGOELECTOR_SEMAPHORE_CONFIG_VERSION); st != C.MONGOELECTOR_OK {
		panic("mongoelector_semaphore_config_init failed: " + Status(st).String())
	}
	d := semaphoreSlotConfig(&c).defaults("mongosemaphore") // the C default is NULL, documented as "mongosemaphore"
	return SemaphoreOptions{
		Limit:               int(c.limit),
		TTL:                 d.ttl,
		Collection:          d.collection,
		DisableTimeParanoid: d.disableTimeParanoid,
		MaxOffset:           d.maxOffset,
		OpTimeout:           d.opTimeout,
		AllowUnsafeServer:   d.allowUnsafeServer,
		Fair:                d.fair,
	}
}

func semaphoreSlotConfig(c *C.mongoelector_semaphore_config) slotConfig {
	return slotConfig{collection: &c.collection, ttl: &c.ttl_seconds, maxOffset: &c.max_offset_seconds,
		opTimeout: &c.op_timeout_seconds, timeparanoid: &c.timeparanoid, allowUnsafe: &c.allow_unsafe_server,
		fair: &c.fair}
}

// SemaphoreHolder is one unexpired hold of a semaphore's key.
type SemaphoreHolder struct {
	UUID    string // the holding handle's identity
	Host    string
	PID     int64
	Fence   int64     // the hold's fencing token
	Created time.Time // server time
	Expires time.Time // server time
}

// Semaphore lets at most Limit holders hold one key at any instant, each hold with a
// lease (TTL) and a fencing token strictly increasing per key. One Semaphore holds at
// most one slot: use one per concurrent holder (goroutine, worker). Safe for concurrent
// use: while an Acquire waits, the other methods answer. Close releases a held slot.
type Semaphore struct {
	slotHandle
	ptr *C.mongoelector_semaphore
}

// NewSemaphore creates a semaphore on key (non-empty UTF-8, at most 1024 bytes). It
// makes no round trip; ctx is checked for symmetry with NewLocker. opts may be nil
// (defaults, Limit 1).
func NewSemaphore(ctx context.Context, client *Client, key string, opts *SemaphoreOptions) (*Semaphore, error) {
	if opts == nil {
		opts = &SemaphoreOptions{}
	}
	var cfg C.mongoelector_semaphore_config
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_semaphore_config_init(&cfg, C.MONGOELECTOR_SEMAPHORE_CONFIG_VERSION)
	}); err != nil {
		return nil, err
	}
	free, err := slotOptions{collection: opts.Collection, ttl: opts.TTL, maxOffset: opts.MaxOffset,
		opTimeout: opts.OpTimeout, disableTimeParanoid: opts.DisableTimeParanoid,
		allowUnsafeServer: opts.AllowUnsafeServer, fair: opts.Fair}.set(semaphoreSlotConfig(&cfg))
	defer free() // the C library copies the collection
	if err != nil {
		return nil, err
	}
	// Only 0 means "default": C rejects a negative limit.
	if opts.Limit != 0 {
		cfg.limit = C.int64_t(opts.Limit)
	}
	s := &Semaphore{}
	if err := s.open(ctx, client, key, "semaphore", func(c *C.mongoelector_client, k *C.char) C.mongoelector_status {
		var ptr *C.mongoelector_semaphore
		st := C.mongoelector_semaphore_new(c, k, &cfg, &ptr)
		s.ptr = ptr
		return st
	}); err != nil {
		return nil, err
	}
	runtime.SetFinalizer(s, (*Semaphore).Close)
	return s, nil
}

// Key is the semaphore's key.
func (s *Semaphore) Key() string { return s.key }

// Acquire waits until it holds a slot and returns the hold's fencing token, strictly
// greater than every token handed out before for this key. WithTimeout and WithStep
// apply (not WithForce). It stops waiting when ctx is done: the error then matches
// ErrCancelled and context.Canceled, or ErrTimeout and context.DeadlineExceeded. A slot
// the library obtains after the caller gave up is released in the background. Close
// ends the wait with ErrClosed. Acquiring while this Semaphore holds a slot, or with a
// Limit other than the key's, is ErrInvalidArgument.
func (s *Semaphore) Acquire(ctx context.Context, opts ...AcquireOption) (int64, error) {
	return s.acquire(ctx, true, "semaphore acquire of "+s.key, opts)
}

// TryAcquire makes one attempt: the fencing token, or an error matching ErrLockExists
// when every slot is held.
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...AcquireOption) (int64, error) {
	return s.acquire(ctx, false, "semaphore try-acquire of "+s.key, opts)
}

func (s *Semaphore) acquire(ctx context.Context, blocking bool, what string, opts []AcquireOption) (int64, error) {
	return s.slotHandle.acquire(ctx, blocking, what, opts,
		func(o *C.mongoelector_acquire_options, fence *C.int64_t) C.mongoelector_status {
			return C.mongoelector_semaphore_acquire(s.ptr, o, fence)
		}, s.release)
}

func (s *Semaphore) release() C.mongoelector_status { return C.mongoelector_semaphore_release(s.ptr) }

// Release releases this Semaphore's slot (fenced: a slot that expired and was taken
// over is left alone). Not holding one is not an error. When ctx ends first, the
// release goes on in the background (it may or may not happen).
func (s *Semaphore) Release(ctx context.Context) error {
	return s.do(ctx, "release", s.release)
}

// Touch renews a held, unexpired slot to now + TTL: renewed and the new expiry (server
// time), or false when this Semaphore holds no unexpired slot any more.
func (s *Semaphore) Touch(ctx context.Context) (renewed bool, expire time.Time, err error) {
	return s.touch(ctx, func(r *C.int, ms *C.int64_t) C.mongoelector_status {
		return C.mongoelector_semaphore_touch(s.ptr, r, ms)
	})
}

// Fence is the fencing token of this Semaphore's current hold, 0 when it holds none
// (local, no round trip).
func (s *Semaphore) Fence() (int64, error) { return s.fence(s.cfence) }

func (s *Semaphore) cfence(f *C.int64_t) C.mongoelector_status {
	return C.mongoelector_semaphore_fence(s.ptr, f)
}

// Holders lists the key's unexpired holders in slot order (one round trip).
func (s *Semaphore) Holders(ctx context.Context) ([]SemaphoreHolder, error) {
	return slotRead(ctx, &s.slotHandle, "holders", func() ([]SemaphoreHolder, error) {
		var hs *C.mongoelector_semaphore_holder
		var n C.size_t
		if err := call(func() C.mongoelector_status { return C.mongoelector_semaphore_holders(s.ptr, &hs, &n) }); err != nil {
			return nil, err
		}
		defer C.mongoelector_semaphore_holders_free(hs, n)
		out := make([]SemaphoreHolder, 0, int(n))
		if hs != nil && n > 0 {
			for _, h := range unsafe.Slice(hs, int(n)) {
				out = append(out, holderOf(h.uuid, h.host, h.pid, h.fence, h.created_ms, h.expire_ms))
			}
		}
		return out, nil
	})
}

// Close frees the Semaphore; a blocking Acquire in progress returns ErrClosed. A slot it
// still holds is released first (fenced, one round trip bounded by the per-call
// timeout; its error is returned, the handle is freed anyway and the slot then ends at
// its TTL), so `defer sem.Close()` never keeps a slot for a TTL. It waits for the calls
// still running in the background. Idempotent and safe for concurrent use.
func (s *Semaphore) Close() error {
	closed, err := s.close(s, nil, s.cfence, s.release, func() { C.mongoelector_semaphore_free(s.ptr) })
	if closed {
		s.ptr = nil
	}
	return err
}
