package mongoelector

// Building: by default cgo takes the header and the library from
// `pkg-config mongoelector`, i.e. an installed libmongoelector (cmake --install;
// PKG_CONFIG_PATH=<prefix>/lib/pkgconfig when the prefix is not a system one). This is
// what `go get` users get: the module alone holds no C header.
//
// In this checkout, `-tags mongoelector_dev` takes the header from ../include and links
// -lmongoelector wherever CGO_LDFLAGS points:
//
//	CGO_LDFLAGS="-L<dir of libmongoelector.so>" LD_LIBRARY_PATH=<same dir> go test -tags mongoelector_dev ./...

/*
#cgo !mongoelector_dev pkg-config: mongoelector
#cgo mongoelector_dev CFLAGS: -I${SRCDIR}/../include
#cgo mongoelector_dev LDFLAGS: -lmongoelector
#include <stdlib.h>
#include "mongoelector.h"
#if !defined(MONGOELECTOR_VERSION_NUMBER) || MONGOELECTOR_VERSION_NUMBER < 10100
#error "the Go package mongoelector needs libmongoelector >= 1.1.0 (pkg-config mongoelector)"
#endif
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// call runs one C call and, on failure, reads mongoelector_last_error_info() on the same
// OS thread: the error is thread-local and a goroutine may migrate between cgo calls.
func call(fn func() C.mongoelector_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := fn()
	if st == C.MONGOELECTOR_OK {
		return nil
	}
	return lastError(st)
}

// lastError is the error of the failed call that returned st on this OS thread (the
// caller is locked to it).
func lastError(st C.mongoelector_status) *Error {
	e := &Error{Status: Status(st)}
	var info C.mongoelector_error_info
	info.version = C.MONGOELECTOR_ERROR_INFO_VERSION
	if C.mongoelector_last_error_info(&info) != C.MONGOELECTOR_OK {
		e.Message = C.GoString(C.mongoelector_last_error())
		return e
	}
	e.Message = C.GoString(info.message)
	e.Code = int32(info.code)
	e.CodeName = C.GoString(info.code_name)
	if info.labels != nil && info.label_count > 0 {
		for _, l := range unsafe.Slice(info.labels, int(info.label_count)) {
			e.Labels = append(e.Labels, C.GoString(l))
		}
	}
	return e
}

// runCtx runs op, a C call that may wait on the network, so that the caller stops
// waiting when ctx ends: op runs on its own goroutine and, if ctx ends first, runCtx
// returns contextError(ctx.Err()) at once. The C call cannot be interrupted (it ends
// within its per-call timeout); when it returns after its caller gave up, late (may be
// nil) gets its result to clean up: release a lock taken too late, free a handle made
// too late. done (may be nil) runs once op and late are over, on whichever goroutine
// ran them; when the caller gets op's result, done has already run. With ctx already
// done, op and late do not run, done does.
//
// A result that is ready when ctx ends is returned, not abandoned. With a ctx that can
// never end, op runs on the calling goroutine.
func runCtx[T any](ctx context.Context, what string, op func() (T, error), late func(T, error),
	done func()) (T, error) {
	v, _, err := runCtxAbandon(ctx, what, op, late, done)
	return v, err
}

// runCtxAbandon is runCtx, also reporting whether op was abandoned (still running or
// run by late): then its result belongs to late.
func runCtxAbandon[T any](ctx context.Context, what string, op func() (T, error), late func(T, error),
	done func()) (T, bool, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		if done != nil {
			done()
		}
		return zero, false, contextError(err, what)
	}
	if ctx.Done() == nil {
		v, err := op()
		if done != nil {
			done()
		}
		return v, false, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		v, err := op()
		mu.Lock()
		if !abandoned {
			if done != nil {
				done()
			}
			ch <- result{v, err}
			mu.Unlock()
			return
		}
		mu.Unlock()
		if late != nil {
			late(v, err)
		}
		if done != nil {
			done()
		}
	}()
	select {
	case r := <-ch:
		return r.v, false, r.err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case r := <-ch:
			return r.v, false, r.err
		default:
		}
		abandoned = true
		return zero, true, contextError(ctx.Err(), what)
	}
}

// guarded runs one C call on a handle while g keeps it alive, under ctx (runCtx); what
// names the call in errors.
func guarded(ctx context.Context, g *guard, handle, what string, fn func() C.mongoelector_status) error {
	if !g.enter() {
		return closedError(handle)
	}
	_, err := runCtx(ctx, what, func() (struct{}, error) { return struct{}{}, call(fn) }, nil, g.exit)
	return err
}

// local runs one C call on a handle that reads local state only (no round trip).
func local(g *guard, handle string, fn func() C.mongoelector_status) error {
	if !g.enter() {
		return closedError(handle)
	}
	defer g.exit()
	return call(fn)
}

// boolCall is guarded for a C function with an int flag result.
func boolCall(ctx context.Context, g *guard, handle, what string, fn func(*C.int) C.mongoelector_status) (bool, error) {
	var out C.int
	if err := guarded(ctx, g, handle, what, func() C.mongoelector_status { return fn(&out) }); err != nil {
		return false, err
	}
	return out != 0, nil
}

// cstring copies s into C memory; release with freeC. Strings with NUL bytes are cut
// there by C anyway, so they are rejected up front with a clear error.
func cstring(what, s string) (*C.char, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nil, invalidArgument(what + " contains a NUL byte")
		}
	}
	return C.CString(s), nil
}

func freeC(p *C.char) {
	if p != nil {
		C.free(unsafe.Pointer(p))
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func seconds(d time.Duration) C.double { return C.double(d.Seconds()) }

func fromSeconds(s C.double) time.Duration { return time.Duration(float64(s) * float64(time.Second)) }

// Bool returns a pointer to b, for the *bool fields of the options structs (nil there
// means "the library's default").
func Bool(b bool) *bool { return &b }

// Version is the runtime version of the loaded libmongoelector, e.g. "1.1.0".
func Version() string { return C.GoString(C.mongoelector_version()) }

// VersionNumber is major*10000 + minor*100 + patch of the loaded library.
func VersionNumber() int { return int(C.mongoelector_version_number()) }

// HeaderVersion is MONGOELECTOR_VERSION_STRING of the header this package was built
// against; Version() may differ when a newer compatible library is loaded.
const HeaderVersion = C.MONGOELECTOR_VERSION_STRING

func unsafePtr(p *C.char) unsafe.Pointer { return unsafe.Pointer(p) }
