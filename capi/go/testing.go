package mongoelector

// The testing kit: a fake clock for memory:// backends and levers on them, so that a
// test of "what does my service do when it loses the lock" runs in milliseconds, with no
// server and no sleeps (mongoelector_fake_clock_*, mongoelector_memory_* in the C API).

/*
#include <stdlib.h>
#include "mongoelector.h"
#include "mongoelector/testing.h"
*/
import "C"

import (
	"crypto/rand"
	"encoding/hex"
	"runtime"
	"time"
)

// FakeClock is a clock that moves only when the test says so. Attach it to a memory://
// backend (MemoryURI) and every Locker, Lease, Elector, Semaphore and LeaderObserver
// made on that backend runs on it: leases renew, expire and are declared lost, electors
// poll, win and step down, observers look, at the instants the fake time says, on the
// library's own threads.
//
// Advance walks time forward to each pending deadline in turn (a renewal due, a renew
// deadline, an elector's next poll) and at each one waits, in real time, until every
// library thread working on the clock has acted and is idle again: an hour of renewals
// takes milliseconds, and what an election does within a TTL has been done when
// Advance(ttl) returns. What the library reports synchronously is then visible: IsLeader,
// Lease.Lost, a Lease's Context, OnStoppedLeading. Goroutines your own callbacks start
// (OnStartedLeading runs on one) are not waited for: synchronise with those yourself.
//
// Every wait of the library on an attached backend is in fake time too: a blocking
// Acquire or Hold with WithTimeout and WithStep ends when Advance reaches its deadline,
// so call those from another goroutine than the one that advances. (The context of a
// call is real time, as ever.)
//
// A lease's loss, and an elector's loss at a missed renew deadline
// (OnStoppedLeading), are reported on the goroutine that calls Advance or Settle, inside
// that call. No callback may call Advance or Settle, nor Close the clock: they would
// wait for themselves.
//
// Safe for concurrent use, but one goroutine drives a clock: Advance or Settle while
// another goroutine is inside one of them fails with ErrInvalidArgument.
type FakeClock struct {
	g   guard
	ptr *C.mongoelector_fake_clock
	loc *time.Location // of the start: Now's
}

// FakeClockOption configures NewFakeClock.
type FakeClockOption func(*fakeClockConfig)

type fakeClockConfig struct{ settle time.Duration }

// WithSettleTimeout bounds, in real time, how long each step of Advance and Settle
// waits for the library's threads to become idle (default 10 s, at most an hour). A
// callback that blocks on the goroutine that advances never becomes idle: Advance then
// fails with ErrTimeout after this long instead of hanging.
func WithSettleTimeout(d time.Duration) FakeClockOption {
	return func(c *fakeClockConfig) { c.settle = d }
}

// NewFakeClock makes a clock whose wall time (also the server clock of the backends
// attached to it) starts at start, to the millisecond (the zero Time: now), and whose
// monotonic time starts at 0. start must lie between 1970 and the end of year 9999.
// Close it when done (a finalizer closes a forgotten one).
func NewFakeClock(start time.Time, opts ...FakeClockOption) (*FakeClock, error) {
	var cfg fakeClockConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.settle < 0 {
		return nil, invalidArgument("WithSettleTimeout: negative duration")
	}
	settleMs := durationMs(cfg.settle)
	if cfg.settle > 0 && settleMs == 0 {
		settleMs = 1 // 0 would mean "the default"
	}
	if start.IsZero() {
		start = time.Now()
	}
	var ptr *C.mongoelector_fake_clock
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_fake_clock_new(C.int64_t(start.UnixMilli()), C.int64_t(settleMs), &ptr)
	}); err != nil {
		return nil, err
	}
	c := &FakeClock{ptr: ptr, loc: start.Location()}
	runtime.SetFinalizer(c, (*FakeClock).Close)
	return c, nil
}

// durationMs is d in whole milliseconds, rounded to the nearest (the clocks' resolution).
func durationMs(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }

func (c *FakeClock) do(fn func() C.mongoelector_status) error { return local(&c.g, "fake clock", fn) }

// Advance moves time forward by d (>= 0, rounded to the millisecond), stopping at every
// pending deadline on the way, and returns once the library's threads have acted on
// each. It blocks for as long as those threads take (real time). An error matching
// ErrTimeout means that at some step they did not become idle within the settle timeout
// (a callback blocked on this goroutine); the clock has moved by d anyway.
func (c *FakeClock) Advance(d time.Duration) error {
	if d < 0 {
		return invalidArgument("FakeClock.Advance: a clock cannot go back (" + d.String() + ")")
	}
	ms := C.int64_t(durationMs(d))
	return c.do(func() C.mongoelector_status { return C.mongoelector_fake_clock_advance(c.ptr, ms) })
}

// Settle is Advance(0): it waits until the library's threads have acted on the time it is
// now (an elector just started has run its first poll).
func (c *FakeClock) Settle() error {
	return c.do(func() C.mongoelector_status { return C.mongoelector_fake_clock_settle(c.ptr) })
}

// WaitForWaiters blocks, in real time (at most timeout; <= 0: 10 s), until at least n
// goroutines or threads wait on the clock, and returns how many do. A test whose own
// goroutine makes a blocking call (an Acquire with a timeout, WaitLost) reads the count
// with n = 0 first, starts the goroutine, then waits for count+1 before advancing past
// the call's deadline. An error matching ErrTimeout when fewer wait.
func (c *FakeClock) WaitForWaiters(n int, timeout time.Duration) (int, error) {
	if n < 0 {
		return 0, invalidArgument("FakeClock.WaitForWaiters: n < 0")
	}
	bound := C.int64_t(-1)
	if timeout > 0 {
		bound = C.int64_t(durationMs(timeout))
	}
	var waiting C.size_t
	err := c.do(func() C.mongoelector_status {
		return C.mongoelector_fake_clock_wait_for_waiters(c.ptr, C.size_t(n), bound, &waiting)
	})
	return int(waiting), err
}

// now reads the wall and monotonic clocks in ms; ok false once the clock is closed.
func (c *FakeClock) now() (wall, mono int64, ok bool) {
	var w, m C.int64_t
	err := c.do(func() C.mongoelector_status { return C.mongoelector_fake_clock_now(c.ptr, &w, &m) })
	return int64(w), int64(m), err == nil
}

// Now is the clock's wall time (the attached backends' server clock), in the location of
// the start given to NewFakeClock. The zero Time once the clock is closed.
func (c *FakeClock) Now() time.Time {
	w, _, ok := c.now()
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(w).In(c.loc)
}

// Elapsed is the fake time since the clock was made: its monotonic clock, which JumpWall
// does not move. 0 once the clock is closed.
func (c *FakeClock) Elapsed() time.Duration {
	_, m, _ := c.now()
	return time.Duration(m) * time.Millisecond
}

// JumpWall steps the wall clock alone by d (either sign, rounded to the millisecond), as
// NTP would: the attached backends' server clock jumps, intervals do not change. The
// library notices at its next server-time sample, during a later Advance (leases written
// on the old time base are then declared lost).
func (c *FakeClock) JumpWall(d time.Duration) error {
	ms := C.int64_t(durationMs(d))
	return c.do(func() C.mongoelector_status { return C.mongoelector_fake_clock_jump_wall(c.ptr, ms) })
}

// MemoryURI attaches the in-process backend memory://name to this clock and returns its
// URI, for NewClient(uri, ""). name "" picks a fresh, unique name. The clock keeps the
// backend (and its locks) alive until Close. The same name may be attached to the same
// clock again; a name already in use on another clock (a client opened it before: the
// system clock; or another FakeClock) is ErrInvalidArgument.
func (c *FakeClock) MemoryURI(name string) (string, error) {
	if name == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", &Error{Status: StatusInternal, Message: "MemoryURI: " + err.Error()}
		}
		name = "go-fake-clock-" + hex.EncodeToString(b[:])
	}
	uri := "memory://" + name
	curi, err := cstring("uri", uri)
	if err != nil {
		return "", err
	}
	defer freeC(curi)
	if err := c.do(func() C.mongoelector_status { return C.mongoelector_fake_clock_attach(c.ptr, curi) }); err != nil {
		return "", err
	}
	return uri, nil
}

// Close frees the clock and lets go of the backends attached to it. Objects still open
// on them keep them alive, but time no longer moves for them: close those first.
// Idempotent and safe for concurrent use (not from a callback, see FakeClock).
func (c *FakeClock) Close() error {
	if !c.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(c, nil)
	c.g.wait()
	C.mongoelector_fake_clock_free(c.ptr)
	c.ptr = nil
	return nil
}

// MemoryForceExpire makes the lock on key in collection ("": "mongolocker"; electors'
// locks are in "elector.locks") of the memory:// backend uri expire now, as if its holder
// had stopped renewing. The holder is not told: its next renewal finds the lock gone (a
// Lease is lost, an Elector steps down, and wins it back at its next poll if no other
// candidate took it), and anyone may take it meanwhile, so for that while two nodes may
// believe they hold it, which is what a test of fencing needs.
// Reports whether an unexpired lock was there. Works with or without a FakeClock.
func MemoryForceExpire(uri, collection, key string) (bool, error) {
	curi, err := cstring("uri", uri)
	if err != nil {
		return false, err
	}
	defer freeC(curi)
	var ccoll *C.char // NULL: the default collection
	if collection != "" {
		if ccoll, err = cstring("collection", collection); err != nil {
			return false, err
		}
		defer freeC(ccoll)
	}
	ckey, err := cstring("key", key)
	if err != nil {
		return false, err
	}
	defer freeC(ckey)
	var held C.int
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_memory_force_expire(curi, ccoll, ckey, &held)
	}); err != nil {
		return false, err
	}
	return held != 0, nil
}

// MemorySetUnavailable makes the memory:// backend uri fail every call at once (down
// true), as a server that is down: holders keep their locks until their renew deadline
// and then report them lost, electors step down, acquires fail with ErrUnavailable. down
// false makes it answer again. Turning it on for a name nothing in this process uses is
// ErrInvalidArgument (the setting would vanish with the unused backend).
func MemorySetUnavailable(uri string, down bool) error {
	curi, err := cstring("uri", uri)
	if err != nil {
		return err
	}
	defer freeC(curi)
	return call(func() C.mongoelector_status { return C.mongoelector_memory_set_unavailable(curi, cbool(down)) })
}
