package mongoelector

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A panic in a user callback is re-raised: the process dies with the panic's value and
// the callback's stack, as with any unrecovered Go panic. Each case runs in a helper
// process (this test binary re-executed); an SQLite file serves as the backend, so no
// server is needed.
func TestCallbackPanicsCrashTheProgram(t *testing.T) {
	for _, tc := range []struct{ role, callback, frame string }{
		{"panic-loop", "OnLoop", "runPanicHelper.func"},
		{"panic-stopped", "OnStoppedLeading", "runPanicHelper.func"},
		{"panic-log", "log handler", "panicHandler.Handle"},
	} {
		t.Run(tc.role, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "MONGOELECTOR_GO_HELPER="+tc.role,
				"HELPER_DB="+filepath.Join(t.TempDir(), "locks.db"))
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("helper still alive after 30 s: the panic was swallowed\n%s", out)
			}
			text := string(out)
			exit, ok := err.(*exec.ExitError)
			if !ok || exit.ExitCode() == 0 {
				t.Fatalf("helper exit: %v, want a non-zero exit\n%s", err, text)
			}
			msg := "boom from " + tc.callback
			for _, want := range []string{
				"panic: " + msg, // the runtime's report, with the original value
				"mongoelector: panic in the " + tc.callback, // which callback
				tc.frame,       // the callback's own stack
				"reraisePanic", // the re-raising goroutine
			} {
				if !strings.Contains(text, want) {
					t.Errorf("helper output lacks %q", want)
				}
			}
			if strings.Contains(text, "HELPER SURVIVED") {
				t.Error("the helper went on after the panic")
			}
			if t.Failed() {
				t.Logf("helper exit %v, output:\n%s", err, text)
			}
		})
	}
}

type panicHandler struct{ slog.Handler }

func (panicHandler) Handle(context.Context, slog.Record) error { panic("boom from log handler") }

// runPanicHelper is the body of the panic helpers (ok false: not one of them).
func runPanicHelper(role string) (int, bool) {
	if !strings.HasPrefix(role, "panic-") {
		return 0, false
	}
	c, err := NewClient("sqlite://"+os.Getenv("HELPER_DB"), "")
	if err != nil {
		return helperFail("NewClient: %v", err), true
	}
	opts := &ElectorOptions{TTL: 2 * time.Second}
	switch role {
	case "panic-loop":
		opts.OnLoop = func() { panic("boom from OnLoop") }
	case "panic-stopped":
		opts.OnStoppedLeading = func() { panic("boom from OnStoppedLeading") }
	case "panic-log":
		if err := SetLogger(slog.New(panicHandler{slog.NewTextHandler(os.Stderr, nil)})); err != nil {
			return helperFail("SetLogger: %v", err), true
		}
	}
	e, err := NewElector(bg, c, "panic", opts)
	if err != nil {
		return helperFail("NewElector: %v", err), true
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := e.Campaign(ctx); err != nil { // OnLoop panics on the elector's thread
		return helperFail("Campaign: %v", err), true
	}
	if role == "panic-stopped" {
		e.Release(ctx) // OnStoppedLeading runs (and panics) on this goroutine's thread
	}
	time.Sleep(5 * time.Second)
	os.Stdout.WriteString("HELPER SURVIVED\n")
	return 0, true
}
