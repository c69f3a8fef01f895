package mongoelector

// Test scaffolding: a real server from MONGOELECTOR_TEST_URI, unique keys, and helper
// processes (this test binary re-executed with MONGOELECTOR_GO_HELPER set) so that
// contention and failover are tested between OS processes, not goroutines.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const testDB = "mongoelector_go_test"

// bg is the context of calls that a test does not mean to bound.
var bg = context.Background()

func TestMain(m *testing.M) {
	if role := os.Getenv("MONGOELECTOR_GO_HELPER"); role != "" {
		os.Exit(runHelper(role))
	}
	os.Exit(m.Run())
}

func testURI(t *testing.T) string {
	t.Helper()
	uri := os.Getenv("MONGOELECTOR_TEST_URI")
	if uri == "" {
		t.Skip("MONGOELECTOR_TEST_URI is not set: integration test needs a server (tests/servers/testserver.sh run java -- go test ./...)")
	}
	return uri
}

var keySeq atomic.Int64

func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("go-%s-%d-%d", t.Name(), os.Getpid(), keySeq.Add(1))
}

func newTestClient(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(testURI(t), testDB)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newTestLocker(t *testing.T, c *Client, key string, ttl time.Duration) *Locker {
	t.Helper()
	l, err := NewLocker(context.Background(), c, key, &LockerOptions{TTL: ttl})
	if err != nil {
		t.Fatalf("NewLocker(%q): %v", key, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// ---- helper processes ------------------------------------------------------------

type helperProc struct {
	cmd   *exec.Cmd
	lines chan string
}

// startHelper runs this test binary as a helper process in `role`; env adds KEY=VALUE.
func startHelper(t *testing.T, role string, env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MONGOELECTOR_GO_HELPER="+role)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", role, err)
	}
	h := &helperProc{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			h.cmd.Process.Kill()
			h.cmd.Wait()
		}
	})
	return h
}

// expect waits for a line starting with prefix and returns the rest of it.
func (h *helperProc) expect(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("helper exited before printing %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return strings.TrimSpace(strings.TrimPrefix(line, prefix))
			}
		case <-deadline:
			t.Fatalf("helper did not print %q within %v", prefix, timeout)
		}
	}
}

// seen drains the lines printed so far and returns those starting with prefix.
func (h *helperProc) seen(prefix string) []string {
	var out []string
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				return out
			}
			if strings.HasPrefix(line, prefix) {
				out = append(out, line)
			}
		default:
			return out
		}
	}
}

func (h *helperProc) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill helper: %v", err)
	}
	h.cmd.Wait()
}

func (h *helperProc) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper failed: %v", err)
		}
	case <-time.After(timeout):
		h.cmd.Process.Kill()
		t.Fatalf("helper did not exit within %v", timeout)
	}
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil {
			return d
		}
	}
	return def
}

func helperFail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "helper: "+format+"\n", args...)
	return 2
}

// runHelper is the body of a helper process. It prints protocol lines on stdout.
func runHelper(role string) int {
	ctx := context.Background()
	if code, ok := runPanicHelper(role); ok {
		return code
	}
	c, err := NewClient(os.Getenv("MONGOELECTOR_TEST_URI"), testDB)
	if err != nil {
		return helperFail("NewClient: %v", err)
	}
	defer c.Close()
	key := os.Getenv("HELPER_KEY")
	ttl := envDuration("HELPER_TTL", 10*time.Second)
	switch role {
	case "hold": // acquire, print ACQUIRED <fence>, hold HELPER_HOLD (0: until killed), release
		l, err := NewLocker(ctx, c, key, &LockerOptions{TTL: ttl})
		if err != nil {
			return helperFail("NewLocker: %v", err)
		}
		defer l.Close()
		fence, err := l.Acquire(ctx, WithTimeout(30*time.Second))
		if err != nil {
			return helperFail("Acquire: %v", err)
		}
		fmt.Printf("ACQUIRED %d\n", fence)
		hold := envDuration("HELPER_HOLD", 0)
		if hold == 0 {
			select {}
		}
		time.Sleep(hold)
		if err := l.Release(ctx); err != nil {
			return helperFail("Release: %v", err)
		}
		fmt.Println("RELEASED")
		return 0
	case "count": // HELPER_N rounds of a read-modify-write of a file, guarded by the lock
		n, _ := strconv.Atoi(os.Getenv("HELPER_N"))
		file := os.Getenv("HELPER_FILE")
		l, err := NewLocker(ctx, c, key, &LockerOptions{TTL: ttl})
		if err != nil {
			return helperFail("NewLocker: %v", err)
		}
		defer l.Close()
		fmt.Println("READY")
		for i := 0; i < n; i++ {
			fence, err := l.Acquire(ctx, WithTimeout(60*time.Second), WithStep(20*time.Millisecond))
			if err != nil {
				return helperFail("Acquire: %v", err)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return helperFail("read: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			count, _ := strconv.Atoi(lines[0])
			time.Sleep(5 * time.Millisecond) // widen the race window a broken lock would show
			lines[0] = strconv.Itoa(count + 1)
			lines = append(lines, fmt.Sprintf("%d %d", fence, os.Getpid()))
			if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				return helperFail("write: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				return helperFail("Release: %v", err)
			}
		}
		fmt.Println("DONE")
		return 0
	case "elect": // run an elector until killed; print LEADER <fence> / LOSS
		e, err := NewElector(ctx, c, key, &ElectorOptions{
			TTL:              ttl,
			OnStoppedLeading: func() { fmt.Println("LOSS") },
		})
		if err != nil {
			return helperFail("NewElector: %v", err)
		}
		changes := e.Observe(ctx) // the current state first, then each change
		if err := e.Start(); err != nil {
			return helperFail("Start: %v", err)
		}
		for ch := range changes {
			if ch.Leading {
				fmt.Printf("LEADER %d\n", ch.Fence)
			}
		}
		return 0
	}
	return helperFail("unknown role %q", role)
}

// ---- contention -------------------------------------------------------------------

// contender is one goroutine of contend: take a hold (its fencing token), entered()
// inside it (checks the invariant; may be nil), left() just before give() lets it go.
type contender struct {
	take    func() (int64, error)
	entered func() error
	left    func()
	give    func() error
}

// contend runs `workers` contenders (made by mk), `rounds` holds each, each held for
// `hold`. It fails t on an error, a token handed out twice, a contender's tokens not
// increasing, or fewer distinct tokens than holds.
func contend(t *testing.T, workers, rounds int, hold time.Duration, mk func(i int) contender) {
	t.Helper()
	var mu sync.Mutex
	fences := map[int64]bool{}
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for i := 0; i < workers; i++ {
		c := mk(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for r := 0; r < rounds; r++ {
				fence, err := c.take()
				if err != nil {
					errc <- err
					return
				}
				if c.entered != nil {
					if err := c.entered(); err != nil {
						errc <- err
					}
				}
				mu.Lock()
				dup := fences[fence]
				fences[fence] = true
				mu.Unlock()
				if dup || fence <= last {
					errc <- errors.New("fencing token reused or not increasing")
					return
				}
				last = fence
				time.Sleep(hold)
				c.left()
				if err := c.give(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if len(fences) != workers*rounds && !t.Failed() {
		t.Fatalf("%d distinct tokens, want %d", len(fences), workers*rounds)
	}
}

// atomicMax raises m to n if n is larger.
func atomicMax(m *atomic.Int32, n int32) {
	for {
		old := m.Load()
		if n <= old || m.CompareAndSwap(old, n) {
			return
		}
	}
}
