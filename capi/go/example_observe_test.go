package mongoelector_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
)

// Watching who leads from outside the election, and handing leadership over before a
// restart (memory:// here; a mongodb:// client works the same).
func ExampleObserveLeader() {
	client, err := mongoelector.NewClient("memory://example-observe", "")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // closes the channel

	states, err := mongoelector.ObserveLeader(ctx, client, "scheduler",
		&mongoelector.ObserverOptions{Interval: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", (<-states).HasLeader) // the current state comes first

	a, _ := mongoelector.NewElector(ctx, client, "scheduler", &mongoelector.ElectorOptions{TTL: 2 * time.Second})
	defer a.Close()
	var polled sync.Once
	ready := make(chan struct{})
	b, _ := mongoelector.NewElector(ctx, client, "scheduler", &mongoelector.ElectorOptions{
		TTL: 2 * time.Second, OnLoop: func() { polled.Do(func() { close(ready) }) },
	})
	defer b.Close()
	if err := a.Campaign(ctx); err != nil {
		log.Fatal(err)
	}
	aUUID, _ := a.UUID()
	bUUID, _ := b.UUID()
	s := <-states
	fmt.Println("A leads:", s.UUID == aUUID)

	b.Start()
	<-ready // b has reported itself: it can be named
	if err := a.Transfer(ctx, bUUID); err != nil {
		log.Fatal(err)
	}
	next := <-states
	for next.Status == mongoelector.HandoverPending { // B has not taken it yet: nobody leads
		next = <-states
	}
	fmt.Println("B leads:", next.UUID == bUUID, "next token:", next.Fence == s.Fence+1)

	a.Close()
	b.Close() // releases: nobody leads
	fmt.Println("leader:", (<-states).HasLeader)
	// Output:
	// leader: false
	// A leads: true
	// B leads: true next token: true
	// leader: false
}
