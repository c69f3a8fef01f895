package main

import (
	"syscall"
	"unsafe"
)

// clockGettime reads CLOCK_MONOTONIC (the clock the harness and the other contenders
// stamp events with; Go's own monotonic readings have no fixed origin).
func clockGettime(ts *syscall.Timespec) error {
	const clockMonotonic = 1
	_, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(ts)), 0)
	if e != 0 {
		return e
	}
	return nil
}
