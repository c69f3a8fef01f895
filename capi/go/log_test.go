package mongoelector

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordHandler keeps the records it is given (level from a LevelVar).
type recordHandler struct {
	level *slog.LevelVar
	mu    sync.Mutex
	recs  []slog.Record
}

func (h *recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordHandler) find(msg string) (slog.Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message == msg {
			return r, true
		}
	}
	return slog.Record{}, false
}

func liveSinks() int {
	logSinks.Lock()
	defer logSinks.Unlock()
	return logSinks.n
}

func TestSetLoggerRoutesLibraryLogsToSlog(t *testing.T) {
	uri := "sqlite://" + t.TempDir() + "/locks.db" // logs need no server
	c, err := NewClient(uri, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &recordHandler{level: new(slog.LevelVar)}
	h.level.Set(slog.LevelWarn)
	if err := SetLogger(slog.New(h)); err != nil {
		t.Fatal(err)
	}
	defer SetLogger(nil)

	poll := func(key string) {
		t.Helper()
		e, err := NewElector(bg, c, key, &ElectorOptions{TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if err := e.Poll(bg); err != nil {
			t.Fatal(err)
		}
	}
	// Leadership changes are INFO: below the handler's level when SetLogger ran, so the
	// library drops them, even once the handler's level is lowered...
	poll("quiet")
	h.level.Set(slog.LevelDebug)
	poll("quiet2")
	if r, ok := h.find("became leader of quiet2"); ok {
		t.Fatalf("INFO record delivered although the minimum level was WARN at SetLogger: %v", r)
	}
	// ...until SetLogger runs again.
	if err := SetLogger(slog.New(h)); err != nil {
		t.Fatal(err)
	}
	poll("loud")
	r, ok := h.find("became leader of loud")
	if !ok {
		t.Fatalf("no %q record; got %d records", "became leader of loud", len(h.recs))
	}
	if r.Level != slog.LevelInfo || time.Since(r.Time) > time.Minute {
		t.Fatalf("record level %v time %v", r.Level, r.Time)
	}
	// The replaced handlers were handed back by the library (release callback).
	waitFor(t, "the replaced log handler to be released", 2*time.Second, func() bool { return liveSinks() == 1 })
	if err := SetLogger(nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the last log handler to be released", 2*time.Second, func() bool { return liveSinks() == 0 })
}

func TestLogLevelsMapToSlog(t *testing.T) {
	for l, want := range map[LogLevel]slog.Level{LogDebug: slog.LevelDebug, LogInfo: slog.LevelInfo,
		LogWarning: slog.LevelWarn, LogError: slog.LevelError} {
		if got := l.SlogLevel(); got != want {
			t.Errorf("%d.SlogLevel() = %v, want %v", l, got, want)
		}
	}
	if !strings.Contains(slog.LevelWarn.String(), "WARN") {
		t.Fatal(slog.LevelWarn.String())
	}
}
