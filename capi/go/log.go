package mongoelector

/*
#include <stdint.h>
#include "mongoelector.h"

extern void mongoelectorGoLog(mongoelector_log_level, char *, void *);
extern void mongoelectorGoLogRelease(void *);

static void me_log_trampoline(mongoelector_log_level level, const char *message, void *ud) {
  mongoelectorGoLog(level, (char *)message, ud);
}

static void me_log_release(void *ud) { mongoelectorGoLogRelease(ud); }

// The handle travels as an integer; only C turns it into the void* user_data.
static mongoelector_status me_set_log_handler(mongoelector_log_level min_level, uintptr_t handle) {
  return mongoelector_set_log_handler(min_level, me_log_trampoline, (void *)handle, me_log_release);
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

func (s *logSink) log(level LogLevel, msg string) {
	lvl := level.SlogLevel()
	ctx := context.Background()
	runUserCallback("log handler", func() {
		if !s.h.Enabled(ctx, lvl) {
			return
		}
		r := slog.NewRecord(time.Now(), lvl, msg, 0)
		_ = s.h.Handle(ctx, r)
	})
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
// Leadership changes are logged at INFO, renewal failures and step-downs at WARN.
func SetLogger(logger *slog.Logger) error {
	if logger == nil {
		return call(func() C.mongoelector_status {
			return C.mongoelector_set_log_handler(C.MONGOELECTOR_LOG_WARNING, nil, nil, nil)
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
