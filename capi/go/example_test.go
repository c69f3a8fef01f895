package mongoelector_test

import (
	"context"
	"fmt"
	"log"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
)

// The README's Go example (compiled by go vet/go test; not run: it needs a server).
func ExampleLocker_Acquire() {
	client, err := mongoelector.NewClient("mongodb://127.0.0.1:27017/", "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lock, err := mongoelector.NewLocker(client, "nightly-report", &mongoelector.LockerOptions{TTL: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fence, err := lock.Acquire(ctx) // errors.Is(err, mongoelector.ErrTimeout) past 10 s
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release()
	fmt.Println("write guarded by token", fence)
}

func ExampleNewElector() {
	client, err := mongoelector.NewClient("mongodb://127.0.0.1:27017/", "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	elector, err := mongoelector.NewElector(client, "scheduler", &mongoelector.ElectorOptions{
		TTL:          15 * time.Second,
		OnLeader:     func() { log.Print("leading") },
		OnLeaderLoss: func() { log.Print("stepped down") },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer elector.Close() // stops and releases leadership
	if err := elector.Start(); err != nil {
		log.Fatal(err)
	}
	select {} // serve
}
