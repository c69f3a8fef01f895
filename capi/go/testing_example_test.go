package mongoelector_test

// The testing kit from Go: memory://NAME is an in-process backend with the semantics of
// the MongoDB one, so a test of "what does my service do when it loses the lock" needs
// no server. Every client of one name in this process shares its locks.

import (
	"context"
	"fmt"
	"log"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
)

func Example_memoryBackendInTests() {
	client, err := mongoelector.NewClient("memory://example-lost-lease", "")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	// The code under test holds "job" with a keep-alive lease (ttl 1 s: renewed every ~0.33 s).
	lock, err := mongoelector.NewLocker(ctx, client, "job", &mongoelector.LockerOptions{TTL: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Close()
	lease, err := lock.Hold(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Close()

	// The test: another node forces the lock away.
	thief, err := mongoelector.NewLocker(ctx, client, "job", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer thief.Close()
	if _, err := thief.Acquire(ctx, mongoelector.WithForce()); err != nil {
		log.Fatal(err)
	}

	// The lease's context is cancelled at its next renewal.
	select {
	case <-lease.Context().Done():
		fmt.Println("lease lost: the job stops")
	case <-time.After(5 * time.Second):
		fmt.Println("still running without the lock")
	}
	// Output: lease lost: the job stops
}

// A test of "the leader steps down when it is cut off from the database": an hour of
// leadership and the loss of the backend, on a fake clock, in milliseconds and with no
// sleep. What the library reports itself (IsLeader, OnStoppedLeading, a lease's
// Context) is settled when Advance returns.
func Example_fakeClock() {
	ctx := context.Background()
	clock, err := mongoelector.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	defer clock.Close()
	uri, err := clock.MemoryURI("") // a fresh memory:// backend that runs on the clock
	if err != nil {
		log.Fatal(err)
	}
	client, err := mongoelector.NewClient(uri, "")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// The code under test: a service that works while it leads.
	stopped := make(chan struct{})
	elector, err := mongoelector.NewElector(ctx, client, "scheduler", &mongoelector.ElectorOptions{
		TTL: 10 * time.Second,
		OnStartedLeading: func(term context.Context) {
			<-term.Done() // the leader's work, until the term ends
			close(stopped)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer elector.Close()
	if err := elector.Start(); err != nil {
		log.Fatal(err)
	}
	clock.Settle() // the election loop ran its first poll
	clock.Advance(time.Hour)
	leading, _ := elector.IsLeader()
	fmt.Println("leading after an hour:", leading)

	// The database goes away: no renewal gets through. Within one TTL the leader has
	// stepped down (at its renew deadline, before anyone else could take over).
	mongoelector.MemorySetUnavailable(uri, true)
	clock.Advance(10 * time.Second)
	leading, _ = elector.IsLeader()
	fmt.Println("leading 10 s after the cut:", leading)
	<-stopped // the term's context ended: the work stopped
	fmt.Println("work stopped; fake time elapsed:", clock.Elapsed())
	mongoelector.MemorySetUnavailable(uri, false)
	// Output:
	// leading after an hour: true
	// leading 10 s after the cut: false
	// work stopped; fake time elapsed: 1h0m10s
}
