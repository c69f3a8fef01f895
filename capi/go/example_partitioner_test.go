package mongoelector_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
)

// A worker of the group "ingest", whose 4 partitions are shared by every live worker:
// each partition it is assigned comes with its fencing token, to pass to what the
// partition's writes go to. Here on the in-process backend with a fake clock (no server,
// no sleeps); with MongoDB the client is NewClient("mongodb://host:27017/", "app").
func ExamplePartitioner() {
	clock, err := mongoelector.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	defer clock.Close()
	uri, _ := clock.MemoryURI("")
	client, err := mongoelector.NewClient(uri, "")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	var mu sync.Mutex // the callbacks run on library threads
	working := map[int]int64{}
	worker, err := mongoelector.NewPartitioner(ctx, client, "ingest", &mongoelector.PartitionerOptions{
		Partitions: 4,
		TTL:        15 * time.Second,
		OnAssigned: func(p int, token int64) { mu.Lock(); working[p] = token; mu.Unlock() },
		OnRevoked:  func(p int) { mu.Lock(); delete(working, p); mu.Unlock() },
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil { // joins the group
		log.Fatal(err)
	}
	clock.Advance(time.Second) // the first poll claims what is assigned to it

	owned, _ := worker.Owned()
	mu.Lock()
	fmt.Println("owned:", len(owned), "working on:", len(working))
	mu.Unlock()
	st, _ := worker.Status(ctx)
	fmt.Println("members:", len(st.Members), "settled:", st.Settled)

	worker.Close() // leaves: OnRevoked for each partition, then each is released
	fmt.Println("working on after Close:", len(working))
	// Output:
	// owned: 4 working on: 4
	// members: 1 settled: true
	// working on after Close: 0
}
