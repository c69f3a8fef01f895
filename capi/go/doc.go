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
// Module versions are tagged capi/go/vX.Y.Z. The package needs the C library 1.1 or
// newer (an older header is a compile error saying so); HeaderVersion is the header it
// was compiled against, Version() the library loaded at run time. The module is
// pre-1.0: its API may still change between minor versions (see README.md, "Changes").
//
// Building inside the library's own checkout without installing: `-tags mongoelector_dev`
// takes the header from ../include, and CGO_LDFLAGS="-L<dir of libmongoelector.so>" the
// library (tests/bindings/run_go.sh instead writes a pkg-config file for the build tree).
//
// # Use
//
// Every type is safe for concurrent use. Close methods are idempotent; finalizers free
// forgotten handles, but a started Elector stays alive until Stop, Resign or Close, and
// a LeaderObserver until Close (ObserveLeader: until its context ends).
// Options left zero (nil for *bool fields) take the library's defaults, which the C
// API defines for every binding (DefaultLockerOptions, DefaultElectorOptions,
// DefaultSemaphoreOptions, DefaultRWLockOptions). A Semaphore admits up to Limit holders
// of one key at once; an RWLock many readers (RLock) or one writer (Lock).
//
// # Contexts
//
// Every call that may wait on the network takes a context.Context first (as etcd's
// client and client-go do) and returns within a few milliseconds of the context's end,
// even while the C call hangs in a round trip to a frozen server: the C call runs on
// its own goroutine and the caller stops waiting for it. The C call cannot be
// interrupted; it finishes in the background within the per-call timeout (OpTimeout),
// and what it produced is cleaned up: a lock taken after its caller gave up is
// released, a Locker, Elector or Lease made too late is freed. A release or stop that
// its caller stopped waiting for still happens. Waits (Acquire, Hold, Campaign) also
// end in the library: each call has its own C cancel token, cancelled with the
// context, so a cancel never outlives its call. Calls that read local state only
// (Fence, UUID, IsLeader, ...) take no context.
//
// The error of a call ended by its context matches both context.Canceled (or
// context.DeadlineExceeded) and ErrCancelled (or ErrTimeout).
//
// # Errors
//
// Errors are *Error values that errors.Is matches to the Err* sentinels by Status
// (ErrLockExists for MONGOELECTOR_ERR_LOCK_EXISTS, ...). Code, CodeName and Labels
// carry what the backend answered: the MongoDB server's error code, codeName and
// errorLabels (HasLabel("RetryableWriteError")), or an SQLite extended result code.
//
// # Metrics and logs
//
// Stats returns the process-wide metrics of the library (acquire outcomes and latency,
// renewals, leadership changes, the server clock, round trips) without I/O. SetLogger
// sends the library's log records to log/slog, with the attributes event, key, fence,
// uuid and host where the library set them.
//
// # Testing
//
// "memory://NAME" is an in-process backend with the semantics of the MongoDB one, for
// tests that need no server. A FakeClock attached to it (FakeClock.MemoryURI) runs
// everything made on that backend on fake time that moves only through Advance, which
// returns once the library's threads have acted: a test of an hour of leadership, or of
// a leader cut off from the database, runs in milliseconds with no sleep
// (Example_fakeClock). MemorySetUnavailable and MemoryForceExpire make the backend fail
// or a lock expire behind its holder's back.
//
// # Callbacks
//
// OnStartedLeading(ctx) runs on its own goroutine for each term, with a context
// cancelled when the term ends; OnStoppedLeading and OnLoop run on library threads. A
// panic in a callback (or in the slog handler given to SetLogger) is not swallowed: it
// cannot unwind through the C library, so it is recovered on the library's thread,
// its stack written to stderr, and re-raised with its original value on a new
// goroutine: the program dies as with any unrecovered panic.
package mongoelector
