package mongoelector

/*
#include <stdint.h>
#include "mongoelector.h"

extern void mongoelectorGoLogRecord(mongoelector_log_record *, void *);
extern void mongoelectorGoLogRelease(void *);

static void me_log_record_trampoline(const mongoelector_log_record *record, void *ud) {
  mongoelectorGoLogRecord((mongoelector_log_record *)record, ud);
}

static void me_log_release(void *ud) { mongoelectorGoLogRelease(ud); }

// The handle travels as an integer; only C turns it into the void* user_data.
static mongoelector_status me_set_log_handler(mongoelector_log_level min_level, uintptr_t handle) {
  return mongoelector_set_log_record_handler(min_level, me_log_record_trampoline, (void *)handle,
                                             me_log_release);
}
*/
import "C"

import (
	"context"
	"log/slog"
	"runtime/cgo"
	"sync"
	"time"
)

// LogLevel is the level of a library log message.
type LogLevel int

const (
	LogDebug   LogLevel = C.MONGOELECTOR_LOG_DEBUG
	LogInfo    LogLevel = C.MONGOELECTOR_LOG_INFO
	LogWarning LogLevel = C.MONGOELECTOR_LOG_WARNING
	LogError   LogLevel = C.MONGOELECTOR_LOG_ERROR
)

// SlogLevel is the log/slog level of a library level.
func (l LogLevel) SlogLevel() slog.Level {
	switch {
	case l >= LogError:
		return slog.LevelError
	case l >= LogWarning:
		return slog.LevelWarn
	case l >= LogInfo:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

// logSink is what the log handler's cgo handle refers to.
type logSink struct{ h slog.Handler }

// logSinks counts the sinks installed and not yet handed back by the library (tests).
var logSinks struct {
	sync.Mutex
	n int
}

// logRecord is a library log record copied out of C (valid only during the callback).
type logRecord struct {
	event   string // "" for MONGOELECTOR_EVENT_NONE
	message string
	key     string
	fence   int64
	uuid    string
	host    string
}

// handle passes one library record to the handler when it is Enabled for its level;
// read copies the record out of C (only then).
func (s *logSink) handle(level LogLevel, read func() logRecord) {
	lvl := level.SlogLevel()
	ctx := context.Background()
	runUserCallback("log handler", func() {
		if !s.h.Enabled(ctx, lvl) {
			return
		}
		rec := read()
		r := slog.NewRecord(time.Now(), lvl, rec.message, 0)
		r.AddAttrs(rec.attrs()...)
		_ = s.h.Handle(ctx, r)
	})
}

// recordFromC copies a record the library passed to the log handler.
func recordFromC(r *C.mongoelector_log_record) logRecord {
	rec := logRecord{
		message: C.GoString(r.message),
		key:     C.GoString(r.key),
		fence:   int64(r.fence),
		uuid:    C.GoString(r.uuid),
		host:    C.GoString(r.host),
	}
	if r.event != C.MONGOELECTOR_EVENT_NONE {
		rec.event = C.GoString(C.mongoelector_log_event_name(r.event))
	}
	return rec
}

// attrs are the record's structured fields as slog attributes, each only when present.
func (rec *logRecord) attrs() []slog.Attr {
	a := make([]slog.Attr, 0, 5)
	if rec.event != "" {
		a = append(a, slog.String("event", rec.event))
	}
	if rec.key != "" {
		a = append(a, slog.String("key", rec.key))
	}
	if rec.fence != 0 {
		a = append(a, slog.Int64("fence", rec.fence))
	}
	if rec.uuid != "" {
		a = append(a, slog.String("uuid", rec.uuid))
	}
	if rec.host != "" {
		a = append(a, slog.String("host", rec.host))
	}
	return a
}

// SetLogger sends the library's log messages to logger (nil restores the library's
// default: warnings and errors to stderr). Process-wide. The library drops, before
// formatting them, the levels below the lowest one logger's handler is Enabled for at
// this call: after lowering the handler's level (a slog.LevelVar), call SetLogger
// again. The handler runs on whichever thread logs (often an elector's or the lease
// renewer's): it must be safe for concurrent use and quick. A panic in it crashes the
// program (see the package doc). The previous logger is dropped once no thread can call
// it any more.
//
// Each record carries, as attributes and only when the library set them: "event", what
// the record is about ("leader_elected", "leader_lost", "step_down", "renew_failed",
// "lease_lost", "clock_jump", "unsafe_server", "release_failed", "callback_failed";
// none for free text), "key" (the lock or election key), "fence" (int64, the hold's
// fencing token), "uuid" (the locker's or node's identity) and "host". The library
// picks the levels: leadership changes at INFO, renewal failures and step-downs at WARN.
func SetLogger(logger *slog.Logger) error {
	if logger == nil {
		return call(func() C.mongoelector_status {
			return C.mongoelector_set_log_record_handler(C.MONGOELECTOR_LOG_WARNING, nil, nil, nil)
		})
	}
	return SetLogHandler(logger.Handler())
}

// SetLogHandler is SetLogger for a slog.Handler (nil restores the default).
func SetLogHandler(h slog.Handler) error {
	if h == nil {
		return SetLogger(nil)
	}
	min := LogError
	for _, l := range []LogLevel{LogDebug, LogInfo, LogWarning, LogError} {
		if h.Enabled(context.Background(), l.SlogLevel()) {
			min = l
			break
		}
	}
	handle := cgo.NewHandle(&logSink{h: h})
	logSinks.Lock()
	logSinks.n++
	logSinks.Unlock()
	// On failure the handle is not deleted: whether the library already handed it back
	// through release depends on where it failed (a leak beats a double Delete).
	return call(func() C.mongoelector_status {
		return C.me_set_log_handler(C.mongoelector_log_level(min), C.uintptr_t(handle))
	})
}
