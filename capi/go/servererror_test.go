package mongoelector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ---- just enough of the MongoDB wire protocol to write a document the library never
// writes (a lock document whose fence is a string), so that the server answers the
// library with a real error code ---------------------------------------------------

type bsonField struct {
	name  string
	value any // string, bool, int32, int64, time.Time, []bsonField (document), []any (array)
}

func bsonEncode(doc []bsonField) []byte {
	var body []byte
	for _, f := range doc {
		var tag byte
		var b []byte
		switch v := f.value.(type) {
		case string:
			tag = 0x02
			b = binary.LittleEndian.AppendUint32(nil, uint32(len(v)+1))
			b = append(append(b, v...), 0)
		case bool:
			tag = 0x08
			b = []byte{0}
			if v {
				b[0] = 1
			}
		case int32:
			tag, b = 0x10, binary.LittleEndian.AppendUint32(nil, uint32(v))
		case int64:
			tag, b = 0x12, binary.LittleEndian.AppendUint64(nil, uint64(v))
		case time.Time:
			tag, b = 0x09, binary.LittleEndian.AppendUint64(nil, uint64(v.UnixMilli()))
		case []bsonField:
			tag, b = 0x03, bsonEncode(v)
		case []any:
			var d []bsonField
			for i, x := range v {
				d = append(d, bsonField{fmt.Sprint(i), x})
			}
			tag, b = 0x04, bsonEncode(d)
		default:
			panic(fmt.Sprintf("bsonEncode: %T", v))
		}
		body = append(body, tag)
		body = append(append(body, f.name...), 0)
		body = append(body, b...)
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(body)+5))
	return append(append(out, body...), 0)
}

// bsonNumber finds a top-level numeric field (double, int32, int64) of doc.
func bsonNumber(doc []byte, name string) (float64, bool) {
	for i := 4; i < len(doc) && doc[i] != 0; {
		tag := doc[i]
		i++
		end := i
		for doc[end] != 0 {
			end++
		}
		field := string(doc[i:end])
		i = end + 1
		var size int
		switch tag {
		case 0x01:
			if field == name {
				return math.Float64frombits(binary.LittleEndian.Uint64(doc[i:])), true
			}
			size = 8
		case 0x10:
			if field == name {
				return float64(int32(binary.LittleEndian.Uint32(doc[i:]))), true
			}
			size = 4
		case 0x12:
			if field == name {
				return float64(int64(binary.LittleEndian.Uint64(doc[i:]))), true
			}
			size = 8
		case 0x02:
			size = 4 + int(binary.LittleEndian.Uint32(doc[i:]))
		case 0x03, 0x04:
			size = int(binary.LittleEndian.Uint32(doc[i:]))
		case 0x08:
			size = 1
		case 0x09, 0x11:
			size = 8
		case 0x0A:
			size = 0
		case 0x07:
			size = 12
		default:
			return 0, false
		}
		i += size
	}
	return 0, false
}

// wireCommand sends one OP_MSG command to the server of uri and returns the reply.
func wireCommand(t *testing.T, uri string, cmd []bsonField) []byte {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := binary.LittleEndian.AppendUint32(nil, 0) // flagBits
	body = append(body, 0)                           // section kind 0: the body
	body = append(body, bsonEncode(cmd)...)
	msg := binary.LittleEndian.AppendUint32(nil, uint32(16+len(body)))
	msg = binary.LittleEndian.AppendUint32(msg, 1)    // requestID
	msg = binary.LittleEndian.AppendUint32(msg, 0)    // responseTo
	msg = binary.LittleEndian.AppendUint32(msg, 2013) // OP_MSG
	if _, err := conn.Write(append(msg, body...)); err != nil {
		t.Fatal(err)
	}
	var hdr [16]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, binary.LittleEndian.Uint32(hdr[:4])-16)
	if _, err := io.ReadFull(conn, rest); err != nil {
		t.Fatal(err)
	}
	return rest[5:] // flagBits, kind 0
}

// The server's error code, code name and labels reach Go: a released lock document
// whose fence is a string makes the server's $inc of the fence fail (MongoDB and
// mongo-java-server: code 14 TypeMismatch).
func TestServerErrorCodeReachesGo(t *testing.T) {
	uri := testURI(t)
	if !strings.HasPrefix(uri, "mongodb://") {
		t.Skip("not a mongodb:// server")
	}
	c := newTestClient(t)
	key := uniqueKey(t)
	coll := fmt.Sprintf("go_bad_fence_%d", os.Getpid())
	reply := wireCommand(t, uri, []bsonField{
		{"insert", coll},
		{"documents", []any{[]bsonField{
			{"_id", key}, {"locked", false}, {"host", "nowhere"}, {"uuid", "someone-else"},
			{"pid", int64(1)}, {"ts_created", time.UnixMilli(0)}, {"ts_expire", time.UnixMilli(0)},
			{"fence", "not a number"},
		}}},
		{"$db", testDB},
	})
	if ok, _ := bsonNumber(reply, "ok"); ok != 1 {
		t.Fatalf("insert of the bad document failed: reply %q", reply)
	}
	l, err := NewLocker(bg, c, key, &LockerOptions{Collection: coll, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.TryAcquire(bg)
	t.Logf("server error: %v", err)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrServer) {
		t.Fatalf("TryAcquire over a bad document: want ErrServer, got %v", err)
	}
	if e.Code != 14 || e.CodeName != "TypeMismatch" {
		t.Fatalf("server code %d %q, want 14 TypeMismatch (%v)", e.Code, e.CodeName, err)
	}
	if e.HasLabel("RetryableWriteError") {
		t.Fatalf("labels %v", e.Labels)
	}
	if !strings.Contains(err.Error(), "[code 14 TypeMismatch]") {
		t.Fatalf("message %q does not show the code", err)
	}
	// The detail is per failure: the next one (the library refuses a negative step),
	// without a server answer, has none.
	_, err = l.Acquire(bg, WithStep(-time.Second))
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument || e.Code != 0 || e.CodeName != "" || e.Labels != nil {
		t.Fatalf("a bad argument after a server error: %#v", err)
	}
}

// An SQLite failure keeps its extended result code (SQLITE_CONSTRAINT_TRIGGER, 1811).
func TestSQLiteErrorKeepsItsResultCode(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("no sqlite3 command to add the trigger with")
	}
	db := filepath.Join(t.TempDir(), "locks.db")
	c, err := NewClient("sqlite://"+db, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := NewLocker(bg, c, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.TryAcquire(bg); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
	sql := `CREATE TRIGGER refuse_insert BEFORE INSERT ON documents BEGIN SELECT RAISE(ABORT, 'refused by test'); END;
CREATE TRIGGER refuse_update BEFORE UPDATE ON documents BEGIN SELECT RAISE(ABORT, 'refused by test'); END;`
	if out, err := exec.Command("sqlite3", db, sql).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v: %s", err, out)
	}
	_, err = l.TryAcquire(bg)
	t.Logf("SQLite error: %v", err)
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusServer || e.Code != 1811 || e.CodeName != "" {
		t.Fatalf("want ErrServer with code 1811, got %#v", err)
	}
}
