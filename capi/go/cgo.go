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
#if !defined(MONGOELECTOR_VERSION_NUMBER) || MONGOELECTOR_VERSION_NUMBER < 10000
#error "the Go package mongoelector needs libmongoelector >= 1.0.0 (pkg-config mongoelector)"
#endif
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// call runs one C call and, on failure, reads mongoelector_last_error() on the same OS
// thread: the message is thread-local and a goroutine may migrate between cgo calls.
func call(fn func() C.mongoelector_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := fn()
	if st == C.MONGOELECTOR_OK {
		return nil
	}
	return &Error{Code: Code(st), Message: C.GoString(C.mongoelector_last_error())}
}

// guarded runs one C call on a handle while g keeps it alive; what names the handle
// in ErrClosed.
func guarded(g *guard, what string, fn func() C.mongoelector_status) error {
	if !g.enter() {
		return closedError(what)
	}
	defer g.exit()
	return call(fn)
}

// boolCall is guarded for a C function with an int flag result.
func boolCall(g *guard, what string, fn func(*C.int) C.mongoelector_status) (bool, error) {
	var out C.int
	if err := guarded(g, what, func() C.mongoelector_status { return fn(&out) }); err != nil {
		return false, err
	}
	return out != 0, nil
}

// cstring copies s into C memory; release with freeC. Strings with NUL bytes are cut
// there by C anyway, so they are rejected up front with a clear error.
func cstring(what, s string) (*C.char, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nil, &Error{Code: CodeInvalidArgument, Message: what + " contains a NUL byte"}
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

// Version is the runtime version of the loaded libmongoelector, e.g. "1.0.0".
func Version() string { return C.GoString(C.mongoelector_version()) }

// VersionNumber is major*10000 + minor*100 + patch of the loaded library.
func VersionNumber() int { return int(C.mongoelector_version_number()) }

// HeaderVersion is MONGOELECTOR_VERSION_STRING of the header this package was built
// against; Version() may differ when a newer compatible library is loaded.
const HeaderVersion = C.MONGOELECTOR_VERSION_STRING

func unsafePtr(p *C.char) unsafe.Pointer { return unsafe.Pointer(p) }
