package k8slock_test

// The example of docs/go.md ("client-go and controller-runtime"). It runs under `go
// test` on the in-process memory:// backend; with MongoDB the URI is
// "mongodb://host:27017/" and the database a name, and nothing else changes.

import (
	"context"
	"fmt"
	"log"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
	"github.com/mongoelector/mongoelector/capi/go/k8slock"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection"
)

func Example_leaderElector() {
	client, err := mongoelector.NewClient("memory://k8slock-example", "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One Lock per candidate: the election key, and this candidate's identity (unique
	// among the candidates, such as the pod name).
	lock, err := k8slock.New(ctx, client, "my-controller", "pod-a",
		&k8slock.Options{LeaseDuration: 15 * time.Second}) // = the config's LeaseDuration
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Close()

	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true, // the next candidate takes over at once
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				fmt.Println("leading as", lock.Identity())
				// ... the controller's work, until leading is done; here, step down.
				cancel()
			},
			OnStoppedLeading: func() { fmt.Println("stopped leading") },
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	le.Run(ctx) // returns once ctx ends, after the release

	_, _, err = lock.Get(context.Background())
	fmt.Println("lock free after the release:", apierrors.IsNotFound(err))
	// Output:
	// leading as pod-a
	// stopped leading
	// lock free after the release: true
}
