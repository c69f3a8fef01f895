// Package mongoelector is the Go binding of libmongoelector: distributed locks with
// fencing tokens and leader election over MongoDB, through the library's stable C ABI
// (libmongoelector.so.1, header mongoelector.h).
//
// # Install
//
// The package uses cgo and links the C library, which must be installed first (the
// module holds no C code; the library's CMake install puts the header,
// libmongoelector.so and a pkg-config file under a prefix):
//
//	cmake -S . -B build -DMONGOELECTOR_BUILD_PYTHON=OFF -DMONGOELECTOR_BUILD_TESTS=OFF
//	cmake --build build -j2 --target mongoelector
//	cmake --install build --prefix /usr/local
//
// Then, in your module:
//
//	go get github.com/mongoelector/mongoelector/capi/go@latest
//
// and import it under its package name:
//
//	import mongoelector "github.com/mongoelector/mongoelector/capi/go"
//
// cgo takes the compiler and linker flags from `pkg-config mongoelector`. pkg-config
// finds a library installed under /usr or /usr/local by itself; for any other prefix set
//
//	PKG_CONFIG_PATH=<prefix>/lib/pkgconfig
//
// when building (no CGO_CFLAGS or CGO_LDFLAGS needed). At run time the dynamic loader
// must find libmongoelector.so.1: a system prefix is found (run ldconfig after
// installing), any other needs LD_LIBRARY_PATH=<prefix>/lib (the pkg-config file sets
// no rpath). Go's build cache does not notice a different pkg-config answer: after
// moving the library to another prefix, run `go clean -cache`.
//
// Module versions are tagged capi/go/vX.Y.Z. The package needs the C library 1.0 or
// newer (an older header is a compile error saying so); HeaderVersion is the header it
// was compiled against, Version() the library loaded at run time.
//
// Building inside the library's own checkout without installing: `-tags mongoelector_dev`
// takes the header from ../include, and CGO_LDFLAGS="-L<dir of libmongoelector.so>" the
// library (tests/bindings/run_go.sh instead writes a pkg-config file for the build tree).
//
// # Use
//
// Every type is safe for concurrent use. Close methods are idempotent; finalizers free
// forgotten handles, but a started Elector stays alive until Stop or Close. Errors are
// *Error values that errors.Is matches to the Err* sentinels; an Acquire ended by its
// context also matches context.Canceled or context.DeadlineExceeded.
package mongoelector
