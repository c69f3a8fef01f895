package mongoelector

/*
#include "mongoelector.h"
*/
import "C"

import "fmt"

// Code is a mongoelector_status value, plus CodeClosed for Go handles already closed.
type Code int

const (
	CodeOK              Code = C.MONGOELECTOR_OK
	CodeInvalidArgument Code = C.MONGOELECTOR_ERR_INVALID_ARGUMENT
	CodeLockExists      Code = C.MONGOELECTOR_ERR_LOCK_EXISTS
	CodeTimeout         Code = C.MONGOELECTOR_ERR_TIMEOUT
	CodeTimeOffset      Code = C.MONGOELECTOR_ERR_TIME_OFFSET
	CodeCancelled       Code = C.MONGOELECTOR_ERR_CANCELLED
	CodeUnavailable     Code = C.MONGOELECTOR_ERR_UNAVAILABLE
	CodeServer          Code = C.MONGOELECTOR_ERR_SERVER
	CodeUnsafeServer    Code = C.MONGOELECTOR_ERR_UNSAFE_SERVER
	CodeInternal        Code = C.MONGOELECTOR_ERR_INTERNAL
	// CodeClosed is Go-only: the handle was closed, no C call was made.
	CodeClosed Code = -1
)

// String is the C name of the status ("MONGOELECTOR_ERR_TIMEOUT").
func (c Code) String() string {
	if c == CodeClosed {
		return "CLOSED"
	}
	return C.GoString(C.mongoelector_status_name(C.mongoelector_status(c)))
}

// Error is every error this package returns. errors.Is matches it against the
// sentinels below by Code; when a context ended a call, it also wraps ctx.Err(), so
// errors.Is(err, context.Canceled) works too.
type Error struct {
	Code    Code
	Message string
	cause   error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "mongoelector: " + e.Code.String()
	}
	return fmt.Sprintf("mongoelector: %s: %s", e.Code.String(), e.Message)
}

// Is matches the sentinel of the same code.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.code == e.Code
}

// Unwrap gives the context error that ended the call, if any.
func (e *Error) Unwrap() error { return e.cause }

type sentinel struct {
	code Code
	text string
}

func (s *sentinel) Error() string { return "mongoelector: " + s.text }

// Sentinels for errors.Is.
var (
	ErrInvalidArgument error = &sentinel{CodeInvalidArgument, "invalid argument"}
	ErrLockHeld        error = &sentinel{CodeLockExists, "lock held by another"}
	ErrTimeout         error = &sentinel{CodeTimeout, "timed out"}
	ErrClockOffset     error = &sentinel{CodeTimeOffset, "host clock too far from the server's"}
	ErrCancelled       error = &sentinel{CodeCancelled, "cancelled"}
	ErrUnavailable     error = &sentinel{CodeUnavailable, "server unavailable"}
	ErrServer          error = &sentinel{CodeServer, "server error"}
	ErrUnsafeServer    error = &sentinel{CodeUnsafeServer, "server cannot run the protocol safely"}
	ErrInternal        error = &sentinel{CodeInternal, "internal error"}
	ErrClosed          error = &sentinel{CodeClosed, "handle is closed"}
)

func closedError(what string) error {
	return &Error{Code: CodeClosed, Message: what + " is closed"}
}
