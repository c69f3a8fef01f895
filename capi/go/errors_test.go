package mongoelector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestVersionMatchesHeader(t *testing.T) {
	if Version() != HeaderVersion {
		t.Fatalf("library version %q, header %q", Version(), HeaderVersion)
	}
	var maj, min, pat int
	if _, err := fmt.Sscanf(Version(), "%d.%d.%d", &maj, &min, &pat); err != nil {
		t.Fatalf("version %q: %v", Version(), err)
	}
	if VersionNumber() != maj*10000+min*100+pat {
		t.Fatalf("VersionNumber %d does not match %q", VersionNumber(), Version())
	}
}

func TestErrorMatchesOnlyItsSentinel(t *testing.T) {
	sentinels := map[Status]error{
		StatusInvalidArgument: ErrInvalidArgument, StatusLockExists: ErrLockExists, StatusTimeout: ErrTimeout,
		StatusTimeOffset: ErrTimeOffset, StatusCancelled: ErrCancelled, StatusUnavailable: ErrUnavailable,
		StatusServer: ErrServer, StatusUnsafeServer: ErrUnsafeServer, StatusLost: ErrLost, StatusInternal: ErrInternal,
		StatusClosed: ErrClosed,
	}
	for st := range sentinels {
		err := fmt.Errorf("wrapped: %w", &Error{Status: st, Message: "m"})
		for other, s := range sentinels {
			if got := errors.Is(err, s); got != (other == st) {
				t.Errorf("errors.Is(%v, %v) = %v", st, other, got)
			}
		}
	}
	if s := StatusTimeout.String(); s != "MONGOELECTOR_ERR_TIMEOUT" {
		t.Errorf("StatusTimeout.String() = %q", s)
	}
	if s := StatusLockExists.String(); s != "MONGOELECTOR_ERR_LOCK_EXISTS" {
		t.Errorf("StatusLockExists.String() = %q", s)
	}
	// The deprecated names are the same values.
	if ErrLockHeld != ErrLockExists || ErrClockOffset != ErrTimeOffset || CodeTimeout != StatusTimeout {
		t.Error("deprecated aliases differ from the new names")
	}
	e := contextError(context.Canceled, "x")
	if !errors.Is(e, ErrCancelled) || !errors.Is(e, context.Canceled) {
		t.Errorf("context cancel error %v should match ErrCancelled and context.Canceled", e)
	}
	e = contextError(context.DeadlineExceeded, "x")
	if !errors.Is(e, ErrTimeout) || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("deadline error %v should match ErrTimeout and context.DeadlineExceeded", e)
	}
	se := &Error{Status: StatusServer, Message: "boom", Code: 91, CodeName: "ShutdownInProgress",
		Labels: []string{"RetryableWriteError"}}
	if !se.HasLabel("RetryableWriteError") || se.HasLabel("TransientTransactionError") {
		t.Errorf("HasLabel on %v", se)
	}
	if want := "mongoelector: MONGOELECTOR_ERR_SERVER: boom [code 91 ShutdownInProgress] [labels RetryableWriteError]"; se.Error() != want {
		t.Errorf("Error() = %q, want %q", se.Error(), want)
	}
}

// Arguments rejected before any round trip: these need no server.
func TestInvalidArguments(t *testing.T) {
	if _, err := NewClient("not a uri", "db"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad URI: %v", err)
	}
	if _, err := NewClient("mongodb://127.0.0.1:1/\x00", "db"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("URI with NUL: %v", err)
	}
	c, err := NewClient("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300", "db")
	if err != nil {
		t.Fatalf("NewClient is lazy, should not fail: %v", err)
	}
	defer c.Close()
	for name, key := range map[string]string{"empty": "", "too long": strings.Repeat("k", 1025),
		"not utf-8": "\xff\xfe", "NUL": "a\x00b"} {
		start := time.Now()
		if _, err := NewLocker(bg, c, key, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s key: want ErrInvalidArgument, got %v", name, err)
		}
		if _, err := NewElector(bg, c, key, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s key (elector): want ErrInvalidArgument, got %v", name, err)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s key: rejection took %v, should not need the server", name, time.Since(start))
		}
	}
	if _, err := NewLocker(bg, c, "k", &LockerOptions{TTL: -time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative TTL: %v", err)
	}
	if _, err := NewElector(bg, c, "k", &ElectorOptions{TTL: -time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative elector TTL: %v", err)
	}
	if _, err := NewLocker(bg, c, "k", &LockerOptions{MaxOffset: -time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative MaxOffset: %v", err)
	}
	if _, err := NewLocker(bg, nil, "k", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil client: %v", err)
	}
}

func TestClosedClient(t *testing.T) {
	c, err := NewClient("mongodb://127.0.0.1:1/", "db")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := NewLocker(bg, c, "k", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("NewLocker on closed client: %v", err)
	}
	if _, err := NewElector(bg, c, "k", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("NewElector on closed client: %v", err)
	}
	if _, _, err := c.ServerInfo(bg); !errors.Is(err, ErrClosed) {
		t.Errorf("ServerInfo on closed client: %v", err)
	}
}

// A server that is down must give ErrUnavailable in bounded time, never hang.
func TestServerDownIsUnavailable(t *testing.T) {
	c, err := NewClient("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500&connectTimeoutMS=500", "db")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, _, err = c.ServerInfo(bg)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ServerInfo against a closed port: want ErrUnavailable, got %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("ServerInfo took %v against a closed port", el)
	}
	if el, err := downLockerError(c); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("locker against a closed port: want ErrUnavailable, got %v", err)
	} else if el > 10*time.Second {
		t.Fatalf("locker calls took %v against a closed port", el)
	}
}

// downLockerError makes a 2 s ttl locker on c (whose server is down) and tries to
// acquire: how long the first error took to come, and that error.
func downLockerError(c *Client) (time.Duration, error) {
	start := time.Now()
	l, err := NewLocker(bg, c, "down", &LockerOptions{TTL: 2 * time.Second})
	if err == nil {
		// Index creation failing may be tolerated; the first real call must not be.
		defer l.Close()
		_, err = l.TryAcquire(bg)
	}
	return time.Since(start), err
}

// Without timeouts in the URI the library bounds every call from the locker's ttl.
func TestServerDownDefaultTimeoutsFollowTTL(t *testing.T) {
	c, err := NewClient("mongodb://127.0.0.1:1/", "db")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if el, err := downLockerError(c); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	} else if el > 6*time.Second {
		t.Fatalf("a 2 s ttl locker took %v to report a dead server", el)
	}
}
