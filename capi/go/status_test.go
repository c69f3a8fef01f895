package mongoelector

import (
	"encoding/json"
	"testing"
	"time"
)

// The shapes libbson's relaxed Extended JSON takes (and canonical ones, tolerated).
func TestStatusDecodesExtendedJSON(t *testing.T) {
	const node = `{"uuid": "u1", "key": "k", "ttl": 15, "timestamp": {"$date": "2026-11-23T17:38:28.123Z"},
		"host": "h", "pid": 4242, "lock_owned": true,
		"lock_created": {"$date": {"$numberLong": "-1000"}}, "lock_expires": {"$date": "9999-12-31T23:59:59.999Z"},
		"_id": "u1", "is_leader": true, "elector_running": false, "last_poll": null, "app_version": "v2",
		"some_future_field": {"x": 1}}`
	var st NodeStatus
	if err := json.Unmarshal([]byte(node), &st); err != nil {
		t.Fatal(err)
	}
	want := NodeStatus{
		UUID: "u1", Key: "k", TTL: 15 * time.Second,
		Timestamp: time.Date(2026, 11, 23, 17, 38, 28, 123e6, time.UTC),
		Host:      "h", PID: 4242, LockOwned: true,
		LockCreated: time.UnixMilli(-1000).UTC(),
		LockExpires: time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
		IsLeader:    true, AppVersion: "v2",
	}
	if !st.Timestamp.Equal(want.Timestamp) || !st.LockCreated.Equal(want.LockCreated) ||
		!st.LockExpires.Equal(want.LockExpires) || !st.LastPoll.IsZero() {
		t.Fatalf("dates: %+v", st)
	}
	st.Timestamp, st.LockCreated, st.LockExpires = want.Timestamp, want.LockCreated, want.LockExpires
	if st != want {
		t.Fatalf("NodeStatus = %+v\nwant        %+v", st, want)
	}

	for text, ttl := range map[string]time.Duration{
		`2.5`: 2500 * time.Millisecond, `15.0`: 15 * time.Second, `{"$numberLong": "20"}`: 20 * time.Second,
		`{"$numberInt": "3"}`: 3 * time.Second, `{"$numberDouble": "0.25"}`: 250 * time.Millisecond,
	} {
		var s NodeStatus
		if err := json.Unmarshal([]byte(`{"ttl": `+text+`, "pid": {"$numberLong": "9007199254740993"}}`), &s); err != nil {
			t.Fatalf("ttl %s: %v", text, err)
		}
		if s.TTL != ttl || s.PID != 9007199254740993 {
			t.Errorf("ttl %s: TTL %v PID %d", text, s.TTL, s.PID)
		}
	}
	for _, bad := range []string{`{"pid": 1.5}`, `{"pid": {"$numberDouble": "NaN"}}`, `{"ttl": {"$numberDouble": "NaN"}}`,
		`{"timestamp": "2026-01-01"}`, `{"timestamp": {"$date": "yesterday"}}`} {
		var s NodeStatus
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s decoded without error: %+v", bad, s)
		}
	}

	const cluster = `{"member_detail": [{"uuid": "u2", "pid": 7, "ttl": 15, "is_leader": false}, ` + node + `],
		"leader": {"host": "h", "process_id": 4242, "uuid": "u1"}, "timestamp": {"$date": "2026-11-23T17:38:29Z"}}`
	var d ClusterDetail
	if err := json.Unmarshal([]byte(cluster), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Members) != 2 || d.Members[0].UUID != "u2" || d.Members[0].PID != 7 || !d.Members[1].IsLeader ||
		d.Leader == nil || *d.Leader != (LeaderInfo{Host: "h", PID: 4242, UUID: "u1"}) ||
		!d.Timestamp.Equal(time.Date(2026, 11, 23, 17, 38, 29, 0, time.UTC)) {
		t.Fatalf("ClusterDetail = %+v", d)
	}
	if err := json.Unmarshal([]byte(`{"member_detail": [], "leader": null, "timestamp": {"$date": "2026-11-23T17:38:29Z"}}`), &d); err != nil || d.Leader != nil || len(d.Members) != 0 {
		t.Fatalf("no leader: %+v, %v", d, err)
	}
}
