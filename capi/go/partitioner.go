package mongoelector

/*
#include <stdint.h>
#include <stdlib.h>
#include "mongoelector.h"

extern void mongoelectorGoOnPartitionAssigned(int64_t, int64_t, void *);
extern void mongoelectorGoOnPartitionRevoked(int64_t, void *);

// The handle travels as an integer; only C turns it into the void* user_data.
static void me_set_partition_callbacks(mongoelector_partitioner_config *c, uintptr_t handle) {
  c->user_data = (void *)handle;
  c->on_assigned = mongoelectorGoOnPartitionAssigned;
  c->on_revoked = mongoelectorGoOnPartitionRevoked;
}
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime"
	"runtime/cgo"
	"sync/atomic"
	"time"
	"unsafe"
)

// MaxPartitions is the most partitions a group may have.
const MaxPartitions = C.MONGOELECTOR_PARTITIONS_MAX

// PartitionerOptions configures a Partitioner. Partitions is required; zero fields of
// the others take the library's defaults.
type PartitionerOptions struct {
	// Partitions is the group's number of partitions, 1..MaxPartitions, the same for
	// every member (a member of another count is refused at Start).
	Partitions int
	TTL        time.Duration // 0 = default (15 s): a lease's (and a member report's) life unrenewed
	Poll       time.Duration // 0 = default (TTL/3); at most TTL/2
	// LocksCollection and MembersCollection: "" = "partitioner.locks" (tokens in
	// "<it>.fences") and "partitioner.members".
	LocksCollection   string
	MembersCollection string
	OpTimeout         time.Duration // 0 = default (TTL/10 clamped to [100 ms, 5 s])
	// OnAssigned runs when this member starts owning partition, with the partition's
	// fencing token (strictly increasing per partition across owners): start working
	// on it, and pass the token to the resource.
	OnAssigned func(partition int, token int64)
	// OnRevoked runs when this member stops owning partition: stop working on it. On a
	// graceful move the partition is released only once OnRevoked has returned, so the
	// next owner's OnAssigned comes after it.
	OnRevoked func(partition int)
}

// Partitioner is a member of a partitioned group: the group's partitions are shared by
// its live members (rendezvous hashing), each owned through a keep-alive lease with its
// own fencing token. When a member joins, leaves or dies only the partitions concerned
// move; a dead member's partitions move when their leases expire (about one TTL).
//
// OnAssigned and OnRevoked run on library threads, one at a time per partitioner, per
// partition always OnAssigned first, then OnRevoked. A partition whose lease is lost
// (the member cut off from the database past its renew deadline) is revoked too, but
// another member may take it while that OnRevoked still runs: fence the writes with
// the token. A panicking callback crashes the program, as any Go panic does. Safe for
// concurrent use.
type Partitioner struct {
	g      guard
	ptr    *C.mongoelector_partitioner
	client *Client
	st     *partitionerState
	handle cgo.Handle // refers to st; deleted only after the C partitioner is freed
	uuid   string
}

// partitionerState is what a partitioner's cgo handle refers to (not the Partitioner,
// so that an unreachable Partitioner can still be finalized).
type partitionerState struct {
	callbackThreads
	onAssigned func(int, int64)
	onRevoked  func(int)
	closed     atomic.Bool // set by Close: no callback starts after it
}

func partitionerStateFrom(ud unsafe.Pointer) *partitionerState {
	return cgo.Handle(uintptr(ud)).Value().(*partitionerState)
}

//export mongoelectorGoOnPartitionAssigned
func mongoelectorGoOnPartitionAssigned(p, token C.int64_t, ud unsafe.Pointer) {
	st := partitionerStateFrom(ud)
	if st.onAssigned != nil && !st.closed.Load() {
		st.callback(func() { runUserCallback("OnAssigned", func() { st.onAssigned(int(p), int64(token)) }) })
	}
}

//export mongoelectorGoOnPartitionRevoked
func mongoelectorGoOnPartitionRevoked(p C.int64_t, ud unsafe.Pointer) {
	st := partitionerStateFrom(ud)
	if st.onRevoked != nil && !st.closed.Load() {
		st.callback(func() { runUserCallback("OnRevoked", func() { st.onRevoked(int(p)) }) })
	}
}

// NewPartitioner makes a member of group (ensuring the collections' indexes: round trips,
// bounded by ctx). It does not join: Start does.
func NewPartitioner(ctx context.Context, client *Client, group string, opts *PartitionerOptions) (*Partitioner, error) {
	if client == nil {
		return nil, invalidArgument("client is nil")
	}
	if opts == nil {
		return nil, invalidArgument("opts is nil: a partitioner needs at least Partitions")
	}
	if opts.TTL < 0 || opts.Poll < 0 || opts.OpTimeout < 0 {
		return nil, invalidArgument("TTL, Poll and OpTimeout must not be negative")
	}
	var cfg C.mongoelector_partitioner_config
	if err := call(func() C.mongoelector_status {
		return C.mongoelector_partitioner_config_init(&cfg, C.MONGOELECTOR_PARTITIONER_CONFIG_VERSION)
	}); err != nil {
		return nil, err
	}
	cfg.partitions = C.int64_t(opts.Partitions) // checked by C, naming the field
	if opts.TTL != 0 {
		cfg.ttl_seconds = seconds(opts.TTL)
	}
	cfg.poll_seconds = seconds(opts.Poll)
	cfg.op_timeout_seconds = seconds(opts.OpTimeout)
	var cstrs []*C.char
	freeAll := func() {
		for _, p := range cstrs {
			freeC(p)
		}
	}
	for _, f := range []struct {
		what, value string
		dst         **C.char
	}{
		{"group", group, nil},
		{"LocksCollection", opts.LocksCollection, &cfg.locks_collection},
		{"MembersCollection", opts.MembersCollection, &cfg.members_collection},
	} {
		if f.dst != nil && f.value == "" {
			continue
		}
		cs, err := cstring(f.what, f.value)
		if err != nil {
			freeAll()
			return nil, err
		}
		cstrs = append(cstrs, cs)
		if f.dst != nil {
			*f.dst = cs
		}
	}
	cgroup := cstrs[0]
	st := &partitionerState{onAssigned: opts.OnAssigned, onRevoked: opts.OnRevoked}
	h := cgo.NewHandle(st)
	C.me_set_partition_callbacks(&cfg, C.uintptr_t(h))

	ptr, err := newChild(ctx, client, "new partitioner for "+group, func(cptr *C.mongoelector_client) (*C.mongoelector_partitioner, error) {
		var p *C.mongoelector_partitioner
		err := call(func() C.mongoelector_status { return C.mongoelector_partitioner_new(cptr, cgroup, &cfg, &p) })
		return p, err
	}, func(p *C.mongoelector_partitioner) { C.mongoelector_partitioner_free(p) }, freeAll, h.Delete)
	if err != nil {
		return nil, err
	}
	p := &Partitioner{ptr: ptr, client: client, st: st, handle: h}
	var cu *C.char
	if err := call(func() C.mongoelector_status { return C.mongoelector_partitioner_uuid(ptr, &cu) }); err == nil {
		p.uuid = C.GoString(cu)
	}
	runtime.SetFinalizer(p, (*Partitioner).Close)
	return p, nil
}

// do runs a C call that may wait on the network or on the member loop under ctx. From
// inside one of this partitioner's callbacks it runs on the callback's own thread (the
// library recognises its callbacks by their thread: a stop must not wait for itself).
func (p *Partitioner) do(ctx context.Context, what string, fn func() C.mongoelector_status) error {
	if !p.g.enter() {
		return closedError("partitioner")
	}
	if p.st.insideCallback() {
		defer p.g.exit()
		if err := ctx.Err(); err != nil {
			return contextError(err, what)
		}
		return call(fn)
	}
	_, err := runCtx(ctx, what, func() (struct{}, error) { return struct{}{}, call(fn) }, nil, p.g.exit)
	return err
}

// Start joins the group: one read of the members' reports (ErrInvalidArgument, nothing
// written, when the group's key holds another kind of document or a live member has
// another number of partitions), then the member loop starts on a library thread.
// No-op while running. When ctx ends first the join may still complete: Stop or Close
// leaves.
func (p *Partitioner) Start(ctx context.Context) error {
	err := p.do(ctx, "start partitioner", func() C.mongoelector_status { return C.mongoelector_partitioner_start(p.ptr) })
	if err == nil {
		running.Store(p, struct{}{})
		if p.g.isClosed() { // lost a race with Close: don't pin a closed partitioner
			running.Delete(p)
		}
	}
	return err
}

// Stop leaves the group: this member's report says so at once, OnRevoked runs for every
// partition it holds and each is released (fenced) once it has returned. It waits for
// all that (unless ctx ends first); from one of this partitioner's callbacks it only
// asks, and the member leaves once the callback has returned. Start joins again.
func (p *Partitioner) Stop(ctx context.Context) error {
	err := p.do(ctx, "stop partitioner", func() C.mongoelector_status { return C.mongoelector_partitioner_stop(p.ptr) })
	running.Delete(p)
	return err
}

// Owned returns the partitions this member owns now and their fencing tokens. Owned
// means: the partition's lease is not lost (read from its renew deadline and the
// monotonic clock) and no release of it is under way. No round trip.
func (p *Partitioner) Owned() (map[int]int64, error) {
	var arr *C.mongoelector_partition_token
	var n C.size_t
	if err := local(&p.g, "partitioner", func() C.mongoelector_status {
		return C.mongoelector_partitioner_owned(p.ptr, &arr, &n)
	}); err != nil {
		return nil, err
	}
	defer C.mongoelector_free(unsafe.Pointer(arr))
	out := make(map[int]int64, int(n))
	for _, t := range unsafe.Slice(arr, int(n)) {
		out[int(t.partition)] = int64(t.token)
	}
	return out, nil
}

// Token is the fencing token of partition while this member owns it (ok false when it
// does not). ErrInvalidArgument for a partition outside 0..Partitions-1. No round trip.
func (p *Partitioner) Token(partition int) (token int64, ok bool, err error) {
	var t C.int64_t
	err = local(&p.g, "partitioner", func() C.mongoelector_status {
		return C.mongoelector_partitioner_token(p.ptr, C.int64_t(partition), &t)
	})
	return int64(t), err == nil && t != 0, err
}

// Running reports whether the member loop runs (Start until Stop).
func (p *Partitioner) Running() (bool, error) {
	var r C.int
	err := local(&p.g, "partitioner", func() C.mongoelector_status { return C.mongoelector_partitioner_running(p.ptr, &r) })
	return r != 0, err
}

// UUID is this member's uuid, the owner named in the partitions' lock documents.
func (p *Partitioner) UUID() string { return p.uuid }

// Status reads the group's assignment as its documents show it (one read of the
// members' reports and one per partition).
func (p *Partitioner) Status(ctx context.Context) (*PartitionStatus, error) {
	var out *PartitionStatus
	var perr error
	// Parsed (and freed) by the call itself: one that ends after ctx cleans up after itself.
	if err := p.do(ctx, "partitioner status", func() C.mongoelector_status {
		var text *C.char
		st := C.mongoelector_partitioner_status(p.ptr, &text)
		if st == C.MONGOELECTOR_OK {
			out, perr = parsePartitionStatus(text)
		}
		return st
	}); err != nil {
		return nil, err
	}
	return out, perr
}

// ReadPartitionStatus reads the assignment of group without joining it (nothing is
// written or created). partitions: the group's number of partitions, or 0 to take it
// from the live members' reports (ErrInvalidArgument when none is live).
func ReadPartitionStatus(ctx context.Context, client *Client, group string, partitions int) (*PartitionStatus, error) {
	if client == nil {
		return nil, invalidArgument("client is nil")
	}
	if !client.g.enter() {
		return nil, closedError("client")
	}
	cgroup, err := cstring("group", group)
	if err != nil {
		client.g.exit()
		return nil, err
	}
	// The status is parsed on the goroutine of the C call: one that ends after ctx frees
	// its own text.
	return runCtx(ctx, "partition status of "+group, func() (*PartitionStatus, error) {
		var text *C.char
		if err := call(func() C.mongoelector_status {
			return C.mongoelector_client_partition_status(client.ptr, cgroup, C.int64_t(partitions), nil, nil, &text)
		}); err != nil {
			return nil, err
		}
		return parsePartitionStatus(text)
	}, nil, func() { freeC(cgroup); client.g.exit() })
}

// Close stops the partitioner (Stop: OnRevoked runs for what it holds), waits for it
// and frees it. It waits for calls still running in the background. Idempotent and safe
// for concurrent use. Called from inside one of this partitioner's callbacks, it returns
// at once; no callback of it starts afterwards and it is freed once the callback has
// returned.
func (p *Partitioner) Close() error {
	if !p.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(p, nil)
	running.Delete(p)
	if p.st.insideCallback() {
		p.st.closed.Store(true)
		go p.free()
		return nil
	}
	p.free()
	return nil
}

func (p *Partitioner) free() {
	p.g.wait()
	C.mongoelector_partitioner_free(p.ptr)
	p.st.closed.Store(true)
	p.g.mu.Lock()
	p.ptr = nil
	p.g.mu.Unlock()
	// Only now can no callback run any more.
	p.handle.Delete()
	p.client.childDone()
}

// PartitionStatus is a group's assignment as its documents show it.
type PartitionStatus struct {
	Group      string
	Partitions int
	ServerTime time.Time // when it was read, on the server's clock
	// Settled: every partition is held by the member rendezvous hashing assigns it.
	Settled   bool
	Members   []PartitionMember // every report of the group, live or not
	Owners    []PartitionOwner  // one per partition, in order
	Conflicts []string          // reports that cannot be the group's, and why
}

// PartitionMember is one member's report.
type PartitionMember struct {
	UUID, Host string
	PID        int64
	Live       bool      // counts for the assignment
	Running    bool      // false once it left
	Expires    time.Time // its report's expiry (zero when none)
	Owned      int       // partitions it holds now
	Assigned   int       // partitions rendezvous hashing gives it
}

// PartitionOwner is one partition's lock.
type PartitionOwner struct {
	Partition int
	Key       string // "<group>/<partition>": the partition's lock
	Owner     string // the holder's uuid while held, else ""
	Host      string
	PID       int64
	Token     int64     // the lock's fencing token (0: never held)
	Expires   time.Time // the holder's lease expiry (zero when free)
	Assigned  string    // the member rendezvous hashing gives it ("" without live members)
	Conflict  string    // another kind of document at Key ("" when none)
}

type partitionStatusJSON struct {
	Group        string `json:"group"`
	Partitions   extInt `json:"partitions"`
	ServerTimeMS extInt `json:"server_time_ms"`
	Settled      bool   `json:"settled"`
	Members      []struct {
		UUID     string `json:"uuid"`
		Host     string `json:"host"`
		PID      extInt `json:"pid"`
		Live     bool   `json:"live"`
		Running  bool   `json:"running"`
		ExpireMS extInt `json:"expire_ms"`
		Owned    extInt `json:"owned"`
		Assigned extInt `json:"assigned"`
	} `json:"members"`
	Owners []struct {
		Partition extInt `json:"partition"`
		Key       string `json:"key"`
		Owner     string `json:"owner"`
		Host      string `json:"host"`
		PID       extInt `json:"pid"`
		Token     extInt `json:"token"`
		ExpireMS  extInt `json:"expire_ms"`
		Assigned  string `json:"assigned"`
		Conflict  string `json:"conflict"`
	} `json:"owners"`
	Conflicts []struct {
		Message string `json:"message"`
	} `json:"conflicts"`
}

func msTime(ms extInt) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms))
}

// parsePartitionStatus reads (and frees) the C API's status object.
func parsePartitionStatus(text *C.char) (*PartitionStatus, error) {
	defer C.mongoelector_free(unsafe.Pointer(text))
	var j partitionStatusJSON
	if err := json.Unmarshal([]byte(C.GoString(text)), &j); err != nil {
		return nil, err
	}
	st := &PartitionStatus{Group: j.Group, Partitions: int(j.Partitions), ServerTime: msTime(j.ServerTimeMS),
		Settled: j.Settled}
	for _, m := range j.Members {
		st.Members = append(st.Members, PartitionMember{UUID: m.UUID, Host: m.Host, PID: int64(m.PID),
			Live: m.Live, Running: m.Running, Expires: msTime(m.ExpireMS), Owned: int(m.Owned),
			Assigned: int(m.Assigned)})
	}
	for _, o := range j.Owners {
		st.Owners = append(st.Owners, PartitionOwner{Partition: int(o.Partition), Key: o.Key, Owner: o.Owner,
			Host: o.Host, PID: int64(o.PID), Token: int64(o.Token), Expires: msTime(o.ExpireMS),
			Assigned: o.Assigned, Conflict: o.Conflict})
	}
	for _, c := range j.Conflicts {
		st.Conflicts = append(st.Conflicts, c.Message)
	}
	return st, nil
}
