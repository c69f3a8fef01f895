package mongoelector

/*
#include <stdlib.h>
#include "mongoelector.h"
*/
import "C"

import (
	"context"
	"runtime"
	"sync/atomic"
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
}

// DefaultSemaphoreOptions is the library's default semaphore configuration (from
// mongoelector_semaphore_config_init), every field filled in.
func DefaultSemaphoreOptions() SemaphoreOptions {
	var c C.mongoelector_semaphore_config
	if st := C.mongoelector_semaphore_config_init(&c, C.MONGOELECTOR_SEMAPHORE_CONFIG_VERSION); st != C.MONGOELECTOR_OK {
		panic("mongoelector_semaphore_config_init failed: " + Status(st).String())
	}
	coll := "mongosemaphore" // the C default is NULL, documented as "mongosemaphore"
	if c.collection != nil {
		coll = C.GoString(c.collection)
	}
	return SemaphoreOptions{
		Limit:               int(c.limit),
		TTL:                 fromSeconds(c.ttl_seconds),
		Collection:          coll,
		DisableTimeParanoid: c.timeparanoid == 0,
		MaxOffset:           fromSeconds(c.max_offset_seconds),
		OpTimeout:           fromSeconds(c.op_timeout_seconds),
		AllowUnsafeServer:   c.allow_unsafe_server != 0,
	}
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
	g       guard
	ptr     *C.mongoelector_semaphore
	client  *Client
	key     string
	closing chan struct{} // closed by Close: cancels the waits in flight

	// Holds released in the background because their acquire succeeded after its
	// caller gave up (tests).
	lateReleases atomic.Int32
}

// NewSemaphore creates a semaphore on key (non-empty UTF-8, at most 1024 bytes). It
// makes no round trip; ctx is checked for symmetry with NewLocker. opts may be nil
// (defaults, Limit 1).
func NewSemaphore(ctx context.Context, client *Client, key string, opts *SemaphoreOptions) (*Semaphore, error) {
	if client == nil {
		return nil, invalidArgument("client is nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, contextError(err, "new semaphore for "+key)
	}
	if opts == nil {
		opts = &SemaphoreOptions{}
	}
	var cfg C.mongoelector_semaphore_config
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_semaphore_config_init(&cfg, C.MONGOELECTOR_SEMAPHORE_CONFIG_VERSION)
	}); err != nil {
		return nil, err
	}
	ckey, err := cstring("key", key)
	if err != nil {
		return nil, err
	}
	defer freeC(ckey)
	if opts.Collection != "" {
		ccoll, err := cstring("collection", opts.Collection)
		if err != nil {
			return nil, err
		}
		defer freeC(ccoll) // the C library copies it
		cfg.collection = ccoll
	}
	// Only 0 means "default": C rejects a negative limit, TTL, MaxOffset or OpTimeout.
	if opts.Limit != 0 {
		cfg.limit = C.int64_t(opts.Limit)
	}
	if opts.TTL != 0 {
		cfg.ttl_seconds = seconds(opts.TTL)
	}
	if opts.DisableTimeParanoid {
		cfg.timeparanoid = 0
	}
	if opts.MaxOffset != 0 {
		cfg.max_offset_seconds = seconds(opts.MaxOffset)
	}
	if opts.OpTimeout != 0 {
		cfg.op_timeout_seconds = seconds(opts.OpTimeout)
	}
	if opts.AllowUnsafeServer {
		cfg.allow_unsafe_server = 1
	}

	cptr, err := client.acquireChild()
	if err != nil {
		return nil, err
	}
	var ptr *C.mongoelector_semaphore
	err = call(func() C.mongoelector_status { return C.mongoelector_semaphore_new(cptr, ckey, &cfg, &ptr) })
	client.childMade()
	if err != nil {
		client.childDone()
		return nil, err
	}
	s := &Semaphore{ptr: ptr, client: client, key: key, closing: make(chan struct{})}
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
	o, cfg, err := acquireOptions(blocking, opts)
	if err != nil {
		return 0, err
	}
	if cfg.force {
		return 0, invalidArgument("a semaphore takes no WithForce")
	}
	return withTokenOn(ctx, &s.g, s.closing, "semaphore", what, &o, func() (int64, error) {
		var fence C.int64_t
		err := call(func() C.mongoelector_status { return C.mongoelector_semaphore_acquire(s.ptr, &o, &fence) })
		return int64(fence), err
	}, func(_ int64, err error) {
		if err == nil { // taken after the caller gave up: nobody will release it
			call(func() C.mongoelector_status { return C.mongoelector_semaphore_release(s.ptr) })
			s.lateReleases.Add(1)
		}
	})
}

func (s *Semaphore) do(ctx context.Context, what string, fn func() C.mongoelector_status) error {
	return guarded(ctx, &s.g, "semaphore", "semaphore "+what+" of "+s.key, fn)
}

// Release releases this Semaphore's slot (fenced: a slot that expired and was taken
// over is left alone). Not holding one is not an error. When ctx ends first, the
// release goes on in the background (it may or may not happen).
func (s *Semaphore) Release(ctx context.Context) error {
	return s.do(ctx, "release", func() C.mongoelector_status { return C.mongoelector_semaphore_release(s.ptr) })
}

// Touch renews a held, unexpired slot to now + TTL: renewed and the new expiry (server
// time), or false when this Semaphore holds no unexpired slot any more.
func (s *Semaphore) Touch(ctx context.Context) (renewed bool, expire time.Time, err error) {
	var r C.int
	var ms C.int64_t
	if err = s.do(ctx, "touch", func() C.mongoelector_status { return C.mongoelector_semaphore_touch(s.ptr, &r, &ms) }); err != nil {
		return false, time.Time{}, err
	}
	if r == 0 {
		return false, time.Time{}, nil
	}
	return true, time.UnixMilli(int64(ms)), nil
}

// Fence is the fencing token of this Semaphore's current hold, 0 when it holds none
// (local, no round trip).
func (s *Semaphore) Fence() (int64, error) {
	var f C.int64_t
	if err := local(&s.g, "semaphore", func() C.mongoelector_status { return C.mongoelector_semaphore_fence(s.ptr, &f) }); err != nil {
		return 0, err
	}
	return int64(f), nil
}

// Holders lists the key's unexpired holders in slot order (one round trip).
func (s *Semaphore) Holders(ctx context.Context) ([]SemaphoreHolder, error) {
	if !s.g.enter() {
		return nil, closedError("semaphore")
	}
	return runCtx(ctx, "semaphore holders of "+s.key, func() ([]SemaphoreHolder, error) {
		var hs *C.mongoelector_semaphore_holder
		var n C.size_t
		if err := call(func() C.mongoelector_status { return C.mongoelector_semaphore_holders(s.ptr, &hs, &n) }); err != nil {
			return nil, err
		}
		defer C.mongoelector_semaphore_holders_free(hs, n)
		out := make([]SemaphoreHolder, 0, int(n))
		if hs != nil && n > 0 {
			for _, h := range unsafe.Slice(hs, int(n)) {
				out = append(out, SemaphoreHolder{
					UUID:    C.GoString(h.uuid),
					Host:    C.GoString(h.host),
					PID:     int64(h.pid),
					Fence:   int64(h.fence),
					Created: time.UnixMilli(int64(h.created_ms)),
					Expires: time.UnixMilli(int64(h.expire_ms)),
				})
			}
		}
		return out, nil
	}, nil, s.g.exit)
}

// Close frees the Semaphore; a blocking Acquire in progress returns ErrClosed. A slot it
// still holds is released first (fenced, one round trip bounded by the per-call
// timeout; its error is returned, the handle is freed anyway and the slot then ends at
// its TTL), so `defer sem.Close()` never keeps a slot for a TTL. It waits for the calls
// still running in the background. Idempotent and safe for concurrent use.
func (s *Semaphore) Close() error {
	if !s.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(s, nil)
	close(s.closing) // cancels the per-call tokens of the waits in flight
	s.g.wait()
	var releaseErr error
	var fence C.int64_t
	if C.mongoelector_semaphore_fence(s.ptr, &fence) == C.MONGOELECTOR_OK && fence != 0 {
		releaseErr = call(func() C.mongoelector_status { return C.mongoelector_semaphore_release(s.ptr) })
	}
	C.mongoelector_semaphore_free(s.ptr)
	s.ptr = nil
	s.client.childDone()
	return releaseErr
}
