package mongoelector

// Trampolines the C library calls. user_data carries a cgo.Handle (an integer), never
// a Go pointer. This file holds //export functions, so its preamble may only declare.

/*
#include "mongoelector.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/cgo"
	"runtime/debug"
	"sync"
	"unsafe"
)

// runUserCallback runs fn, user code called on a library (C) thread. A panic there
// cannot unwind through the C frames below, and swallowing it would hide a bug: it is
// recovered here and re-raised, with its original value, on a new goroutine, where
// nothing can recover it, so the program dies as with any unrecovered Go panic. The
// stack of the panicking callback is written to stderr first (the runtime prints the
// stack of the re-raising goroutine). The callback's thread then never returns to the
// library, which must not carry on with half-run user code.
func runUserCallback(name string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			reraise(name, r, debug.Stack())
		}
	}()
	fn()
}

// reraisePanic is the goroutine body that re-raises (a named function: it shows in the
// runtime's trace).
func reraisePanic(r any) { panic(r) }

func reraise(name string, r any, stack []byte) {
	fmt.Fprintf(os.Stderr, "mongoelector: panic in the %s callback: %v\n"+
		"(re-raised on another goroutine: a panic cannot unwind through the C library)\n"+
		"stack of the callback at the panic:\n%s\n", name, r, stack)
	go reraisePanic(r)
	select {} // the process is about to die; don't hand the thread back to C
}

// callbackThreads records the OS threads running one of an object's callbacks (an
// elector's, a partitioner's), so that a call from inside one runs on the callback's own
// thread: the library recognises its callbacks by their thread (a stop must not wait for
// itself). A goroutine running a cgo callback is locked to its thread.
type callbackThreads struct {
	mu      sync.Mutex
	threads map[uintptr]int
}

// insideCallback: the calling goroutine runs one of the object's callbacks.
func (ct *callbackThreads) insideCallback() bool {
	tid := currentThreadID()
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.threads[tid] > 0
}

// callback runs the body of one C callback on its thread, marking the thread as inside
// a callback of the object while it runs.
func (ct *callbackThreads) callback(body func()) {
	tid := currentThreadID()
	ct.mu.Lock()
	if ct.threads == nil {
		ct.threads = map[uintptr]int{}
	}
	ct.threads[tid]++
	ct.mu.Unlock()
	defer func() {
		ct.mu.Lock()
		if ct.threads[tid]--; ct.threads[tid] == 0 {
			delete(ct.threads, tid)
		}
		ct.mu.Unlock()
	}()
	body()
}

func stateFrom(ud unsafe.Pointer) *electorState {
	return cgo.Handle(uintptr(ud)).Value().(*electorState)
}

//export mongoelectorGoOnLeader
func mongoelectorGoOnLeader(ud unsafe.Pointer) {
	st := stateFrom(ud)
	st.callback(st.becameLeader)
}

//export mongoelectorGoOnLeaderLoss
func mongoelectorGoOnLeaderLoss(ud unsafe.Pointer) {
	st := stateFrom(ud)
	st.callback(st.lostLeadership)
}

//export mongoelectorGoOnLoop
func mongoelectorGoOnLoop(ud unsafe.Pointer) {
	st := stateFrom(ud)
	if st.onLoop != nil {
		st.callback(func() { runUserCallback("OnLoop", st.onLoop) })
	}
}

//export mongoelectorGoLogRecord
func mongoelectorGoLogRecord(r *C.mongoelector_log_record, ud unsafe.Pointer) {
	sink := cgo.Handle(uintptr(ud)).Value().(*logSink)
	sink.handle(LogLevel(r.level), func() logRecord { return recordFromC(r) })
}

//export mongoelectorGoLogRelease
func mongoelectorGoLogRelease(ud unsafe.Pointer) {
	// The hand-over point: no thread can call this sink any more.
	cgo.Handle(uintptr(ud)).Delete()
	logSinks.Lock()
	logSinks.n--
	logSinks.Unlock()
}

// leaseLost is what a lease's handle refers to: the cancel of its Context.
type leaseLost struct {
	once   sync.Once
	cancel func()
}

//export mongoelectorGoOnLeaseLost
func mongoelectorGoOnLeaseLost(ud unsafe.Pointer) {
	ll := cgo.Handle(uintptr(ud)).Value().(*leaseLost)
	ll.once.Do(ll.cancel)
}

//export mongoelectorGoOnLeaderChange
func mongoelectorGoOnLeaderChange(s *C.mongoelector_leader_state, ud unsafe.Pointer) {
	// On a LeaderObserver's library thread: copy the state (valid only during the call)
	// and queue it; never blocks on the reader.
	cgo.Handle(uintptr(ud)).Value().(*queue[LeaderState]).push(leaderStateFromC(s))
}
