package mongoelector

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// pollUntilLeader polls e until it leads.
func pollUntilLeader(t *testing.T, e *Elector) {
	t.Helper()
	waitFor(t, "leadership", 10*time.Second, func() bool {
		if err := e.Poll(bg); err != nil {
			t.Fatal(err)
		}
		ok, err := e.IsLeader()
		return err == nil && ok
	})
}

// The leader payload: a new term carries its leader's payload, observers (the C
// observe stream) and the cluster detail show it, SetPayload replaces it.
func TestLeaderPayloadIsPublishedWithTheTerm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *Client) {
		key := uniqueKey(t)
		type endpoint struct {
			Endpoint string `json:"endpoint"`
		}
		a := newTestElector(t, c, key, &ElectorOptions{TTL: 5 * time.Second, Payload: endpoint{"10.0.0.1:8080"}})
		b := newTestElector(t, c, key, &ElectorOptions{TTL: 5 * time.Second, Payload: map[string]any{"endpoint": "10.0.0.2:8080"}})
		o := newTestObserver(t, c, key)
		pollUntilLeader(t, a)
		s := nextState(t, o.C(), 10*time.Second)
		for !s.HasLeader {
			s = nextState(t, o.C(), 10*time.Second)
		}
		if string(s.Payload) != `{"endpoint":"10.0.0.1:8080"}` {
			t.Fatalf("observed payload %s", s.Payload)
		}
		written, err := a.SetPayload(bg, endpoint{"10.0.0.1:9090"})
		if err != nil || !written {
			t.Fatalf("SetPayload while leading: %v %v", written, err)
		}
		s = nextState(t, o.C(), 10*time.Second)
		if string(s.Payload) != `{"endpoint":"10.0.0.1:9090"}` {
			t.Fatalf("a new payload is a change: got %+v", s)
		}
		d, err := a.ClusterDetail(bg)
		if err != nil || d.Leader == nil {
			t.Fatalf("ClusterDetail: %v %+v", err, d)
		}
		var got endpoint
		if err := json.Unmarshal([]byte(d.Leader.Payload), &got); err != nil || got.Endpoint != "10.0.0.1:9090" {
			t.Fatalf("cluster detail payload %s (%v)", d.Leader.Payload, err)
		}
		if err := a.Release(bg); err != nil {
			t.Fatal(err)
		}
		pollUntilLeader(t, b)
		bUUID, _ := b.UUID()
		for s.UUID != bUUID {
			s = nextState(t, o.C(), 10*time.Second)
		}
		if string(s.Payload) != `{"endpoint":"10.0.0.2:8080"}` {
			t.Fatalf("b's term showed payload %s", s.Payload)
		}
	})
}

func TestLeaderPayloadValidation(t *testing.T) {
	c, err := NewClient(fmt.Sprintf("memory://go-payload-%d", os.Getpid()), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, bad := range []any{[]int{1, 2}, "text", 42, map[string]any{"x": strings.Repeat("y", 20000)}} {
		_, err := NewElector(bg, c, "payload-bad", &ElectorOptions{Payload: bad})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "payload") {
			t.Errorf("NewElector(Payload: %T): %v, want invalid argument naming the payload", bad, err)
		}
	}
	_, err = NewElector(bg, c, "payload-bad", &ElectorOptions{Payload: func() {}})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unencodable payload: %v", err)
	}
	e := newTestElector(t, c, "payload-ok", &ElectorOptions{Payload: map[string]int{"v": 1}})
	if _, err := e.SetPayload(bg, []string{"x"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SetPayload(list): %v", err)
	}
	if written, err := e.SetPayload(bg, nil); err != nil || written {
		t.Errorf("SetPayload(nil) while following: %v %v", written, err)
	}
}
