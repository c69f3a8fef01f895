// Package k8slock is a resource lock for client-go's leader election
// (k8s.io/client-go/tools/leaderelection/resourcelock.Interface) kept in mongoelector
// instead of a Kubernetes Lease: client-go's LeaderElector, and controller-runtime
// managers through their LeaderElectionResourceLockInterface option, elect over
// MongoDB (or the sqlite:// and memory:// backends) through the Go binding.
//
//	go get github.com/mongoelector/mongoelector/capi/go/k8slock
//
// # How the record is stored
//
// The lease is a mongoelector election lock on the key, held with a TTL of
// Options.LeaseDuration; the LeaderElectionRecord travels as the holder's leader
// payload, written in the same atomic write that claims the lock. Every write is
// conditional, and the lock admits one holder at a time:
//
//   - Create claims the lock: one conditional write that succeeds only while nobody
//     holds an unexpired lease on the key; otherwise an AlreadyExists error.
//   - Update by the holder writes the record naming its term (holder and fencing
//     token) and renews the lease; it fails (a Conflict error) once that term has ended
//     on the server, taken over, expired or released.
//   - Update by a non-holder first checks that the lock is still exactly as the last
//     Get saw it (holder, fencing token, expiry and record), then claims it as Create
//     does: a Conflict error when either step finds it changed or held. The claim is
//     what is atomic: it never succeeds while another holder's lease runs, so two
//     Updates from one observation never both succeed while the first one holds.
//   - Update with an empty HolderIdentity (client-go's release, ReleaseOnCancel)
//     releases the lock if this Lock holds it and does nothing otherwise.
//   - Get returns a NotFound error (apierrors.IsNotFound) when nobody holds the lock,
//     so that client-go calls Create; the record of the current holder otherwise.
//
// The record round-trips whole (HolderIdentity, LeaseDurationSeconds, AcquireTime and
// RenewTime to the nanosecond, LeaderTransitions, Strategy, PreferredHolder) while a
// holder holds the lock. Nothing is kept once the lock is released or has expired: the
// next holder creates a new record, with LeaderTransitions counting from 0 again.
//
// A lock held by something else than this package (a plain mongoelector Elector on
// the same key) reads as a record whose HolderIdentity is "mongoelector:" and that
// elector's UUID, with LeaseDurationSeconds the time its lease still runs.
//
// # Timing
//
// client-go keeps its own timing on the local clock (LeaseDuration, RenewDeadline,
// RetryPeriod): a leader stops leading when its renewals have failed for RenewDeadline,
// whatever the storage says, and mongoelector's own step-down on the server's clock (an
// Elector's renew deadline) does not reach client-go's callbacks. What the storage
// guarantees is that at most one Lock holds the lease at any instant: the lock's TTL
// (Options.LeaseDuration) ends a silent holder's lease on the server's clock, and only
// then can another candidate's Create succeed. Set Options.LeaseDuration to the
// LeaderElectionConfig's LeaseDuration (Create and Update refuse a record whose
// LeaseDurationSeconds is longer) and keep RenewDeadline plus RetryPeriod well below it,
// so that a cut-off leader stops acting before its lease can end on the server.
//
// A candidate takes over as soon as the lock is free on the server: at once after a
// release, and when the holder's lease has expired (Get turns NotFound), whatever its
// own LeaseDuration timer says. A restarted process that reuses its identity is a new
// holder: it waits for the previous process's lease to end, as any other candidate
// does. client-go's coordinated election (LeaderElectionConfig.Coordinated) is not
// supported.
package k8slock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// DefaultLeaseDuration is Options.LeaseDuration when it is zero: the LeaseDuration
// that controller-runtime managers use by default.
const DefaultLeaseDuration = 15 * time.Second

// ForeignHolderPrefix starts the HolderIdentity of a record that Get makes up for a
// lock held by a mongoelector elector that is not a k8slock Lock.
const ForeignHolderPrefix = "mongoelector:"

// groupResource names the lock in the Kubernetes API errors that Get, Create and
// Update return.
var groupResource = schema.GroupResource{Group: "mongoelector.io", Resource: "locks"}

// Options configures a Lock. Zero fields take their defaults; nil Options are all
// defaults.
type Options struct {
	// LeaseDuration is the TTL of the lock on the server: set it to the
	// LeaderElectionConfig's LeaseDuration (0 = DefaultLeaseDuration).
	LeaseDuration time.Duration
	// OpTimeout bounds one round trip to the server (0 = the library's default:
	// LeaseDuration/10 clamped to [100 ms, 5 s]; else at most LeaseDuration/2).
	OpTimeout time.Duration
	// OnEvent receives what client-go records through RecordEvent, as "<identity>
	// <event>" ("pod-a became leader", "pod-a stopped leading"); nil = dropped.
	OnEvent func(message string)
}

// Lock is a resourcelock.Interface over a mongoelector election lock on one key. Safe
// for concurrent use (calls are serialised). Close it when done: a lease it still holds
// is released.
type Lock struct {
	key      string
	identity string
	ttl      time.Duration
	slack    time.Duration
	onEvent  func(string)
	el       *mongoelector.Elector
	obs      *mongoelector.LeaderObserver

	mu          sync.Mutex
	observed    mongoelector.LeaderState // what the last Get read (ObservedAt zeroed)
	hasObserved bool
}

var _ rl.Interface = (*Lock)(nil)

// New makes a Lock on key for the candidate identity (client-go's Identity: unique
// among the candidates, such as the pod name). Making it is one round trip (the
// lock collection's indexes), bounded by ctx; it does not take part in the election
// until client-go calls Create or Update.
func New(ctx context.Context, client *mongoelector.Client, key, identity string, opts *Options) (*Lock, error) {
	if client == nil {
		return nil, errors.New("k8slock: client is nil")
	}
	if identity == "" {
		return nil, errors.New("k8slock: identity is empty")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.LeaseDuration < 0 {
		return nil, fmt.Errorf("k8slock: LeaseDuration %v is negative", o.LeaseDuration)
	}
	opTimeout := o.OpTimeout
	if opTimeout == 0 { // the library's default, for the observer too
		opTimeout = min(max(o.LeaseDuration/10, 100*time.Millisecond), 5*time.Second)
	}
	// No loop of its own: client-go drives it (Poll), and nothing but Create and Update
	// claims or renews the lock.
	el, err := mongoelector.NewElector(ctx, client, key, &mongoelector.ElectorOptions{
		TTL:                 o.LeaseDuration,
		DisableStatusReport: true,
		DeleteOnRelease:     mongoelector.Bool(false),
		OpTimeout:           o.OpTimeout,
		DisableHandoverPoll: true,
	})
	if err != nil {
		return nil, err
	}
	// Only its Read is used; its own polling is as rare as the library allows.
	obs, err := mongoelector.NewLeaderObserver(client, key, &mongoelector.ObserverOptions{
		Interval:  1e6 * time.Second,
		OpTimeout: opTimeout,
	})
	if err != nil {
		el.Close()
		return nil, err
	}
	return &Lock{
		key:      key,
		identity: identity,
		ttl:      o.LeaseDuration,
		slack:    o.LeaseDuration / 50,
		onEvent:  o.OnEvent,
		el:       el,
		obs:      obs,
	}, nil
}

// Identity is the candidate's identity, as given to New.
func (l *Lock) Identity() string { return l.identity }

// Describe names the lock in client-go's logs: its key.
func (l *Lock) Describe() string { return l.key }

// RecordEvent passes "<identity> <event>" to Options.OnEvent, if set.
func (l *Lock) RecordEvent(event string) {
	if l.onEvent != nil {
		l.onEvent(l.identity + " " + event)
	}
}

// Close releases the lease if this Lock holds it and frees the Lock. Idempotent.
func (l *Lock) Close() error {
	errEl := l.el.Close()
	errObs := l.obs.Close()
	return errors.Join(errEl, errObs)
}

// payload is the leader payload that carries a record: one JSON object whose single
// field marks it as a k8slock record.
type payload struct {
	Record *storedRecord `json:"leaderElectionRecord"`
}

// storedRecord is a LeaderElectionRecord with its times to the nanosecond (metav1.Time
// encodes whole seconds).
type storedRecord struct {
	HolderIdentity       string    `json:"holderIdentity"`
	LeaseDurationSeconds int       `json:"leaseDurationSeconds"`
	AcquireTime          time.Time `json:"acquireTime"`
	RenewTime            time.Time `json:"renewTime"`
	LeaderTransitions    int       `json:"leaderTransitions"`
	Strategy             string    `json:"strategy,omitempty"`
	PreferredHolder      string    `json:"preferredHolder,omitempty"`
}

func toPayload(r rl.LeaderElectionRecord) payload {
	return payload{Record: &storedRecord{
		HolderIdentity:       r.HolderIdentity,
		LeaseDurationSeconds: r.LeaseDurationSeconds,
		AcquireTime:          r.AcquireTime.Time,
		RenewTime:            r.RenewTime.Time,
		LeaderTransitions:    r.LeaderTransitions,
		Strategy:             string(r.Strategy),
		PreferredHolder:      r.PreferredHolder,
	}}
}

// fromPayload decodes a holder's payload; false when it is not a k8slock record.
func fromPayload(text string) (*rl.LeaderElectionRecord, bool) {
	var p payload
	if text == "" || json.Unmarshal([]byte(text), &p) != nil || p.Record == nil {
		return nil, false
	}
	s := p.Record
	return &rl.LeaderElectionRecord{
		HolderIdentity:       s.HolderIdentity,
		LeaseDurationSeconds: s.LeaseDurationSeconds,
		AcquireTime:          localTime(s.AcquireTime),
		RenewTime:            localTime(s.RenewTime),
		LeaderTransitions:    s.LeaderTransitions,
		Strategy:             coordinationv1.CoordinatedLeaseStrategy(s.Strategy),
		PreferredHolder:      s.PreferredHolder,
	}, true
}

// localTime is t in the local zone, as metav1.Time decodes times; the zero time stays
// zero.
func localTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t.Local())
}

// foreignRecord describes a lock held by an elector that is not a k8slock Lock (or a
// pending hand-over): held, for as long as its lease still runs.
func foreignRecord(st mongoelector.LeaderState) (*rl.LeaderElectionRecord, []byte, error) {
	uuid, fence := st.UUID, st.Fence
	if st.Status == mongoelector.HandoverPending {
		uuid, fence = st.HandoverUUID, st.HandoverFence
	}
	secs := int(math.Ceil(st.ExpiresAt.Sub(st.ObservedAt).Seconds()))
	rec := &rl.LeaderElectionRecord{
		HolderIdentity:       ForeignHolderPrefix + uuid,
		LeaseDurationSeconds: max(secs, 1),
		RenewTime:            localTime(st.ObservedAt),
	}
	// Changes exactly when the holder renews (or changes): what client-go's timer
	// follows.
	raw, err := json.Marshal(struct {
		UUID      string    `json:"uuid"`
		Fence     int64     `json:"fence"`
		ExpiresAt time.Time `json:"expiresAt"`
	}{uuid, fence, st.ExpiresAt})
	return rec, raw, err
}

// version is what identifies one state of the lock for the compare of a non-holder's
// Update: everything the observer read except when it read it.
func version(st mongoelector.LeaderState) mongoelector.LeaderState {
	st.ObservedAt = time.Time{}
	return st
}

func conflict(key, format string, a ...any) error {
	return apierrors.NewConflict(groupResource, key, fmt.Errorf(format, a...))
}

// Get reads the lock (one round trip): the holder's record and its raw bytes (the
// stored payload, which changes with every Update), or a NotFound error when nobody
// holds it.
func (l *Lock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, err := l.obs.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	l.observed, l.hasObserved = version(st), true
	switch st.Status {
	case mongoelector.Leading:
		if rec, ok := fromPayload(st.Payload); ok {
			return rec, []byte(st.Payload), nil
		}
		return foreignRecord(st)
	case mongoelector.HandoverPending:
		return foreignRecord(st)
	default: // NoLeader (Read never answers LeaderUnknown)
		return nil, nil, apierrors.NewNotFound(groupResource, l.key)
	}
}

// check refuses records this Lock cannot write: another candidate's identity, or a
// lease longer than the lock's TTL.
func (l *Lock) check(ler rl.LeaderElectionRecord) error {
	if ler.HolderIdentity != l.identity {
		return apierrors.NewBadRequest(fmt.Sprintf(
			"k8slock %s: the record names holder %q, this lock's identity is %q",
			l.key, ler.HolderIdentity, l.identity))
	}
	if time.Duration(ler.LeaseDurationSeconds)*time.Second > l.ttl {
		return apierrors.NewBadRequest(fmt.Sprintf(
			"k8slock %s: the record's leaseDurationSeconds %d is longer than the lock's "+
				"LeaseDuration %v (set Options.LeaseDuration to the LeaderElectionConfig's)",
			l.key, ler.LeaseDurationSeconds, l.ttl))
	}
	return nil
}

// Create claims the lock with ler as its record: nil when this Lock now holds it, an
// AlreadyExists error when another holder's lease runs (or this Lock holds it already).
func (l *Lock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	if err := l.check(ler); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if leading, err := l.el.IsLeader(); err != nil {
		return err
	} else if leading {
		return apierrors.NewAlreadyExists(groupResource, l.key)
	}
	err := l.claim(ctx, ler)
	if err == nil {
		return nil
	}
	if apierrors.IsConflict(err) { // held by someone else
		return apierrors.NewAlreadyExists(groupResource, l.key)
	}
	return err
}

// Update writes ler: the holder renews its lease with it, a non-holder claims the lock
// if it is still as the last Get saw it; an empty HolderIdentity releases the lock if
// this Lock holds it. A Conflict error when the condition does not hold.
func (l *Lock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		return l.release(ctx)
	}
	if err := l.check(ler); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fence, err := l.el.Fence() // 0 when not leading
	if err != nil {
		return err
	}
	if fence != 0 {
		return l.renew(ctx, ler, fence)
	}
	if !l.hasObserved {
		return conflict(l.key, "this lock does not hold the lease and has not read it (Get)")
	}
	st, err := l.obs.Read(ctx)
	if err != nil {
		return err
	}
	if version(st) != l.observed {
		l.observed = version(st)
		return conflict(l.key, "the lock changed since it was read")
	}
	if st.Status == mongoelector.NoLeader {
		return apierrors.NewNotFound(groupResource, l.key)
	}
	return l.claim(ctx, ler)
}

// renew is the holder's Update: the record written naming the term (holder and fence),
// then the lease renewed; both checked.
func (l *Lock) renew(ctx context.Context, ler rl.LeaderElectionRecord, fence int64) error {
	before, err := l.el.NodeStatus(ctx) // its Timestamp: the server's time before the write
	if err != nil {
		return err
	}
	written, err := l.el.SetPayload(ctx, toPayload(ler))
	if err != nil {
		return err
	}
	if !written { // the term is over: taken over, expired or released
		return conflict(l.key, "this lock's lease has ended")
	}
	if err := l.el.Poll(ctx); err != nil {
		return err
	}
	return l.verify(ctx, before.Timestamp, fence)
}

// claim takes a free lock with ler as its record (the claim writes the record in the
// same atomic write); a Conflict error when another holder's lease runs.
func (l *Lock) claim(ctx context.Context, ler rl.LeaderElectionRecord) error {
	before, err := l.el.NodeStatus(ctx)
	if err != nil {
		return err
	}
	// Not leading: kept for the claim, which writes it atomically with the lock.
	if _, err := l.el.SetPayload(ctx, toPayload(ler)); err != nil {
		return err
	}
	if err := l.el.Poll(ctx); err != nil {
		return err
	}
	if leading, err := l.el.IsLeader(); err != nil {
		return err
	} else if !leading {
		st, err := l.obs.Read(ctx)
		if err != nil {
			return err
		}
		if st.Status == mongoelector.NoLeader {
			// Free, yet not taken: the claim failed (the library logged why).
			return apierrors.NewServiceUnavailable(fmt.Sprintf("k8slock %s: the claim of the free lock failed", l.key))
		}
		return conflict(l.key, "another holder's lease runs")
	}
	return l.verify(ctx, before.Timestamp, 0)
}

// verify: after a poll, this Lock holds the lock (in the term fence, unless 0) and its
// lease runs until at least since + TTL on the server's clock (less a small slack for
// the clock estimate): the renewal or claim of this call reached the server.
func (l *Lock) verify(ctx context.Context, since time.Time, fence int64) error {
	after, err := l.el.NodeStatus(ctx)
	if err != nil {
		return err
	}
	if !after.IsLeader {
		return conflict(l.key, "this lock's lease has ended")
	}
	if fence != 0 {
		if f, err := l.el.Fence(); err != nil {
			return err
		} else if f != fence {
			// Lost and taken again within the call: the record says so at the next Get.
			return conflict(l.key, "this lock's term ended during the update")
		}
	}
	if after.LockExpires.Before(since.Add(l.ttl - l.slack)) {
		return apierrors.NewServiceUnavailable(fmt.Sprintf(
			"k8slock %s: the renewal did not reach the server (the lease ends at %v)", l.key, after.LockExpires))
	}
	return nil
}

// release is client-go's release (ReleaseOnCancel): the lock is freed if this Lock
// holds it (a fenced write: another holder's lease is never touched); holding nothing,
// there is nothing to release.
func (l *Lock) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.el.Release(ctx)
}
