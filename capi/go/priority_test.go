package mongoelector

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// Priority leaders: a leader of lower priority hands over to a running member of higher
// priority (the rule is the library's); bad options are refused by name.
func TestElectorPriority(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *Client) {
		bg := context.Background()
		key := uniqueKey(t)
		nan, one, zero, minus := math.NaN(), 1.0, time.Duration(0), -time.Second
		for name, o := range map[string]*ElectorOptions{
			"NaN priority":       {Priority: &nan},
			"negative stability": {Priority: &one, PriorityStability: &minus},
			"without status":     {Priority: &one, DisableStatusReport: true},
		} {
			if e, err := NewElector(bg, c, key, o); !errors.Is(err, ErrInvalidArgument) || e != nil {
				t.Errorf("%s: %v, %v; want ErrInvalidArgument", name, e, err)
			}
		}
		mk := func(p float64) *Elector {
			e, err := NewElector(bg, c, key, &ElectorOptions{TTL: 2 * time.Second, Priority: &p, PriorityStability: &zero})
			if err != nil {
				t.Fatalf("NewElector: %v", err)
			}
			t.Cleanup(func() { e.Close() })
			if err := e.Start(); err != nil {
				t.Fatalf("Start: %v", err)
			}
			return e
		}
		leads := func(e *Elector, within time.Duration) bool {
			for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if ok, err := e.IsLeader(); err == nil && ok {
					return true
				}
			}
			return false
		}
		low := mk(1)
		if !leads(low, 10*time.Second) {
			t.Fatal("the first elector does not lead")
		}
		high := mk(5)
		if !leads(high, 15*time.Second) {
			t.Fatal("the higher member does not lead")
		}
		if ok, _ := low.IsLeader(); ok {
			t.Error("two leaders")
		}
	})
}
