package mongoelector

/*
#include <stdint.h>
#include <stdlib.h>
#include "mongoelector.h"

extern void mongoelectorGoOnLeader(void *);
extern void mongoelectorGoOnLeaderLoss(void *);
extern void mongoelectorGoOnLoop(void *);

// The handle travels as an integer; only C turns it into the void* user_data.
// on_leader/on_leader_loss are always set (Campaign, Observe, the term contexts).
static void me_set_callbacks(mongoelector_elector_config *c, uintptr_t handle, int loop) {
  c->user_data = (void *)handle;
  c->on_leader = mongoelectorGoOnLeader;
  c->on_leader_loss = mongoelectorGoOnLeaderLoss;
  c->on_loop = loop ? mongoelectorGoOnLoop : NULL;
}

#include <pthread.h>
static uintptr_t me_thread_id(void) { return (uintptr_t)pthread_self(); }
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// ElectorOptions configures an Elector. Zero fields (nil for the *bool ones) take the
// library's defaults, which mongoelector_elector_config_init defines for every binding
// (DefaultElectorOptions shows them).
type ElectorOptions struct {
	TTL                 time.Duration // 0 = default (15 s); the leader's lease
	DisableStatusReport bool          // don't write this node's status document
	AppVersion          string        // reported in the status document
	// DeleteOnRelease: a leader that stops deletes its lock document, so that nodes of
	// the original mongoelector 1.0.2 take over at once during a rolling upgrade (the
	// next leader of ours pays two extra round trips). nil = default (true for electors).
	DeleteOnRelease *bool
	// OpTimeout bounds one round trip. 0 = default (TTL/10 clamped to [100 ms, 5 s]);
	// else at most TTL/2.
	OpTimeout time.Duration
	// HandoverPoll: while another node leads, this follower reads the lock document
	// this often (one read, no write), so that a ResignFor or Transfer elsewhere is
	// noticed within about that. 0 = default (TTL/4).
	HandoverPoll time.Duration
	// DisableHandoverPoll turns those reads off: a follower then wakes only when the
	// leader's lease can expire (about a TTL after a hand-over). Overrides HandoverPoll.
	DisableHandoverPoll bool
	// Payload is published with every term this node leads (an endpoint, a version,
	// ...): anything json.Marshal turns into a JSON object of at most 16 KiB; nil = none.
	// Observers (LeaderState.Payload), ClusterDetail and `mongoelector status` show it;
	// the claim that starts a term writes it, so a new term never shows the previous
	// leader's payload. See SetPayload.
	Payload any
	// Priority turns priority leaders on (nil = off, the default): this node publishes
	// it in its status report and, while leading, hands leadership over (as Transfer) to
	// the running member of highest priority strictly above its own once that member has
	// been seen live at every poll for PriorityStability. A tie never moves leadership;
	// members without a priority are never chosen. Needs the status report. Not finite:
	// ErrInvalidArgument.
	Priority *float64
	// PriorityStability: that delay, counted while THIS node leads (give every member the
	// same). nil = default (TTL); negative or above 1e9 s: ErrInvalidArgument.
	PriorityStability *time.Duration

	// OnStartedLeading runs on a new goroutine each time this node becomes leader (as
	// client-go's), with a context cancelled the moment the leadership ends: lost at the
	// renew deadline, taken, released, resigned, or the elector stopped or closed. It may
	// run for the whole term.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs when a leadership that OnStartedLeading was given ends, after
	// its context was cancelled, on a library thread (the elector's, a shared callback
	// thread at a missed deadline, or the one calling Release/Resign/Stop/Close): keep it
	// short.
	OnStoppedLeading func()
	// OnLoop runs after each poll, on the elector's thread (or the goroutine running
	// Poll).
	//
	// OnStoppedLeading and OnLoop may call Stop, Resign, Release or Close on the
	// elector. A panic in any callback crashes the program, as an unrecovered panic
	// does (see the package doc).
	OnLoop func()
}

// DefaultElectorOptions is the library's default elector configuration (from
// mongoelector_elector_config_init), every value field filled in.
func DefaultElectorOptions() ElectorOptions {
	var c C.mongoelector_elector_config
	if st := C.mongoelector_elector_config_init(&c, C.MONGOELECTOR_ELECTOR_CONFIG_VERSION); st != C.MONGOELECTOR_OK {
		panic("mongoelector_elector_config_init failed: " + Status(st).String())
	}
	return ElectorOptions{
		TTL:                 fromSeconds(c.ttl_seconds),
		DisableStatusReport: c.report_status == 0,
		DeleteOnRelease:     Bool(c.delete_on_release != 0),
		OpTimeout:           fromSeconds(c.op_timeout_seconds),
	}
}

// Elector runs a leader election on one key. Safe for concurrent use.
type Elector struct {
	g      guard
	ptr    *C.mongoelector_elector
	client *Client
	st     *electorState
	handle cgo.Handle // refers to st; deleted only after the C elector is freed
}

// running keeps started electors reachable, so a program that starts one and then
// only waits does not have it finalized (and stopped) under its feet.
var running sync.Map // *Elector -> struct{}

// NewElector creates an elector for key (collections "elector.locks" and
// "elector.leader_status"; ensuring their indexes is a round trip, bounded by ctx).
// opts may be nil. The election starts with Start, Campaign or Run.
func NewElector(ctx context.Context, client *Client, key string, opts *ElectorOptions) (*Elector, error) {
	if client == nil {
		return nil, invalidArgument("client is nil")
	}
	if opts == nil {
		opts = &ElectorOptions{}
	}
	if opts.HandoverPoll < 0 {
		return nil, invalidArgument("HandoverPoll is negative (DisableHandoverPoll turns the reads off)")
	}
	var cfg C.mongoelector_elector_config
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_elector_config_init(&cfg, C.MONGOELECTOR_ELECTOR_CONFIG_VERSION)
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
	if opts.TTL != 0 { // C rejects a negative TTL before any I/O
		cfg.ttl_seconds = seconds(opts.TTL)
	}
	if opts.DisableStatusReport {
		cfg.report_status = 0
	}
	if opts.AppVersion != "" {
		cv, err := cstring("app version", opts.AppVersion)
		if err != nil {
			freeAll()
			return nil, err
		}
		cstrs = append(cstrs, cv)
		cfg.app_version = cv
	}
	if opts.DeleteOnRelease != nil {
		cfg.delete_on_release = cbool(*opts.DeleteOnRelease)
	}
	if opts.OpTimeout != 0 {
		cfg.op_timeout_seconds = seconds(opts.OpTimeout)
	}
	if opts.DisableHandoverPoll {
		cfg.handover_poll_seconds = 0
	} else if opts.HandoverPoll > 0 {
		cfg.handover_poll_seconds = seconds(opts.HandoverPoll)
	}
	if opts.PriorityStability != nil && *opts.PriorityStability < 0 {
		freeAll()
		return nil, invalidArgument("PriorityStability is negative: " + opts.PriorityStability.String())
	}
	if opts.Priority != nil { // the library refuses a priority that is not finite
		cfg.has_priority = 1
		cfg.priority = C.double(*opts.Priority)
		if opts.PriorityStability != nil {
			cfg.priority_stability_seconds = seconds(*opts.PriorityStability)
		}
	}
	if opts.Payload != nil {
		text, err := payloadJSON(opts.Payload)
		if err != nil {
			freeAll()
			return nil, err
		}
		cp, err := cstring("payload", text)
		if err != nil {
			freeAll()
			return nil, err
		}
		cstrs = append(cstrs, cp)
		cfg.payload_json = cp
	}
	st := newElectorState(opts)
	h := cgo.NewHandle(st)
	C.me_set_callbacks(&cfg, C.uintptr_t(h), cbool(st.onLoop != nil))

	ptr, err := newChild(ctx, client, "new elector for "+key, func(cptr *C.mongoelector_client) (*C.mongoelector_elector, error) {
		var p *C.mongoelector_elector
		err := call(func() C.mongoelector_status { return C.mongoelector_elector_new_with(cptr, ckey, &cfg, &p) })
		return p, err
	}, func(p *C.mongoelector_elector) { C.mongoelector_elector_free(p) }, freeAll, h.Delete)
	if err != nil {
		return nil, err
	}
	e := &Elector{ptr: ptr, client: client, st: st, handle: h}
	uuid, _ := e.UUID()
	st.setHandle(ptr, uuid)
	runtime.SetFinalizer(e, (*Elector).Close)
	return e, nil
}

// do runs a C call that may wait on the network or on the elector's thread under ctx.
// From inside one of this elector's callbacks it runs on the callback's own thread (the
// library recognises its callbacks by their thread: stop must not wait for itself).
func (e *Elector) do(ctx context.Context, what string, fn func() C.mongoelector_status) error {
	if !e.g.enter() {
		return closedError("elector")
	}
	if e.st.insideCallback() {
		defer e.g.exit()
		if err := ctx.Err(); err != nil {
			return contextError(err, what)
		}
		return call(fn)
	}
	_, err := runCtx(ctx, what, func() (struct{}, error) { return struct{}{}, call(fn) }, nil, e.g.exit)
	return err
}

func (e *Elector) local(fn func() C.mongoelector_status) error { return local(&e.g, "elector", fn) }

// Start runs the election loop on a new native thread (no-op if running; no round
// trip). Leadership is reported through OnStartedLeading/OnStoppedLeading and Observe;
// Campaign waits for it.
func (e *Elector) Start() error {
	err := e.local(func() C.mongoelector_status { return C.mongoelector_elector_start(e.ptr) })
	if err == nil {
		running.Store(e, struct{}{})
		if e.g.isClosed() { // lost a race with Close: don't pin a closed elector
			running.Delete(e)
		}
	}
	return err
}

// Stop ends the loop, waits for its thread (unless called from a callback) and
// releases leadership (a round trip). The same as Resign.
func (e *Elector) Stop(ctx context.Context) error { return e.stop(ctx, "stop") }

// Poll runs one poll cycle (callbacks fire on the goroutine running it).
func (e *Elector) Poll(ctx context.Context) error {
	return e.do(ctx, "poll", func() C.mongoelector_status { return C.mongoelector_elector_poll(e.ptr) })
}

// Release gives up the current term now (OnStoppedLeading runs if it led) but stays a
// candidate: a running loop competes again at its next poll, and may win again when
// no other node takes the lock first. Resign leaves the election.
func (e *Elector) Release(ctx context.Context) error {
	return e.do(ctx, "release", func() C.mongoelector_status { return C.mongoelector_elector_release(e.ptr) })
}

// ResignFor gives up leadership now (a fenced release; OnStoppedLeading runs and
// returns before it is sent) and stays in the election, but does not stand again for
// holdOff (negative: the ttl), so that another member takes over, in about ttl/4 (the
// followers' peek). Resign, by contrast, leaves the election. Not leader: only the
// hold-off applies.
func (e *Elector) ResignFor(ctx context.Context, holdOff time.Duration) error {
	secs := -1.0
	if holdOff >= 0 {
		secs = holdOff.Seconds()
	}
	return e.do(ctx, "resign", func() C.mongoelector_status {
		return C.mongoelector_elector_resign(e.ptr, C.double(secs))
	})
}

// Transfer hands leadership to the member whose UUID is toUUID: this term ends
// (OnStoppedLeading runs and returns) before one fenced write names the target, which
// takes over at its next peek (about ttl/4) with one renewal of its own. An
// InvalidArgument error when this node does not lead or toUUID is not a member.
func (e *Elector) Transfer(ctx context.Context, toUUID string) error {
	cs := C.CString(toUUID)
	defer C.free(unsafe.Pointer(cs))
	return e.do(ctx, "transfer", func() C.mongoelector_status {
		return C.mongoelector_elector_transfer(e.ptr, cs)
	})
}

func (e *Elector) boolCall(fn func(*C.int) C.mongoelector_status) (bool, error) {
	var out C.int
	if err := e.local(func() C.mongoelector_status { return fn(&out) }); err != nil {
		return false, err
	}
	return out != 0, nil
}

// IsLeader is true while this node leads; false the moment its renew deadline passes,
// even if a renewal call hangs. Local.
func (e *Elector) IsLeader() (bool, error) {
	return e.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_elector_is_leader(e.ptr, o) })
}

// LeaderExists reports whether the last poll saw a leader (this node or another). Local.
func (e *Elector) LeaderExists() (bool, error) {
	return e.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_elector_leader_exists(e.ptr, o) })
}

// Running reports whether the election loop runs. Local.
func (e *Elector) Running() (bool, error) {
	return e.boolCall(func(o *C.int) C.mongoelector_status { return C.mongoelector_elector_running(e.ptr, o) })
}

// PollWait is the longest time between polls: TTL/2 as leader, TTL as follower. Local.
func (e *Elector) PollWait() (time.Duration, error) {
	var s C.double
	if err := e.local(func() C.mongoelector_status { return C.mongoelector_elector_poll_wait(e.ptr, &s) }); err != nil {
		return 0, err
	}
	return fromSeconds(s), nil
}

// Fence is the fencing token of the current leadership, 0 when not leader. Local.
func (e *Elector) Fence() (int64, error) {
	var f C.int64_t
	if err := e.local(func() C.mongoelector_status { return C.mongoelector_elector_fence(e.ptr, &f) }); err != nil {
		return 0, err
	}
	return int64(f), nil
}

// UUID is this node's identity. Local.
func (e *Elector) UUID() (string, error) {
	// The string belongs to the handle: copy it while the guard keeps the handle alive.
	var uuid string
	err := e.local(func() C.mongoelector_status {
		var s *C.char
		st := C.mongoelector_elector_uuid(e.ptr, &s)
		if st == C.MONGOELECTOR_OK {
			uuid = C.GoString(s)
		}
		return st
	})
	return uuid, err
}

// payloadJSON is the JSON text of a payload; the library checks that it is an object.
func payloadJSON(payload any) (string, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return "", invalidArgument("payload cannot be encoded as JSON: " + err.Error())
	}
	return string(b), nil
}

// SetPayload replaces the payload this node publishes with its terms (nil: none). While
// leading, one write that names this term (uuid and fence) with a version above every
// earlier one: true once applied; a write that lands late changes this term's payload
// only, never back to an older one. Not leading: kept for the next claim, false.
// ErrInvalidArgument (StatusInvalidArgument) when it is not a JSON object or above
// 16 KiB encoded; a storage error when the write failed (the loop writes it again at
// its next poll while it leads). The round trip is bounded by ctx.
func (e *Elector) SetPayload(ctx context.Context, payload any) (bool, error) {
	var s string
	if payload != nil {
		var err error
		if s, err = payloadJSON(payload); err != nil { // never a raw NUL: JSON escapes it
			return false, err
		}
	}
	var written C.int
	err := e.do(ctx, "set payload", func() C.mongoelector_status {
		var text *C.char // made here: freed by the call that uses it, even one left behind
		if payload != nil {
			text = C.CString(s)
			defer freeC(text)
		}
		return C.mongoelector_elector_set_payload(e.ptr, text, &written)
	})
	return err == nil && written != 0, err
}

func jsonCall[T any](ctx context.Context, e *Elector, what string, fn func(**C.char) C.mongoelector_status) (*T, error) {
	var s *C.char
	if err := e.do(ctx, what, func() C.mongoelector_status { return fn(&s) }); err != nil {
		if s != nil { // cannot be: out parameters are written only on success
			C.mongoelector_free(unsafePtr(s))
		}
		return nil, err
	}
	defer C.mongoelector_free(unsafePtr(s))
	out := new(T)
	if err := json.Unmarshal([]byte(C.GoString(s)), out); err != nil {
		return nil, &Error{Status: StatusInternal, Message: what + ": the library's JSON: " + err.Error()}
	}
	return out, nil
}

// NodeStatus is this node's status, from local state; when the server clock estimate
// is stale it is sampled first (a round trip, bounded by ctx).
func (e *Elector) NodeStatus(ctx context.Context) (*NodeStatus, error) {
	return jsonCall[NodeStatus](ctx, e, "node status", func(p **C.char) C.mongoelector_status {
		return C.mongoelector_elector_node_status(e.ptr, p)
	})
}

// ClusterDetail reads the status collection and the lock (round trips, bounded by ctx).
func (e *Elector) ClusterDetail(ctx context.Context) (*ClusterDetail, error) {
	return jsonCall[ClusterDetail](ctx, e, "cluster detail", func(p **C.char) C.mongoelector_status {
		return C.mongoelector_elector_cluster_detail(e.ptr, p)
	})
}

// currentThreadID identifies the calling OS thread; callers inside a cgo callback
// are locked to it.
func currentThreadID() uintptr {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return uintptr(C.me_thread_id())
}

// Close stops the elector (releasing leadership; OnStoppedLeading runs if it led),
// waits for it and frees it; Observe channels close, Campaign returns ErrClosed. It
// waits for calls still running in the background (each bounded by the per-call
// timeout). Idempotent and safe for concurrent use. Called from inside one of this
// elector's callbacks, it returns at once and the elector is freed as soon as the
// callback returns: C forbids freeing an elector from its own callback.
func (e *Elector) Close() error {
	if !e.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(e, nil)
	running.Delete(e)
	if e.st.insideCallback() {
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
	e.st.close()
	e.handle.Delete()
	e.client.childDone()
}
