package mongoelector

// Typed views of the C API's status JSON: MongoDB relaxed Extended JSON v2 written by
// libbson (dates as {"$date": "2026-11-23T17:38:28.123Z"} or {"$date": {"$numberLong":
// "<ms>"}}, NaN and infinities as {"$numberDouble": "NaN"}, other numbers plain).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// NodeStatus is an elector node's status document: this node's (Elector.NodeStatus) or
// one reported to the status collection (ClusterDetail.Members). Dates are server time;
// a zero time.Time is an absent or null date.
type NodeStatus struct {
	UUID           string
	Key            string
	TTL            time.Duration
	Timestamp      time.Time // when the status was taken
	Host           string
	PID            int64
	LockOwned      bool
	LockCreated    time.Time // while leading
	LockExpires    time.Time // while leading
	IsLeader       bool
	ElectorRunning bool
	LastPoll       time.Time // zero before the first poll
	AppVersion     string    // "" when none was set
}

// LeaderInfo names the holder of an elector's lock.
type LeaderInfo struct {
	Host string
	PID  int64
	UUID string
	// Payload is the leader's payload (ElectorOptions.Payload) as JSON text, "" when
	// none (a string, so that LeaderInfo stays comparable).
	Payload string
}

// ClusterDetail is what the status collection and the lock say about an election.
type ClusterDetail struct {
	Members   []NodeStatus // the status documents of the key's nodes, newest first
	Leader    *LeaderInfo  // nil when nobody holds the lock
	Timestamp time.Time    // server time of the reading
}

type nodeStatusJSON struct {
	UUID           string     `json:"uuid"`
	Key            string     `json:"key"`
	TTL            extSeconds `json:"ttl"`
	Timestamp      extDate    `json:"timestamp"`
	Host           string     `json:"host"`
	PID            extInt     `json:"pid"`
	LockOwned      bool       `json:"lock_owned"`
	LockCreated    extDate    `json:"lock_created"`
	LockExpires    extDate    `json:"lock_expires"`
	IsLeader       bool       `json:"is_leader"`
	ElectorRunning bool       `json:"elector_running"`
	LastPoll       extDate    `json:"last_poll"`
	AppVersion     *string    `json:"app_version"`
	// Fields this version does not know are ignored.
}

// UnmarshalJSON decodes a status document in relaxed (or canonical) Extended JSON.
func (s *NodeStatus) UnmarshalJSON(data []byte) error {
	var j nodeStatusJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*s = NodeStatus{
		UUID: j.UUID, Key: j.Key, TTL: time.Duration(j.TTL), Timestamp: time.Time(j.Timestamp),
		Host: j.Host, PID: int64(j.PID), LockOwned: j.LockOwned,
		LockCreated: time.Time(j.LockCreated), LockExpires: time.Time(j.LockExpires),
		IsLeader: j.IsLeader, ElectorRunning: j.ElectorRunning, LastPoll: time.Time(j.LastPoll),
	}
	if j.AppVersion != nil {
		s.AppVersion = *j.AppVersion
	}
	return nil
}

type leaderJSON struct {
	Host      string          `json:"host"`
	ProcessID extInt          `json:"process_id"`
	UUID      string          `json:"uuid"`
	Payload   json.RawMessage `json:"payload"`
}

type clusterDetailJSON struct {
	MemberDetail []NodeStatus `json:"member_detail"`
	Leader       *leaderJSON  `json:"leader"`
	Timestamp    extDate      `json:"timestamp"`
}

// UnmarshalJSON decodes {member_detail: [...], leader: {host, process_id, uuid, payload} | null,
// timestamp}.
func (d *ClusterDetail) UnmarshalJSON(data []byte) error {
	var j clusterDetailJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*d = ClusterDetail{Members: j.MemberDetail, Timestamp: time.Time(j.Timestamp)}
	if j.Leader != nil {
		d.Leader = &LeaderInfo{Host: j.Leader.Host, PID: int64(j.Leader.ProcessID), UUID: j.Leader.UUID}
		if len(j.Leader.Payload) > 0 && string(j.Leader.Payload) != "null" {
			d.Leader.Payload = string(j.Leader.Payload)
		}
	}
	return nil
}

// extNumber is a number in Extended JSON: plain, or {"$numberInt"|"$numberLong"|
// "$numberDouble"|"$numberDecimal": "<text>"}. It gives the number's text.
func extNumber(data []byte) (string, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		var w map[string]string
		if err := json.Unmarshal(data, &w); err != nil || len(w) != 1 {
			return "", fmt.Errorf("mongoelector: not an Extended JSON number: %s", data)
		}
		for _, k := range []string{"$numberInt", "$numberLong", "$numberDouble", "$numberDecimal"} {
			if v, ok := w[k]; ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("mongoelector: not an Extended JSON number: %s", data)
	}
	var n json.Number
	if err := json.Unmarshal(data, &n); err != nil {
		return "", fmt.Errorf("mongoelector: not a number: %s", data)
	}
	return n.String(), nil
}

// extInt is an integer; a double with an integral value (15.0) is accepted, a
// fractional one is an error. null is 0.
type extInt int64

func (i *extInt) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		*i = 0
		return nil
	}
	text, err := extNumber(data)
	if err != nil {
		return err
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		*i = extInt(n)
		return nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("mongoelector: not an integer: %s", text)
	}
	*i = extInt(int64(f))
	return nil
}

// extSeconds is a duration given as a number of seconds (integer or not).
type extSeconds time.Duration

func (s *extSeconds) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		*s = 0
		return nil
	}
	text, err := extNumber(data)
	if err != nil {
		return err
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		*s = extSeconds(time.Duration(n) * time.Second)
		return nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("mongoelector: not a number of seconds: %s", text)
	}
	*s = extSeconds(time.Duration(math.Round(f * float64(time.Second))))
	return nil
}

// extDate is {"$date": "<ISO-8601>"} or {"$date": {"$numberLong": "<ms>"}} (or a plain
// millisecond number, canonical style); null is the zero time.
type extDate time.Time

func (d *extDate) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		*d = extDate(time.Time{})
		return nil
	}
	var w struct {
		Date json.RawMessage `json:"$date"`
	}
	if err := json.Unmarshal(data, &w); err != nil || w.Date == nil {
		return fmt.Errorf("mongoelector: not an Extended JSON date: %s", data)
	}
	var iso string
	if json.Unmarshal(w.Date, &iso) == nil {
		t, err := time.Parse(time.RFC3339Nano, iso)
		if err != nil {
			return fmt.Errorf("mongoelector: bad $date %q: %v", iso, err)
		}
		*d = extDate(t)
		return nil
	}
	var ms extInt
	if err := ms.UnmarshalJSON(w.Date); err != nil {
		return fmt.Errorf("mongoelector: bad $date %s", w.Date)
	}
	*d = extDate(time.UnixMilli(int64(ms)).UTC())
	return nil
}
