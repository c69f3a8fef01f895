package mongoelector

/*
#include <stdint.h>
#include "mongoelector.h"

extern void mongoelectorGoOnLeaderChange(mongoelector_leader_state *, void *);

static void me_leader_change(const mongoelector_leader_state *state, void *ud) {
  mongoelectorGoOnLeaderChange((mongoelector_leader_state *)state, ud);
}

// The handle travels as an integer; only C turns it into the void* user_data.
static mongoelector_status me_observer_new(mongoelector_client *client, const char *key,
                                           const mongoelector_observer_config *config,
                                           uintptr_t handle, mongoelector_observer **out) {
  return mongoelector_observer_new(client, key, config, me_leader_change, (void *)handle, out);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
)

// LeaderStatus is what a LeaderObserver can tell about an elector key.
type LeaderStatus int

const (
	// NoLeader: nobody leads (the lock is absent, released or expired).
	NoLeader LeaderStatus = iota
	// Leading: LeaderState.UUID leads (HasLeader is true).
	Leading
	// HandoverPending: a Transfer to LeaderState.HandoverUUID is written and the target
	// has not taken it yet (it leads only after a renewal of its own): nobody leads.
	HandoverPending
	// LeaderUnknown: the observer's reads fail and the lease it last saw has ended on its
	// estimate of the server's clock: it cannot tell who leads.
	LeaderUnknown
)

func (s LeaderStatus) String() string {
	switch s {
	case NoLeader:
		return "no leader"
	case Leading:
		return "leading"
	case HandoverPending:
		return "hand-over pending"
	case LeaderUnknown:
		return "unknown"
	}
	return fmt.Sprintf("LeaderStatus(%d)", int(s))
}

// LeaderState is who leads an elector key, as a LeaderObserver sees it from outside
// the election.
type LeaderState struct {
	// HasLeader is false when nobody leads: the lock is absent, released or expired on
	// the server's clock, a hand-over is pending, or the observer cannot tell (Status).
	// The leader's fields below are then zero.
	HasLeader bool
	UUID      string // the leader's Elector.UUID
	Host      string // the leader's host name
	PID       int64  // the leader's process id on Host
	Fence     int64  // the fencing token of the leader's term
	// ObservedAt is when the state was read, on the server's clock (the library's
	// estimate of it).
	ObservedAt time.Time
	// Status says which of the cases above this is.
	Status LeaderStatus
	// ExpiresAt is when the lease ends unless renewed, on the server's clock: the
	// leader's (Leading), the hand-over's (HandoverPending: a target that never takes it
	// frees the lock then), the one that ended unseen (LeaderUnknown); zero for NoLeader.
	// A leader is reported only while its lease surely runs on the observer's estimate.
	ExpiresAt time.Time
	// The target of a pending hand-over (HandoverPending only, zero otherwise): its
	// Elector.UUID, host, process id, and the token it will lead with.
	HandoverUUID  string
	HandoverHost  string
	HandoverPID   int64
	HandoverFence int64
	// Payload is the leader's payload (ElectorOptions.Payload, Elector.SetPayload) as
	// JSON text, read with its term; "" when it has none or nobody leads (a string, so
	// that LeaderState stays comparable). A new payload of the same leader is reported
	// as a change.
	Payload string
}

// payloadOf is the state's payload text ("" when none, or from a library before version 3).
func payloadOf(s *C.mongoelector_leader_state) string {
	if s.version < 3 || s.payload_json == nil {
		return ""
	}
	return C.GoString(s.payload_json)
}

func leaderStateFromC(s *C.mongoelector_leader_state) LeaderState {
	st := LeaderState{
		HasLeader:     s.has_leader != 0,
		PID:           int64(s.pid),
		Fence:         int64(s.fence),
		ObservedAt:    time.UnixMilli(int64(s.server_time_ms)),
		Status:        LeaderStatus(s.status),
		HandoverPID:   int64(s.handover_pid),
		HandoverFence: int64(s.handover_fence),
	}
	if st.HasLeader {
		st.UUID, st.Host = C.GoString(s.uuid), C.GoString(s.host)
		st.Payload = payloadOf(s)
	}
	if s.expire_ms != 0 {
		st.ExpiresAt = time.UnixMilli(int64(s.expire_ms))
	}
	if st.Status == HandoverPending {
		st.HandoverUUID, st.HandoverHost = C.GoString(s.handover_uuid), C.GoString(s.handover_host)
	}
	return st
}

// ObserverOptions configures a LeaderObserver. Zero fields take the library's defaults.
type ObserverOptions struct {
	Interval  time.Duration // between reads of the lock; 0 = 1 s
	OpTimeout time.Duration // bound of one read; 0 = 1.5 s (as an elector of the default TTL)
}

// LeaderObserver watches an elector key from any process, without taking part in the
// election, and reports who leads it: the current state first, then every change of
// leader, "nobody leads" included (so that a client never keeps talking to a leader
// that is gone). It reads the key's lock document once per Interval on a library thread
// and never writes. A change is a new Status or a new (UUID, Fence) (the leader's, or a
// pending hand-over's target's): a Transfer always shows, a leader that resigns and wins
// again between two reads does not. After a Transfer the observer reports
// HandoverPending (the target in HandoverUUID) until the target has taken the hand-over
// with its own renewal (its IsLeader turns true then, at its next look), and only then
// the target as leader; a dead target stays pending until the hand-over's expiry.
//
// A leader is reported only while its lease surely runs (ExpiresAt against the latest
// the server's clock can read on the observer's estimate); while reads fail, the state
// turns LeaderUnknown at the instant the lease last seen ends.
//
// Safe for concurrent use. Close it when done: it is not closed by the garbage
// collector (a reader of C alone would otherwise see the channel close under its feet).
type LeaderObserver struct {
	g      guard
	ptr    *C.mongoelector_observer
	client *Client
	handle cgo.Handle // refers to q; deleted after the C observer is freed
	q      *queue[LeaderState]
	out    chan LeaderState
	stop   chan struct{} // closed by Close: the forwarder drops what is queued
	fwd    chan struct{} // closed when the forwarder has returned
}

// observers pins the open observers: their library thread reports to them until Close.
var observers sync.Map // *LeaderObserver -> struct{}

// NewLeaderObserver starts observing the elector key (no round trip here; the first
// read follows at once on the observer's thread). opts may be nil. States arrive on C.
// A read that fails (server unreachable) is logged and retried at the next interval;
// it reports nothing, except LeaderUnknown once the lease last seen has ended.
func NewLeaderObserver(client *Client, key string, opts *ObserverOptions) (*LeaderObserver, error) {
	if client == nil {
		return nil, invalidArgument("client is nil")
	}
	if opts == nil {
		opts = &ObserverOptions{}
	}
	if opts.Interval < 0 || opts.OpTimeout < 0 {
		return nil, invalidArgument("ObserverOptions: negative Interval or OpTimeout")
	}
	var cfg C.mongoelector_observer_config
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_observer_config_init(&cfg, C.MONGOELECTOR_OBSERVER_CONFIG_VERSION)
	}); err != nil {
		return nil, err
	}
	if opts.Interval > 0 {
		cfg.interval_seconds = seconds(opts.Interval)
	}
	if opts.OpTimeout > 0 {
		cfg.op_timeout_seconds = seconds(opts.OpTimeout)
	}
	ckey, err := cstring("key", key)
	if err != nil {
		return nil, err
	}
	defer freeC(ckey)
	cptr, err := client.acquireChild()
	if err != nil {
		return nil, err
	}
	defer client.childMade()
	o := &LeaderObserver{
		client: client,
		q:      newQueue[LeaderState](),
		out:    make(chan LeaderState),
		stop:   make(chan struct{}),
		fwd:    make(chan struct{}),
	}
	o.handle = cgo.NewHandle(o.q)
	var ptr *C.mongoelector_observer
	if err := call(func() C.mongoelector_status {
		return C.me_observer_new(cptr, ckey, &cfg, C.uintptr_t(o.handle), &ptr)
	}); err != nil {
		o.handle.Delete()
		client.childDone()
		return nil, err
	}
	o.ptr = ptr
	observers.Store(o, struct{}{})
	go func() {
		defer close(o.fwd)
		o.q.forward(o.out, o.stop, nil)
		close(o.out)
	}()
	return o, nil
}

// C delivers the states, in order, without loss while they are read: the current one
// first, then each change. It is closed by Close (states not received by then are
// dropped). The observer never waits for the reader.
func (o *LeaderObserver) C() <-chan LeaderState { return o.out }

// Read reads the state now (one round trip, bounded by ctx), independently of C: it
// neither reports to C nor changes what the next change is compared with. Never
// LeaderUnknown: a failed read is an error.
func (o *LeaderObserver) Read(ctx context.Context) (LeaderState, error) {
	if !o.g.enter() {
		return LeaderState{}, closedError("observer")
	}
	return runCtx(ctx, "read leader", func() (LeaderState, error) {
		var s C.mongoelector_leader_state
		s.version = C.MONGOELECTOR_LEADER_STATE_VERSION
		var st LeaderState
		// The strings live until the next read on this OS thread: copy them on it.
		err := call(func() C.mongoelector_status {
			rc := C.mongoelector_observer_read(o.ptr, &s)
			if rc == C.MONGOELECTOR_OK {
				st = leaderStateFromC(&s)
			}
			return rc
		})
		return st, err
	}, nil, o.g.exit)
}

// Close stops the observer and waits for its thread; C is closed when it returns. It
// waits for a Read still running in the background (bounded by the per-call timeout).
// Idempotent and safe for concurrent use.
func (o *LeaderObserver) Close() error {
	if !o.g.markClosed() {
		<-o.fwd
		return nil
	}
	observers.Delete(o)
	o.g.wait()
	C.mongoelector_observer_free(o.ptr) // no report after it returns
	o.ptr = nil
	o.handle.Delete()
	o.client.childDone()
	close(o.stop)
	<-o.fwd
	return nil
}

// ObserveLeader observes the elector key until ctx ends, as NewLeaderObserver: the
// channel gets the current state first, then every change, "nobody leads" included,
// and is closed once ctx has ended.
//
//	states, err := mongoelector.ObserveLeader(ctx, client, "scheduler", nil)
//	for s := range states {
//		if s.HasLeader { route(s.Host) } else { pause() }
//	}
func ObserveLeader(ctx context.Context, client *Client, key string, opts *ObserverOptions) (<-chan LeaderState, error) {
	if err := ctx.Err(); err != nil {
		return nil, contextError(err, "observe leader")
	}
	o, err := NewLeaderObserver(client, key, opts)
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		o.Close()
	}()
	return o.C(), nil
}
