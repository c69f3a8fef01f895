package mongoelector_test

// The README's examples. They run under `go test` (their output is checked) on the
// embedded SQLite backend, so that they need no server: with MongoDB, the URI is
// "mongodb://host:27017/" and the database a name, and nothing else changes.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	mongoelector "github.com/mongoelector/mongoelector/capi/go"
)

// exampleURI is a fresh SQLite lock file (the README uses mongodb://127.0.0.1:27017/).
func exampleURI() string {
	dir, err := os.MkdirTemp("", "mongoelector-example")
	if err != nil {
		log.Fatal(err)
	}
	return "sqlite://" + filepath.Join(dir, "locks.db")
}

func ExampleLocker_Acquire() {
	client, err := mongoelector.NewClient(exampleURI(), "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lock, err := mongoelector.NewLocker(ctx, client, "nightly-report", &mongoelector.LockerOptions{TTL: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Close()

	// Waits until the lock is free or ctx ends (errors.Is(err, context.DeadlineExceeded)).
	fence, err := lock.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Pass fence with every write the lock guards: it only grows.
	fmt.Println("holding nightly-report, fencing token > 0:", fence > 0)

	// Another holder is refused at once.
	other, err := mongoelector.NewLocker(ctx, client, "nightly-report", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	_, err = other.TryAcquire(ctx)
	fmt.Println("second holder refused:", errors.Is(err, mongoelector.ErrLockExists))

	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding nightly-report, fencing token > 0: true
	// second holder refused: true
}

func ExampleSemaphore_Acquire() {
	client, err := mongoelector.NewClient(exampleURI(), "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// At most 2 concurrent exports; one Semaphore per concurrent holder.
	opts := &mongoelector.SemaphoreOptions{Limit: 2, TTL: time.Minute}
	var slots []*mongoelector.Semaphore
	for i := 0; i < 3; i++ {
		s, err := mongoelector.NewSemaphore(ctx, client, "exports", opts)
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close() // releases a slot still held
		slots = append(slots, s)
	}

	first, err := slots[0].Acquire(ctx) // waits for a free slot or the end of ctx
	if err != nil {
		log.Fatal(err)
	}
	second, err := slots[1].Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two holders, tokens grow:", second > first)

	_, err = slots[2].TryAcquire(ctx)
	fmt.Println("third refused:", errors.Is(err, mongoelector.ErrLockExists))

	if err := slots[0].Release(ctx); err != nil {
		log.Fatal(err)
	}
	third, err := slots[2].TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("third in after a release, larger token:", third > second)
	// Output:
	// two holders, tokens grow: true
	// third refused: true
	// third in after a release, larger token: true
}

func ExampleRWLock() {
	client, err := mongoelector.NewClient(exampleURI(), "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Many readers of the catalog at once, or one writer. One RWLock per holder.
	var holders []*mongoelector.RWLock
	for i := 0; i < 3; i++ {
		l, err := mongoelector.NewRWLock(ctx, client, "catalog", &mongoelector.RWLockOptions{TTL: time.Minute})
		if err != nil {
			log.Fatal(err)
		}
		defer l.Close() // releases a side still held
		holders = append(holders, l)
	}
	reader1, reader2, writer := holders[0], holders[1], holders[2]

	r1, err := reader1.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := reader2.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers at once:", r1 > 0 && r2 > r1)
	_, err = writer.TryLock(ctx)
	fmt.Println("writer refused while they read:", errors.Is(err, mongoelector.ErrLockExists))

	for _, r := range []*mongoelector.RWLock{reader1, reader2} {
		if err := r.RUnlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	w, err := writer.Lock(ctx) // waits for the readers (and stops new ones meanwhile)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the writer's token is above the readers':", w > r2)
	if err := writer.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// two readers at once: true
	// writer refused while they read: true
	// the writer's token is above the readers': true
}

func ExampleElector_Campaign() {
	client, err := mongoelector.NewClient(exampleURI(), "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	working := make(chan struct{})
	stopped := make(chan struct{})
	elector, err := mongoelector.NewElector(ctx, client, "scheduler", &mongoelector.ElectorOptions{
		TTL: 15 * time.Second,
		// Runs on its own goroutine for the whole term; ctx ends when leadership does.
		OnStartedLeading: func(ctx context.Context) {
			close(working)
			<-ctx.Done() // do the leader's work until then
			close(stopped)
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer elector.Close() // stops and releases leadership

	// Blocks until this node leads (or ctx ends).
	if err := elector.Campaign(ctx); err != nil {
		log.Fatal(err)
	}
	<-working
	fence, _ := elector.Fence() // the term's token, for the writes the leader makes
	fmt.Println("leading, fencing token > 0:", fence > 0)

	// Gives leadership up now and leaves the election.
	if err := elector.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	<-stopped
	fmt.Println("the term's context ended")
	// Output:
	// leading, fencing token > 0: true
	// stopped leading
	// the term's context ended
}

func ExampleElector_Observe() {
	client, err := mongoelector.NewClient(exampleURI(), "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	elector, err := mongoelector.NewElector(ctx, client, "scheduler", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer elector.Close()

	changes := elector.Observe(ctx) // the current state first, then every change
	if err := elector.Start(); err != nil {
		log.Fatal(err)
	}
	for change := range changes {
		fmt.Println("leading:", change.Leading)
		if change.Leading {
			break
		}
	}
	// Output:
	// leading: false
	// leading: true
}

func ExampleSetLogger() {
	// The library's messages (leadership changes at INFO, renewal trouble at WARN) go to
	// slog; the handler's level at this call is the minimum the library formats.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := mongoelector.SetLogger(logger.With("component", "mongoelector")); err != nil {
		log.Fatal(err)
	}
	defer mongoelector.SetLogger(nil) // back to the default: warnings and errors to stderr
}

func ExampleStats() {
	client, err := mongoelector.NewClient(exampleURI(), "app")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	lock, err := mongoelector.NewLocker(ctx, client, "nightly-report", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Close()

	// Process-wide counters that only grow (no I/O): export them, or compare two
	// snapshots for a rate.
	before, err := mongoelector.Stats()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := lock.Acquire(ctx); err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	after, _ := mongoelector.Stats()
	// (Other goroutines' calls count too: a delta is at least this one call.)
	fmt.Println("acquire counted:", after.Acquires.Acquired > before.Acquires.Acquired)
	h := after.AcquireLatency
	fmt.Println("latency buckets:", len(h.Buckets), "last bound:", h.Bounds[len(h.Bounds)-1])
	// Output:
	// acquire counted: true
	// latency buckets: 15 last bound: 30s
}
