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
	"sync/atomic"
	"unsafe"
)

// callbacks is what an elector's handle refers to. It does not point to the Elector,
// so an unreachable Elector can still be finalized.
type callbacks struct {
	onLeader, onLeaderLoss, onLoop func()

	mu      sync.Mutex
	threads map[uintptr]int // OS threads running one of these callbacks now
}

// onThread reports whether a callback runs on the calling OS thread, i.e. whether the
// caller is inside one (a goroutine running a cgo callback is locked to its thread).
func (cb *callbacks) onThread(tid uintptr) bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.threads[tid] > 0
}

func (cb *callbacks) run(name string, fn func()) {
	if fn == nil {
		return
	}
	tid := currentThreadID()
	cb.mu.Lock()
	if cb.threads == nil {
		cb.threads = map[uintptr]int{}
	}
	cb.threads[tid]++
	cb.mu.Unlock()
	defer func() {
		cb.mu.Lock()
		if cb.threads[tid]--; cb.threads[tid] == 0 {
			delete(cb.threads, tid)
		}
		cb.mu.Unlock()
	}()
	// A panic must not unwind into C frames (that kills the process with a cgo
	// error): report it like the library reports exceptions from callbacks.
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "mongoelector: %s callback panicked: %v\n%s", name, r, debug.Stack())
		}
	}()
	fn()
}

func callbacksFrom(ud unsafe.Pointer) *callbacks {
	return cgo.Handle(uintptr(ud)).Value().(*callbacks)
}

//export mongoelectorGoOnLeader
func mongoelectorGoOnLeader(ud unsafe.Pointer) {
	cb := callbacksFrom(ud)
	cb.run("on_leader", cb.onLeader)
}

//export mongoelectorGoOnLeaderLoss
func mongoelectorGoOnLeaderLoss(ud unsafe.Pointer) {
	cb := callbacksFrom(ud)
	cb.run("on_leader_loss", cb.onLeaderLoss)
}

//export mongoelectorGoOnLoop
func mongoelectorGoOnLoop(ud unsafe.Pointer) {
	cb := callbacksFrom(ud)
	cb.run("on_loop", cb.onLoop)
}

// LogLevel is the level of a library log message.
type LogLevel int

const (
	LogDebug   LogLevel = C.MONGOELECTOR_LOG_DEBUG
	LogInfo    LogLevel = C.MONGOELECTOR_LOG_INFO
	LogWarning LogLevel = C.MONGOELECTOR_LOG_WARNING
	LogError   LogLevel = C.MONGOELECTOR_LOG_ERROR
)

var logHandler atomic.Pointer[func(LogLevel, string)]

//export mongoelectorGoLog
func mongoelectorGoLog(level C.mongoelector_log_level, msg *C.char) {
	h := logHandler.Load()
	if h == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "mongoelector: log handler panicked: %v\n", r)
		}
	}()
	(*h)(LogLevel(level), C.GoString(msg))
}

// leaseLost is what a lease's handle refers to: the cancel of its Context.
type leaseLost struct {
	once   sync.Once
	cancel func()
}

//export mongoelectorGoOnLeaseLost
func mongoelectorGoOnLeaseLost(ud unsafe.Pointer) {
	ll := cgo.Handle(uintptr(ud)).Value().(*leaseLost)
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "mongoelector: on_lost panicked: %v\n%s", r, debug.Stack())
		}
	}()
	ll.once.Do(ll.cancel)
}
