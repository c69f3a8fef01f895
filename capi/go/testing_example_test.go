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
