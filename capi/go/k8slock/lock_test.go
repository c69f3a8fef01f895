package k8slock_test

// The resourcelock.Interface contract, on the in-process memory:// backend: Get of a
// free lock is NotFound, Create and Update are conditional writes, the record
// round-trips.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
	"github.com/mongoelector/mongoelector/capi/go/k8slock"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

const (
	testDB    = "mongoelector_go_test"
	testLease = 2 * time.Second
)

var seq atomic.Int64

// memoryURI is a fresh in-process backend for one test.
func memoryURI(t *testing.T) string {
	return fmt.Sprintf("memory://k8slock-%s-%d-%d", t.Name(), os.Getpid(), seq.Add(1))
}

func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("k8slock-%s-%d-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano(), seq.Add(1))
}

func newClient(t *testing.T, uri string) *mongoelector.Client {
	t.Helper()
	c, err := mongoelector.NewClient(uri, testDB)
	if err != nil {
		t.Fatalf("NewClient(%s): %v", uri, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newLock(t *testing.T, c *mongoelector.Client, key, identity string) *k8slock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := k8slock.New(ctx, c, key, identity, &k8slock.Options{LeaseDuration: testLease})
	if err != nil {
		t.Fatalf("k8slock.New(%s, %s): %v", key, identity, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// record is what client-go writes for identity, with times that need more than
// seconds.
func record(identity string, transitions int) rl.LeaderElectionRecord {
	now := metav1.NewTime(time.Now())
	return rl.LeaderElectionRecord{
		HolderIdentity:       identity,
		LeaseDurationSeconds: int(testLease / time.Second),
		AcquireTime:          now,
		RenewTime:            now,
		LeaderTransitions:    transitions,
	}
}

func sameRecord(t *testing.T, what string, got *rl.LeaderElectionRecord, want rl.LeaderElectionRecord) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no record", what)
	}
	if got.HolderIdentity != want.HolderIdentity || got.LeaseDurationSeconds != want.LeaseDurationSeconds ||
		!got.AcquireTime.Time.Equal(want.AcquireTime.Time) || !got.RenewTime.Time.Equal(want.RenewTime.Time) ||
		got.LeaderTransitions != want.LeaderTransitions || got.Strategy != want.Strategy ||
		got.PreferredHolder != want.PreferredHolder {
		t.Fatalf("%s: record\n got %+v\nwant %+v", what, *got, want)
	}
}

func get(t *testing.T, l *k8slock.Lock) (*rl.LeaderElectionRecord, []byte) {
	t.Helper()
	rec, raw, err := l.Get(context.Background())
	if err != nil {
		t.Fatalf("Get by %s: %v", l.Identity(), err)
	}
	if len(raw) == 0 {
		t.Fatalf("Get by %s: empty raw record", l.Identity())
	}
	return rec, raw
}

// wantHolder checks who holds the lock, as l reads it.
func wantHolder(t *testing.T, l *k8slock.Lock, want, what string) {
	t.Helper()
	if rec, _ := get(t, l); rec.HolderIdentity != want {
		t.Fatalf("%s: the lock names %q, want %q", what, rec.HolderIdentity, want)
	}
}

func TestGetOfAFreeLockIsNotFound(t *testing.T) {
	c := newClient(t, memoryURI(t))
	a := newLock(t, c, "k", "a")
	rec, raw, err := a.Get(context.Background())
	if !apierrors.IsNotFound(err) || rec != nil || raw != nil {
		t.Fatalf("Get of a free lock: %v, %v, %q; want a NotFound error", rec, err, raw)
	}
	if a.Identity() != "a" || a.Describe() != "k" {
		t.Fatalf("Identity/Describe: %q %q", a.Identity(), a.Describe())
	}
}

func TestCreateThenGetRoundTrips(t *testing.T) {
	c := newClient(t, memoryURI(t))
	a, b := newLock(t, c, "k", "a"), newLock(t, c, "k", "b")
	want := record("a", 7)
	want.AcquireTime = metav1.NewTime(time.Date(2031, 3, 4, 5, 6, 7, 891234567, time.UTC))
	want.Strategy = coordinationv1.OldestEmulationVersion
	want.PreferredHolder = "b"
	if err := a.Create(context.Background(), want); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, rawA := get(t, a)
	sameRecord(t, "Get by the holder", got, want)
	got, rawB := get(t, b)
	sameRecord(t, "Get by another candidate", got, want)
	if string(rawA) != string(rawB) {
		t.Fatalf("raw records differ: %s vs %s", rawA, rawB)
	}

	// Each renewal is a new raw record (client-go's timer follows the bytes).
	next := record("a", 7)
	next.AcquireTime = want.AcquireTime
	if err := a.Update(context.Background(), next); err != nil {
		t.Fatalf("Update by the holder: %v", err)
	}
	got, rawB2 := get(t, b)
	sameRecord(t, "Get after the renewal", got, next)
	if string(rawB2) == string(rawB) {
		t.Fatalf("raw record unchanged by a renewal: %s", rawB2)
	}
}

func TestCreateWhenHeldFails(t *testing.T) {
	c := newClient(t, memoryURI(t))
	a, b := newLock(t, c, "k", "a"), newLock(t, c, "k", "b")
	if err := a.Create(context.Background(), record("a", 0)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := b.Create(context.Background(), record("b", 1)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create while another holds the lock: %v, want AlreadyExists", err)
	}
	if err := a.Create(context.Background(), record("a", 0)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create by the holder: %v, want AlreadyExists", err)
	}
	wantHolder(t, b, "a", "after the refused Creates")
}

func TestUpdateFromAStaleObservationFails(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memoryURI(t))
	a, b := newLock(t, c, "k", "a"), newLock(t, c, "k", "b")
	if err := a.Create(ctx, record("a", 0)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	get(t, b) // b observes a's first record
	if err := a.Update(ctx, record("a", 0)); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if err := b.Update(ctx, record("b", 1)); !apierrors.IsConflict(err) {
		t.Fatalf("Update from a stale observation: %v, want Conflict", err)
	}
	// A fresh observation of a running lease does not help either.
	get(t, b)
	if err := b.Update(ctx, record("b", 1)); !apierrors.IsConflict(err) {
		t.Fatalf("Update while another's lease runs: %v, want Conflict", err)
	}
	// Nor does one from before a release: the next holder Creates.
	if err := a.Update(ctx, rl.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := b.Update(ctx, record("b", 1)); !apierrors.IsConflict(err) {
		t.Fatalf("Update from an observation older than the release: %v, want Conflict", err)
	}
	if _, _, err := b.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after the release: %v, want NotFound", err)
	}
	if err := b.Create(ctx, record("b", 1)); err != nil {
		t.Fatalf("Create after the release: %v", err)
	}
	// The former holder, which has not read since, cannot write over it.
	if err := a.Update(ctx, record("a", 2)); !apierrors.IsConflict(err) {
		t.Fatalf("Update by the former holder: %v, want Conflict", err)
	}
	wantHolder(t, a, "b", "after the refused Update")
}

// A holder whose lease ended behind its back (expired on the server, taken by another)
// can no longer renew.
func TestHolderCannotRenewAnExpiredLease(t *testing.T) {
	ctx := context.Background()
	uri := memoryURI(t)
	c := newClient(t, uri)
	a, b := newLock(t, c, "k", "a"), newLock(t, c, "k", "b")
	if err := a.Create(ctx, record("a", 0)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	get(t, b)
	if held, err := mongoelector.MemoryForceExpire(uri, "elector.locks", "k"); err != nil || !held {
		t.Fatalf("MemoryForceExpire: %v %v", held, err)
	}
	// Free on the server's clock: a reader, like a claim, waits out the uncertainty of
	// its estimate of that clock (a few milliseconds, more on a loaded host) before it
	// calls the lease expired; client-go polls Get and retries a failed Create alike.
	for deadline := time.Now().Add(testLease); ; {
		_, _, err := b.Get(ctx)
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Get of an expired lease: %v, want NotFound", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for deadline := time.Now().Add(testLease); ; {
		err := b.Create(ctx, record("b", 1))
		if err == nil {
			break
		}
		if !apierrors.IsServiceUnavailable(err) && !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			t.Fatalf("Create over an expired lease: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := a.Update(ctx, record("a", 0)); !apierrors.IsConflict(err) {
		t.Fatalf("renewal of a lease taken over: %v, want Conflict", err)
	}
	got, _ := get(t, a)
	if got.HolderIdentity != "b" || got.LeaderTransitions != 1 {
		t.Fatalf("record after the take-over: %+v", *got)
	}
}

// Candidates that all saw the lock free race to Create: exactly one wins, round after
// round.
func TestConcurrentCreatesOneWins(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memoryURI(t))
	const n = 6
	locks := make([]*k8slock.Lock, n)
	for i := range locks {
		locks[i] = newLock(t, c, "k", fmt.Sprintf("c%d", i))
	}
	for round := range 5 {
		for _, l := range locks {
			if _, _, err := l.Get(ctx); !apierrors.IsNotFound(err) {
				t.Fatalf("round %d: Get by %s: %v, want NotFound", round, l.Identity(), err)
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i, l := range locks {
			wg.Go(func() {
				<-start
				errs[i] = l.Create(ctx, record(l.Identity(), round))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: both %s and %s created the record", round, locks[winner].Identity(), locks[i].Identity())
			case err == nil:
				winner = i
			case !apierrors.IsAlreadyExists(err):
				t.Fatalf("round %d: Create by %s: %v, want AlreadyExists", round, locks[i].Identity(), err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won: %v", round, errs)
		}
		wantHolder(t, locks[(winner+1)%n], locks[winner].Identity(), fmt.Sprintf("round %d", round))
		if err := locks[winner].Update(ctx, rl.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
			t.Fatalf("round %d: release: %v", round, err)
		}
	}
}

func TestRefusesRecordsItCannotKeep(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memoryURI(t))
	a := newLock(t, c, "k", "a")
	if err := a.Create(ctx, record("b", 0)); !apierrors.IsBadRequest(err) {
		t.Fatalf("Create naming another holder: %v, want BadRequest", err)
	}
	long := record("a", 0)
	long.LeaseDurationSeconds = 60
	if err := a.Create(ctx, long); !apierrors.IsBadRequest(err) {
		t.Fatalf("Create with a lease longer than the lock's: %v, want BadRequest", err)
	}
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("refused Creates took the lock: %v", err)
	}
	// Releasing what one does not hold is nothing.
	if err := a.Update(ctx, rl.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatalf("release without holding: %v", err)
	}
}

func TestStorageDownFailsTheRenewal(t *testing.T) {
	ctx := context.Background()
	uri := memoryURI(t)
	c := newClient(t, uri)
	a := newLock(t, c, "k", "a")
	if err := a.Create(ctx, record("a", 0)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := mongoelector.MemorySetUnavailable(uri, true); err != nil {
		t.Fatal(err)
	}
	err := a.Update(ctx, record("a", 0))
	if e := mongoelector.MemorySetUnavailable(uri, false); e != nil {
		t.Fatal(e)
	}
	if err == nil {
		t.Fatal("renewal while the storage is down succeeded")
	}
	if err := a.Update(ctx, record("a", 0)); err != nil {
		t.Fatalf("renewal once the storage is back: %v", err)
	}
}

// A lock held by a plain elector reads as held, and is not taken.
func TestForeignHolder(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, memoryURI(t))
	e, err := mongoelector.NewElector(ctx, c, "k", &mongoelector.ElectorOptions{TTL: testLease, DisableStatusReport: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if leading, _ := e.IsLeader(); !leading {
		t.Fatal("the plain elector did not take the free lock")
	}
	uuid, _ := e.UUID()
	a := newLock(t, c, "k", "a")
	got, _ := get(t, a)
	if got.HolderIdentity != k8slock.ForeignHolderPrefix+uuid || got.LeaseDurationSeconds < 1 ||
		got.LeaseDurationSeconds > int(testLease/time.Second) {
		t.Fatalf("record of a foreign holder: %+v", *got)
	}
	if err := a.Create(ctx, record("a", 0)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create over a foreign holder: %v, want AlreadyExists", err)
	}
	if err := a.Update(ctx, record("a", 1)); !apierrors.IsConflict(err) {
		t.Fatalf("Update over a foreign holder: %v, want Conflict", err)
	}
}

func TestRecordEvent(t *testing.T) {
	c := newClient(t, memoryURI(t))
	var got []string
	l, err := k8slock.New(context.Background(), c, "k", "a", &k8slock.Options{
		LeaseDuration: testLease,
		OnEvent:       func(m string) { got = append(got, m) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.RecordEvent("became leader")
	if len(got) != 1 || got[0] != "a became leader" {
		t.Fatalf("events: %q", got)
	}
	// Without OnEvent, events are dropped.
	newLock(t, c, "k", "b").RecordEvent("became leader")
}
