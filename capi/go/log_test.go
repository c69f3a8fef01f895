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

// attrsOf is a record's attributes by key.
func attrsOf(r slog.Record) map[string]slog.Value {
	m := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value
		return true
	})
	return m
}

// forKey returns the records at level whose key attribute is key, or, without one,
// whose message names it.
func (h *recordHandler) forKey(key string, level slog.Level) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.recs {
		if r.Level != level {
			continue
		}
		k, ok := attrsOf(r)["key"]
		if (ok && k.String() == key) || (!ok && strings.Contains(r.Message, key)) {
			out = append(out, r)
		}
	}
	return out
}

// The structured fields of the library's records arrive as slog attributes: a term of
// one elector, Campaign then Resign, is one INFO leader_elected record (with the term's
// fence and the node's uuid and host) and one INFO leader_lost record, nothing else at
// INFO for its key.
func TestLogRecordsOfALeadershipTerm(t *testing.T) {
	c := newTestClient(t)
	key := uniqueKey(t)
	h := &recordHandler{level: new(slog.LevelVar)}
	h.level.Set(slog.LevelInfo)
	if err := SetLogger(slog.New(h)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetLogger(nil) })
	s0 := mustStats(t)

	e, err := NewElector(bg, c, key, &ElectorOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if err := e.Campaign(ctx); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	fence, _ := e.Fence()
	uuid, _ := e.UUID()
	st, err := e.NodeStatus(ctx)
	if err != nil {
		t.Fatalf("NodeStatus: %v", err)
	}
	if fence <= 0 || uuid == "" || st.Host == "" {
		t.Fatalf("fence %d, uuid %q, host %q", fence, uuid, st.Host)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	byEvent := func(event string) []slog.Record {
		var out []slog.Record
		for _, r := range h.forKey(key, slog.LevelInfo) {
			if ev, ok := attrsOf(r)["event"]; ok && ev.String() == event {
				out = append(out, r)
			}
		}
		return out
	}
	waitFor(t, "the leader_lost record", 5*time.Second, func() bool { return len(byEvent("leader_lost")) > 0 })

	all := h.forKey(key, slog.LevelInfo)
	elected, lost := byEvent("leader_elected"), byEvent("leader_lost")
	if len(elected) != 1 || len(lost) != 1 || len(all) != 2 {
		for _, r := range all {
			t.Logf("INFO %q %v", r.Message, attrsOf(r))
		}
		t.Fatalf("%d leader_elected, %d leader_lost, %d INFO records for %s; want 1, 1, 2",
			len(elected), len(lost), len(all), key)
	}
	a := attrsOf(elected[0])
	if f := a["fence"]; f.Kind() != slog.KindInt64 || f.Int64() != fence {
		t.Errorf("leader_elected fence = %v, want int64 %d", f, fence)
	}
	for _, r := range []slog.Record{elected[0], lost[0]} {
		a := attrsOf(r)
		if a["uuid"].String() != uuid || a["host"].String() != st.Host || a["key"].String() != key {
			t.Errorf("%q: attributes %v, want uuid %s, host %s, key %s", r.Message, a, uuid, st.Host, key)
		}
		if a["uuid"].Kind() != slog.KindString || a["host"].Kind() != slog.KindString {
			t.Errorf("%q: attributes %v are not strings", r.Message, a)
		}
	}

	s1 := mustStats(t)
	if s1.LeaderElected <= s0.LeaderElected || s1.LeaderLost <= s0.LeaderLost {
		t.Fatalf("leadership counters %d/%d -> %d/%d across a term", s0.LeaderElected, s0.LeaderLost,
			s1.LeaderElected, s1.LeaderLost)
	}
}

// Attributes are set only for the fields the library filled.
func TestLogRecordAttrsOnlyWhenPresent(t *testing.T) {
	if a := (&logRecord{message: "free text"}).attrs(); len(a) != 0 {
		t.Fatalf("free text record has attributes %v", a)
	}
	a := (&logRecord{event: "renew_failed", key: "k", fence: 7, uuid: "u", host: "h"}).attrs()
	want := []string{"event=renew_failed", "key=k", "fence=7", "uuid=u", "host=h"}
	if len(a) != len(want) {
		t.Fatalf("attributes %v, want %v", a, want)
	}
	for i, at := range a {
		if at.String() != want[i] {
			t.Fatalf("attribute %d = %v, want %s", i, at, want[i])
		}
	}
	if a[2].Value.Kind() != slog.KindInt64 {
		t.Fatalf("fence is a %v", a[2].Value.Kind())
	}
	if a := (&logRecord{key: "k", uuid: "u"}).attrs(); len(a) != 2 || a[0].Key != "key" || a[1].Key != "uuid" {
		t.Fatalf("partial record: %v", a)
	}
}
