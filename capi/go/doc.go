// Package mongoelector is the Go binding of libmongoelector: distributed locks with
// fencing tokens and leader election over MongoDB, through the library's stable C ABI.
//
// Build: cgo needs the header (../include in this checkout) and the shared library:
//
//	CGO_LDFLAGS="-L<dir of libmongoelector.so>" LD_LIBRARY_PATH=<same dir> go test ./...
//
// or, with an installed library, `go build -tags mongoelector_pkgconfig` and
// PKG_CONFIG_PATH=<prefix>/lib/pkgconfig.
//
// Every type is safe for concurrent use. Close methods are idempotent; finalizers free
// forgotten handles, but a started Elector stays alive until Stop or Close. Errors are
// *Error values that errors.Is matches to the Err* sentinels; an Acquire ended by its
// context also matches context.Canceled or context.DeadlineExceeded.
package mongoelector
