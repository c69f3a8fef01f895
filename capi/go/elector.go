package mongoelector

/*
#include <stdint.h>
#include <stdlib.h>
#include "mongoelector.h"

extern void mongoelectorGoOnLeader(void *);
extern void mongoelectorGoOnLeaderLoss(void *);
extern void mongoelectorGoOnLoop(void *);
extern void mongoelectorGoLog(mongoelector_log_level, char *);

// The handle travels as an integer; only C turns it into the void* user_data.
static void me_set_callbacks(mongoelector_elector_options *o, uintptr_t handle, int leader,
                             int loss, int loop) {
  o->user_data = (void *)handle;
  o->on_leader = leader ? mongoelectorGoOnLeader : NULL;
  o->on_leader_loss = loss ? mongoelectorGoOnLeaderLoss : NULL;
  o->on_loop = loop ? mongoelectorGoOnLoop : NULL;
}

static void me_log_trampoline(mongoelector_log_level level, const char *message, void *ud) {
  (void)ud;
  mongoelectorGoLog(level, (char *)message);
}

#include <pthread.h>
static uintptr_t me_thread_id(void) { return (uintptr_t)pthread_self(); }

static mongoelector_status me_set_go_log(int on) {
  return mongoelector_set_log_callback(on ? me_log_trampoline : NULL, NULL);
}
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
)

// ElectorOptions configures an Elector. The zero value gives the library's defaults.
type ElectorOptions struct {
	TTL                 time.Duration // 0 = 15 s; the leader's lease
	DisableStatusReport bool          // don't write this node's status document
	AppVersion          string        // reported in the status document
	AllowUnsafeServer   bool          // run on servers with non-atomic findAndModify (FerretDB)

	// Callbacks run on the elector's own thread (or the goroutine calling Poll, Release
	// or Stop). They may call Stop, Release or Close on the elector. A panic in one is
	// recovered and reported on stderr.
	OnLeader     func()
	OnLeaderLoss func()
	OnLoop       func() // after each poll
}

// Elector runs a leader election on one key. Safe for concurrent use.
type Elector struct {
	g      guard
	ptr    *C.mongoelector_elector
	client *Client
	handle cgo.Handle // refers to the *callbacks; deleted only after the C elector is freed
}

// running keeps started electors reachable, so a program that starts one and then
// only waits does not have it finalized (and stopped) under its feet.
var running sync.Map // *Elector -> struct{}

// NewElector creates an elector for key. opts may be nil.
func NewElector(client *Client, key string, opts *ElectorOptions) (*Elector, error) {
	if client == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "client is nil"}
	}
	if opts == nil {
		opts = &ElectorOptions{}
	}
	ckey, err := cstring("key", key)
	if err != nil {
		return nil, err
	}
	defer freeC(ckey)
	var o C.mongoelector_elector_options
	C.mongoelector_elector_options_init(&o)
	if opts.TTL != 0 { // C rejects a negative TTL before any I/O
		o.ttl_seconds = C.double(opts.TTL.Seconds())
	}
	if opts.DisableStatusReport {
		o.report_status = 0
	}
	if opts.AppVersion != "" {
		cv, err := cstring("app version", opts.AppVersion)
		if err != nil {
			return nil, err
		}
		defer freeC(cv)
		o.app_version = cv
	}
	o.allow_unsafe_server = cbool(opts.AllowUnsafeServer)
	cbs := &callbacks{onLeader: opts.OnLeader, onLeaderLoss: opts.OnLeaderLoss, onLoop: opts.OnLoop}
	h := cgo.NewHandle(cbs)
	C.me_set_callbacks(&o, C.uintptr_t(h), cbool(cbs.onLeader != nil), cbool(cbs.onLeaderLoss != nil),
		cbool(cbs.onLoop != nil))

	cptr, err := client.acquireChild()
	if err != nil {
		h.Delete()
		return nil, err
	}
	var ptr *C.mongoelector_elector
	err = call(func() C.mongoelector_status { return C.mongoelector_elector_new(cptr, ckey, &o, &ptr) })
	client.g.exit()
	if err != nil {
		client.childDone()
		h.Delete()
		return nil, err
	}
	e := &Elector{ptr: ptr, client: client, handle: h}
	runtime.SetFinalizer(e, (*Elector).Close)
	return e, nil
}

func (e *Elector) do(fn func() C.mongoelector_status) error { return guarded(&e.g, "elector", fn) }

// Start runs the election loop on a new native thread (no-op if running).
func (e *Elector) Start() error {
	err := e.do(func() C.mongoelector_status { return C.mongoelector_elector_start(e.ptr) })
	if err == nil {
		running.Store(e, struct{}{})
		if e.g.isClosed() { // lost a race with Close: don't pin a closed elector
			running.Delete(e)
		}
	}
	return err
}

// Stop ends the loop, waits for its thread (unless called from a callback) and
// releases leadership.
func (e *Elector) Stop() error {
	err := e.do(func() C.mongoelector_status { return C.mongoelector_elector_stop(e.ptr) })
	running.Delete(e)
	return err
}

// Poll runs one poll cycle on the calling goroutine (callbacks fire on it).
func (e *Elector) Poll() error {
	return e.do(func() C.mongoelector_status { return C.mongoelector_elector_poll(e.ptr) })
}

// Release gives up leadership now (OnLeaderLoss fires if it led).
func (e *Elector) Release() error {
	return e.do(func() C.mongoelector_status { return C.mongoelector_elector_release(e.ptr) })
}

func (e *Elector) boolCall(fn func(*C.int) C.mongoelector_status) (bool, error) {
	return boolCall(&e.g, "elector", fn)
}

// IsLeader is true while this node leads; false the moment its renew deadline passes,
// even if a renewal call hangs.
func (e *Elector) IsLeader() (bool, error) {
	return e.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_elector_is_leader(e.ptr, o) })
}

// LeaderExists reports whether the last poll saw a leader (this node or another).
func (e *Elector) LeaderExists() (bool, error) {
	return e.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_elector_leader_exists(e.ptr, o) })
}

// Running reports whether the election loop runs.
func (e *Elector) Running() (bool, error) {
	return e.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_elector_running(e.ptr, o) })
}

// PollWait is the longest time between polls: TTL/2 as leader, TTL as follower.
func (e *Elector) PollWait() (time.Duration, error) {
	var s C.double
	if err := e.do(func() C.mongoelector_status { return C.mongoelector_elector_poll_wait(e.ptr, &s) }); err != nil {
		return 0, err
	}
	return time.Duration(float64(s) * float64(time.Second)), nil
}

// Fence is the fencing token of the current leadership, 0 when not leader.
func (e *Elector) Fence() (int64, error) {
	var f C.int64_t
	if err := e.do(func() C.mongoelector_status { return C.mongoelector_elector_fence(e.ptr, &f) }); err != nil {
		return 0, err
	}
	return int64(f), nil
}

// UUID is this node's identity.
func (e *Elector) UUID() (string, error) {
	// The string belongs to the handle: copy it while the guard keeps the handle alive.
	var uuid string
	err := e.do(func() C.mongoelector_status {
		var s *C.char
		st := C.mongoelector_elector_uuid(e.ptr, &s)
		if st == C.MONGOELECTOR_OK {
			uuid = C.GoString(s)
		}
		return st
	})
	return uuid, err
}

func (e *Elector) jsonCall(fn func(**C.char) C.mongoelector_status) (map[string]any, error) {
	var s *C.char
	if err := e.do(func() C.mongoelector_status { return fn(&s) }); err != nil {
		return nil, err
	}
	defer C.mongoelector_free(unsafePtr(s))
	var out map[string]any
	if err := json.Unmarshal([]byte(C.GoString(s)), &out); err != nil {
		return nil, &Error{Code: CodeInternal, Message: "library returned invalid JSON: " + err.Error()}
	}
	return out, nil
}

// NodeStatus is this node's status document (relaxed Extended JSON: dates as
// {"$date": "ISO-8601"}). No round trip.
func (e *Elector) NodeStatus() (map[string]any, error) {
	return e.jsonCall(func(p **C.char) C.mongoelector_status { return C.mongoelector_elector_node_status(e.ptr, p) })
}

// ClusterDetail is {member_detail: [...], leader: {...} or nil, timestamp}. One round trip.
func (e *Elector) ClusterDetail() (map[string]any, error) {
	return e.jsonCall(func(p **C.char) C.mongoelector_status { return C.mongoelector_elector_cluster_detail(e.ptr, p) })
}

// currentThreadID identifies the calling OS thread; callers inside a cgo callback
// are locked to it.
func currentThreadID() uintptr { return uintptr(C.me_thread_id()) }

// Close stops the elector (releasing leadership; OnLeaderLoss fires if it led), waits
// for it and frees it. Idempotent and safe for concurrent use. Called from inside one of
// this elector's callbacks, it returns at once and the elector is freed as soon as the
// callback returns: C forbids freeing an elector from its own callback.
func (e *Elector) Close() error {
	if !e.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(e, nil)
	running.Delete(e)
	runtime.LockOSThread()
	inside := e.handle.Value().(*callbacks).onThread(currentThreadID())
	runtime.UnlockOSThread()
	if inside {
		go e.free()
		return nil
	}
	e.free()
	return nil
}

func (e *Elector) free() {
	e.g.wait()
	C.mongoelector_elector_free(e.ptr)
	e.g.mu.Lock()
	e.ptr = nil
	e.g.mu.Unlock()
	// Only now can no callback run any more.
	e.handle.Delete()
	e.client.childDone()
}

// SetLogHandler sends every library log message to fn (nil restores the default:
// warnings and errors to stderr). fn runs on whichever thread logs, often an elector
// thread, so it must be safe for concurrent use. Process-wide.
func SetLogHandler(fn func(level LogLevel, message string)) error {
	if fn == nil {
		logHandler.Store(nil)
		return call(func() C.mongoelector_status { return C.me_set_go_log(0) })
	}
	logHandler.Store(&fn)
	return call(func() C.mongoelector_status { return C.me_set_go_log(1) })
}
