package mongoelector

/*
#include "mongoelector.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Status is a mongoelector_status value (the library's own classification of a
// failure), plus StatusClosed for Go handles already closed.
type Status int

const (
	StatusOK              Status = C.MONGOELECTOR_OK
	StatusInvalidArgument Status = C.MONGOELECTOR_ERR_INVALID_ARGUMENT
	StatusLockExists      Status = C.MONGOELECTOR_ERR_LOCK_EXISTS
	StatusTimeout         Status = C.MONGOELECTOR_ERR_TIMEOUT
	StatusTimeOffset      Status = C.MONGOELECTOR_ERR_TIME_OFFSET
	StatusCancelled       Status = C.MONGOELECTOR_ERR_CANCELLED
	StatusUnavailable     Status = C.MONGOELECTOR_ERR_UNAVAILABLE
	StatusServer          Status = C.MONGOELECTOR_ERR_SERVER
	StatusUnsafeServer    Status = C.MONGOELECTOR_ERR_UNSAFE_SERVER
	// StatusLost: a minimum hold could not be kept (the hold had ended at the server
	// before its write landed, or the lease was lost before its release).
	StatusLost     Status = C.MONGOELECTOR_ERR_LOST
	StatusInternal Status = C.MONGOELECTOR_ERR_INTERNAL
	// StatusClosed is Go-only: the handle was closed, no C call was made.
	StatusClosed Status = -1
)

// String is the C name of the status ("MONGOELECTOR_ERR_TIMEOUT").
func (s Status) String() string {
	if s == StatusClosed {
		return "CLOSED"
	}
	return C.GoString(C.mongoelector_status_name(C.mongoelector_status(s)))
}

// Error is every error this package returns. errors.Is matches it against the Err*
// sentinels by Status; when a context ended a call, it also wraps ctx.Err(), so
// errors.Is(err, context.Canceled) and errors.Is(err, context.DeadlineExceeded) work.
//
// Code, CodeName and Labels are what the backend answered (mongoelector_last_error_info,
// read on the thread of the failing C call): a MongoDB server error code (11000, 13, 14,
// 18, 50, ...) with its codeName and errorLabels, or an SQLite extended result code. Code
// is 0 when the failure has none (no answer, a bad argument, a context).
type Error struct {
	Status   Status
	Message  string
	Code     int32
	CodeName string
	Labels   []string
	cause    error
}

// Error gives "mongoelector: <STATUS>: <message>", then "[code N Name]" and the labels
// when the backend answered with a code.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("mongoelector: ")
	b.WriteString(e.Status.String())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, " [code %d", e.Code)
		if e.CodeName != "" {
			b.WriteString(" " + e.CodeName)
		}
		b.WriteString("]")
	}
	if len(e.Labels) > 0 {
		b.WriteString(" [labels " + strings.Join(e.Labels, " ") + "]")
	}
	return b.String()
}

// HasLabel reports whether the backend tagged the failure with an error label (MongoDB
// errorLabels, e.g. "RetryableWriteError").
func (e *Error) HasLabel(label string) bool {
	for _, l := range e.Labels {
		if l == label {
			return true
		}
	}
	return false
}

// Is matches the sentinel of the same Status.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.status == e.Status
}

// Unwrap gives the context error that ended the call, if any.
func (e *Error) Unwrap() error { return e.cause }

type sentinel struct {
	status Status
	text   string
}

func (s *sentinel) Error() string { return "mongoelector: " + s.text }

// Sentinels for errors.Is, one per Status (ErrX for MONGOELECTOR_ERR_X).
var (
	ErrInvalidArgument error = &sentinel{StatusInvalidArgument, "invalid argument"}
	ErrLockExists      error = &sentinel{StatusLockExists, "lock held by another"}
	ErrTimeout         error = &sentinel{StatusTimeout, "timed out"}
	ErrTimeOffset      error = &sentinel{StatusTimeOffset, "host clock too far from the server's"}
	ErrCancelled       error = &sentinel{StatusCancelled, "cancelled"}
	ErrUnavailable     error = &sentinel{StatusUnavailable, "server unavailable"}
	ErrServer          error = &sentinel{StatusServer, "server error"}
	ErrUnsafeServer    error = &sentinel{StatusUnsafeServer, "server cannot run the protocol safely"}
	ErrLost            error = &sentinel{StatusLost, "the hold had ended: its minimum hold is not kept"}
	ErrInternal        error = &sentinel{StatusInternal, "internal error"}
	ErrClosed          error = &sentinel{StatusClosed, "handle is closed"}
)

// Deprecated names, kept for code written against earlier versions of this package.
var (
	// Deprecated: use ErrLockExists.
	ErrLockHeld = ErrLockExists
	// Deprecated: use ErrTimeOffset.
	ErrClockOffset = ErrTimeOffset
)

// Code is the former name of Status.
//
// Deprecated: use Status. (Error.Code is now the backend's error code.)
type Code = Status

// Deprecated: the former names of the Status constants.
const (
	CodeOK              = StatusOK
	CodeInvalidArgument = StatusInvalidArgument
	CodeLockExists      = StatusLockExists
	CodeTimeout         = StatusTimeout
	CodeTimeOffset      = StatusTimeOffset
	CodeCancelled       = StatusCancelled
	CodeUnavailable     = StatusUnavailable
	CodeServer          = StatusServer
	CodeUnsafeServer    = StatusUnsafeServer
	CodeInternal        = StatusInternal
	CodeClosed          = StatusClosed
)

func closedError(what string) error {
	return &Error{Status: StatusClosed, Message: what + " is closed"}
}

func invalidArgument(msg string) error {
	return &Error{Status: StatusInvalidArgument, Message: msg}
}

// contextError is the error of a call that ctx ended: StatusCancelled or StatusTimeout
// (deadline), wrapping ctx's error.
func contextError(ctxErr error, what string) error {
	st := StatusCancelled
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		st = StatusTimeout
	}
	return &Error{Status: st, Message: what + ": " + ctxErr.Error(), cause: ctxErr}
}
