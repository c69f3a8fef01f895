package mongoelector

/*
#include "mongoelector.h"
*/
import "C"

import (
	"context"
	"sync"
)

// LeaderChange is one leadership transition of an Elector, as Observe reports it.
type LeaderChange struct {
	// Leading: this elector leads from now on (false: it does not, or no longer does).
	Leading bool
	// Fence is the fencing token of the term while Leading, else 0.
	Fence int64
	// Leader is the UUID of the node that leads as far as this elector knows without a
	// round trip: its own while Leading, "" otherwise (ClusterDetail tells who leads).
	Leader string
}

// electorState is what an elector's cgo handle refers to: the user's callbacks and the
// leadership as the callbacks report it. It does not point to the Elector, so an
// unreachable Elector can still be finalized.
type electorState struct {
	onStarted       func(context.Context)
	onStopped       func()
	onLoop          func()
	callbackThreads // the OS threads running one of this elector's callbacks now

	mu         sync.Mutex
	ptr        *C.mongoelector_elector
	uuid       string
	leading    bool
	fence      int64
	termCancel context.CancelFunc
	changed    chan struct{} // closed (and replaced) at each change and at close
	observers  map[*queue[LeaderChange]]struct{}
	closed     bool
	closedCh   chan struct{}
}

func newElectorState(opts *ElectorOptions) *electorState {
	return &electorState{
		onStarted: opts.OnStartedLeading,
		onStopped: opts.OnStoppedLeading,
		onLoop:    opts.OnLoop,
		changed:   make(chan struct{}),
		observers: map[*queue[LeaderChange]]struct{}{},
		closedCh:  make(chan struct{}),
	}
}

func (st *electorState) setHandle(ptr *C.mongoelector_elector, uuid string) {
	st.mu.Lock()
	st.ptr, st.uuid = ptr, uuid
	st.mu.Unlock()
}

// notifyLocked wakes Campaign and queues ev for every observer. st.mu is held.
func (st *electorState) notifyLocked(ev *LeaderChange) {
	close(st.changed)
	st.changed = make(chan struct{})
	if ev != nil {
		for o := range st.observers {
			o.push(*ev)
		}
	}
}

func (st *electorState) currentLocked() LeaderChange {
	if st.leading {
		return LeaderChange{Leading: true, Fence: st.fence, Leader: st.uuid}
	}
	return LeaderChange{}
}

// becameLeader: on_leader, on the C callback's thread.
func (st *electorState) becameLeader() {
	st.mu.Lock()
	var isLeader C.int
	var fence C.int64_t
	// Allowed from a callback; local reads. A term that already ended (the renew
	// deadline passed, or a release on another thread, before this callback got here)
	// is not started: its loss callback found nothing to stop either.
	C.mongoelector_elector_is_leader(st.ptr, &isLeader)
	C.mongoelector_elector_fence(st.ptr, &fence)
	if isLeader == 0 || st.closed {
		st.mu.Unlock()
		return
	}
	if st.termCancel != nil {
		st.termCancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	st.leading, st.fence, st.termCancel = true, int64(fence), cancel
	ev := st.currentLocked()
	st.notifyLocked(&ev)
	st.mu.Unlock()
	if st.onStarted != nil {
		// As client-go: on its own goroutine, for the whole term. A panic there is an
		// ordinary goroutine panic.
		go st.onStarted(ctx)
	}
}

// lostLeadership: on_leader_loss, on the C callback's thread (the elector's, a library
// callback thread at a missed deadline, or the one calling Release/Stop/Resign/Close).
func (st *electorState) lostLeadership() {
	st.mu.Lock()
	was := st.leading
	st.endTermLocked()
	if was {
		st.notifyLocked(&LeaderChange{})
	}
	st.mu.Unlock()
	if was && st.onStopped != nil {
		runUserCallback("OnStoppedLeading", st.onStopped)
	}
}

func (st *electorState) endTermLocked() {
	st.leading, st.fence = false, 0
	if st.termCancel != nil {
		st.termCancel()
		st.termCancel = nil
	}
}

// close: the elector is freed; no callback runs any more.
func (st *electorState) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return
	}
	st.closed = true
	st.ptr = nil
	st.endTermLocked()
	close(st.closedCh)
	st.notifyLocked(nil)
}

// queue is an unbounded FIFO that a library (C) thread pushes to without ever blocking
// on a reader; one goroutine forwards it to a channel (forward). Observe channels and
// LeaderObserver use it.
type queue[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{}
}

func newQueue[T any]() *queue[T] { return &queue[T]{wake: make(chan struct{}, 1)} }

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue[T]) pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	if len(q.items) == 0 {
		return zero, false
	}
	v := q.items[0]
	q.items[0] = zero
	q.items = q.items[1:]
	return v, true
}

// forward sends the queued items to out, in order, until stop is closed (what is still
// queued is dropped) or, once drain is closed (nil: never), until the queue is empty.
// It does not close out.
func (q *queue[T]) forward(out chan<- T, stop, drain <-chan struct{}) {
	for {
		v, ok := q.pop()
		if !ok {
			select {
			case <-q.wake:
				continue
			case <-stop:
				return
			case <-drain:
				if v, ok = q.pop(); !ok {
					return
				}
			}
		}
		select {
		case out <- v:
		case <-stop:
			return
		}
	}
}

// Campaign makes this node a candidate and blocks until it leads (nil) or ctx ends
// (an error matching context.Canceled or DeadlineExceeded). It starts the election loop
// if it does not run. The candidacy outlives a cancelled Campaign: the loop keeps
// running (and may win later; OnStartedLeading and Observe tell) until Resign, Stop or
// Close. A closed elector gives ErrClosed.
func (e *Elector) Campaign(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return contextError(err, "campaign")
	}
	if err := e.Start(); err != nil {
		return err
	}
	for {
		e.st.mu.Lock()
		changed, leading, closed := e.st.changed, e.st.leading, e.st.closed
		e.st.mu.Unlock()
		if closed {
			return closedError("elector")
		}
		if leading { // as OnStartedLeading saw it, and still so in the library
			if is, err := e.IsLeader(); err != nil || is {
				return err
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return contextError(ctx.Err(), "campaign")
		}
	}
}

// Resign gives up leadership now and leaves the election, as etcd's Resign: it stops
// the election loop and releases the lock (OnStartedLeading's context is cancelled and
// OnStoppedLeading runs if it led; another node can take over at once). Campaign or
// Start rejoins. To give up only the current term and stay a candidate, use Release.
func (e *Elector) Resign(ctx context.Context) error { return e.stop(ctx, "resign") }

func (e *Elector) stop(ctx context.Context, what string) error {
	err := e.do(ctx, what, func() C.mongoelector_status { return C.mongoelector_elector_stop(e.ptr) })
	running.Delete(e)
	return err
}

// Observe reports this elector's leadership: first the current state, then every
// change (is-leader transitions), in order, without loss. The channel is closed when
// ctx ends or the elector is closed (after the changes queued before). The elector
// never waits for the reader.
func (e *Elector) Observe(ctx context.Context) <-chan LeaderChange {
	out := make(chan LeaderChange)
	st := e.st
	q := newQueue[LeaderChange]()
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		close(out)
		return out
	}
	q.items = append(q.items, st.currentLocked())
	st.observers[q] = struct{}{}
	st.mu.Unlock()
	go func() {
		q.forward(out, ctx.Done(), st.closedCh)
		st.mu.Lock()
		delete(st.observers, q)
		st.mu.Unlock()
		close(out)
	}()
	return out
}

// Run takes part in the election until ctx ends, as client-go's LeaderElector.Run:
// it starts the loop, waits for ctx (or Close), then stops, releasing leadership.
// Leadership is reported through OnStartedLeading/OnStoppedLeading and Observe.
func (e *Elector) Run(ctx context.Context) error {
	if err := e.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-e.st.closedCh:
		return nil
	}
	return e.Stop(context.Background()) // bounded by the per-call timeout
}
