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
)

// slotHandle is what Semaphore and RWLock share (both hold one slot of a key's slot
// document in the library): their C handle kept alive by a guard, the per-call cancel
// of their waits, and the calls whose shape does not depend on the feature, given its C
// functions.
type slotHandle struct {
	g       guard
	client  *Client
	key     string
	kind    string        // "semaphore", "read-write lock": names it in errors
	closing chan struct{} // closed by Close: cancels the waits in flight

	// Holds released in the background because their acquire succeeded after its
	// caller gave up (tests).
	lateReleases atomic.Int32
}

// slotConfig points at the fields every slot feature's C config has; slotOptions are the
// Go options they come from (zero: the library's default).
type slotConfig struct {
	collection                **C.char
	ttl, maxOffset, opTimeout *C.double
	timeparanoid, allowUnsafe *C.int
	fair                      *C.int // config version 2
}

type slotOptions struct {
	collection                string
	ttl, maxOffset, opTimeout time.Duration
	disableTimeParanoid       bool
	allowUnsafeServer         bool
	fair                      bool
}

// set writes o into c; free releases the C string it may have made (after the C call
// that copies it).
func (o slotOptions) set(c slotConfig) (free func(), err error) {
	free = func() {}
	if o.collection != "" {
		ccoll, err := cstring("collection", o.collection)
		if err != nil {
			return free, err
		}
		*c.collection = ccoll
		free = func() { freeC(ccoll) }
	}
	// Only 0 means "default": C rejects a negative TTL, MaxOffset or OpTimeout.
	if o.ttl != 0 {
		*c.ttl = seconds(o.ttl)
	}
	if o.disableTimeParanoid {
		*c.timeparanoid = 0
	}
	if o.maxOffset != 0 {
		*c.maxOffset = seconds(o.maxOffset)
	}
	if o.opTimeout != 0 {
		*c.opTimeout = seconds(o.opTimeout)
	}
	if o.allowUnsafeServer {
		*c.allowUnsafe = 1
	}
	if o.fair {
		*c.fair = 1
	}
	return free, nil
}

// defaults reads the options back from a C config as its init set it (collection NULL:
// `collection`, the documented default).
func (c slotConfig) defaults(collection string) slotOptions {
	if *c.collection != nil {
		collection = C.GoString(*c.collection)
	}
	return slotOptions{
		collection:          collection,
		ttl:                 fromSeconds(*c.ttl),
		maxOffset:           fromSeconds(*c.maxOffset),
		opTimeout:           fromSeconds(*c.opTimeout),
		disableTimeParanoid: *c.timeparanoid == 0,
		allowUnsafeServer:   *c.allowUnsafe != 0,
		fair:                *c.fair != 0,
	}
}

// open checks the arguments every constructor checks and makes the C handle with
// `create` (given the client's C handle and the key), counted as a child of client.
func (h *slotHandle) open(ctx context.Context, client *Client, key, kind string,
	create func(*C.mongoelector_client, *C.char) C.mongoelector_status) error {
	if client == nil {
		return invalidArgument("client is nil")
	}
	if err := ctx.Err(); err != nil {
		return contextError(err, "new "+kind+" for "+key)
	}
	ckey, err := cstring("key", key)
	if err != nil {
		return err
	}
	defer freeC(ckey)
	cptr, err := client.acquireChild()
	if err != nil {
		return err
	}
	err = call(func() C.mongoelector_status { return create(cptr, ckey) })
	client.childMade()
	if err != nil {
		client.childDone()
		return err
	}
	h.client, h.key, h.kind, h.closing = client, key, kind, make(chan struct{})
	return nil
}

// acquire takes a hold through `take` (a C acquire given the options and the fence's
// address) under ctx; a hold taken after the caller gave up is released with `release`.
func (h *slotHandle) acquire(ctx context.Context, blocking bool, what string, opts []AcquireOption,
	take func(*C.mongoelector_acquire_options, *C.int64_t) C.mongoelector_status,
	release func() C.mongoelector_status) (int64, error) {
	o, cfg, err := acquireOptions(blocking, opts)
	if err != nil {
		return 0, err
	}
	if cfg.force {
		return 0, invalidArgument("a " + h.kind + " takes no WithForce")
	}
	return withTokenOn(ctx, &h.g, h.closing, h.kind, what, &o, func() (int64, error) {
		var fence C.int64_t
		err := call(func() C.mongoelector_status { return take(&o, &fence) })
		return int64(fence), err
	}, func(_ int64, err error) {
		if err == nil { // taken after the caller gave up: nobody will release it
			call(release)
			h.lateReleases.Add(1)
		}
	})
}

// do runs one C call that may wait on the network under ctx.
func (h *slotHandle) do(ctx context.Context, what string, fn func() C.mongoelector_status) error {
	return guarded(ctx, &h.g, h.kind, h.kind+" "+what+" of "+h.key, fn)
}

// touch renews through `fn` (a C touch): renewed and the new expiry.
func (h *slotHandle) touch(ctx context.Context, fn func(*C.int, *C.int64_t) C.mongoelector_status) (bool, time.Time, error) {
	var r C.int
	var ms C.int64_t
	if err := h.do(ctx, "touch", func() C.mongoelector_status { return fn(&r, &ms) }); err != nil {
		return false, time.Time{}, err
	}
	if r == 0 {
		return false, time.Time{}, nil
	}
	return true, time.UnixMilli(int64(ms)), nil
}

// fence reads the current hold's token through `fn` (local).
func (h *slotHandle) fence(fn func(*C.int64_t) C.mongoelector_status) (int64, error) {
	var f C.int64_t
	if err := local(&h.g, h.kind, func() C.mongoelector_status { return fn(&f) }); err != nil {
		return 0, err
	}
	return int64(f), nil
}

// close is the Close of both: refuses new calls, ends the waits, runs `drained` (may be
// nil) once no call is inside, releases a held hold (its error returned), frees the C
// handle. True when this call closed it (the caller then clears its pointer).
func (h *slotHandle) close(owner any, drained func(), fence func(*C.int64_t) C.mongoelector_status,
	release func() C.mongoelector_status, free func()) (bool, error) {
	if !h.g.markClosed() {
		return false, nil
	}
	runtime.SetFinalizer(owner, nil)
	close(h.closing) // cancels the per-call tokens of the waits in flight
	h.g.wait()
	if drained != nil {
		drained()
	}
	var releaseErr error
	var f C.int64_t
	if fence(&f) == C.MONGOELECTOR_OK && f != 0 {
		releaseErr = call(release)
	}
	free()
	h.client.childDone()
	return true, releaseErr
}

// slotRead runs `read` (C calls that wait on the network) on h's handle under ctx.
func slotRead[T any](ctx context.Context, h *slotHandle, what string, read func() (T, error)) (T, error) {
	if !h.g.enter() {
		var zero T
		return zero, closedError(h.kind)
	}
	return runCtx(ctx, h.kind+" "+what+" of "+h.key, read, nil, h.g.exit)
}

// holderOf is one hold of a key, from a C holder record's fields.
func holderOf(uuid, host *C.char, pid, fence, created, expire C.int64_t) SemaphoreHolder {
	return SemaphoreHolder{
		UUID:    C.GoString(uuid),
		Host:    C.GoString(host),
		PID:     int64(pid),
		Fence:   int64(fence),
		Created: time.UnixMilli(int64(created)),
		Expires: time.UnixMilli(int64(expire)),
	}
}
