package mongoelector

/*
#include <stdlib.h>
#include "mongoelector.h"
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
)

// Client is a lazy connection to a MongoDB server and one database. It is safe for
// concurrent use. Make one per deployment and process: every Locker and Elector made
// from it shares its connection pool (at most maxPoolSize connections, default 10, plus
// one monitor per server; lockers of one TTL share one pool), so a thousand keys cost a
// few connections and no goroutine or thread each. Lockers and electors made from it
// keep it alive: the C client is
// freed once Close was called (or the Client became unreachable) and every child was
// closed, as the C API requires.
type Client struct {
	g        guard
	ptr      *C.mongoelector_client
	mu       sync.Mutex // guards children and ptr once closed
	children int
}

// NewClient connects lazily to uri ("mongodb://host:port/?options") and uses database.
// Nothing is sent until first use (no context: no round trip); a malformed URI is
// ErrInvalidArgument. "sqlite:///abs/path/locks.db" keeps the locks in one SQLite file
// for the processes of one host (database is then ignored).
func NewClient(uri, database string) (*Client, error) {
	curi, err := cstring("uri", uri)
	if err != nil {
		return nil, err
	}
	defer freeC(curi)
	cdb, err := cstring("database", database)
	if err != nil {
		return nil, err
	}
	defer freeC(cdb)
	var ptr *C.mongoelector_client
	if err := call(func() C.mongoelector_status { return C.mongoelector_client_new(curi, cdb, &ptr) }); err != nil {
		return nil, err
	}
	c := &Client{ptr: ptr}
	runtime.SetFinalizer(c, (*Client).Close)
	return c, nil
}

// ServerInfo asks the server what it is: name ("MongoDB", "FerretDB",
// "mongo-java-server", "SQLite") and version. One round trip the first time (the
// client remembers the answer); returns when ctx ends (see the package doc, "Contexts").
func (c *Client) ServerInfo(ctx context.Context) (name, version string, err error) {
	if !c.g.enter() {
		return "", "", closedError("client")
	}
	type info struct{ name, version string }
	r, err := runCtx(ctx, "server info", func() (info, error) {
		var n, v *C.char
		err := call(func() C.mongoelector_status { return C.mongoelector_client_server_info_copy(c.ptr, &n, &v) })
		if err != nil {
			return info{}, err
		}
		defer C.mongoelector_free(unsafePtr(n))
		defer C.mongoelector_free(unsafePtr(v))
		return info{C.GoString(n), C.GoString(v)}, nil
	}, nil, c.g.exit)
	return r.name, r.version, err
}

// Close releases the client. Idempotent and safe for concurrent use; lockers and
// electors already made keep working until they are closed.
func (c *Client) Close() error {
	if !c.g.markClosed() {
		return nil
	}
	runtime.SetFinalizer(c, nil)
	c.g.wait()
	c.maybeFree()
	return nil
}

// acquireChild pins the C client for a new locker/elector. The caller calls childMade()
// once the child exists (or failed) and childDone() when the child is freed.
func (c *Client) acquireChild() (*C.mongoelector_client, error) {
	if !c.g.enter() {
		return nil, closedError("client")
	}
	c.mu.Lock()
	c.children++
	c.mu.Unlock()
	return c.ptr, nil
}

// childMade ends the pin of acquireChild's guard once the child's creation returned
// (whether or not it succeeded).
// newChild makes a C handle from client with create, bounded by ctx (runCtxAbandon): a
// handle made after the caller gave up is freed with free. args runs once the C call is
// over, whoever waited for it (releasing the C strings it read); dropped (may be nil)
// runs when the caller gets no handle (deleting a cgo.Handle the C config carried).
func newChild[P any](ctx context.Context, client *Client, what string,
	create func(*C.mongoelector_client) (P, error), free func(P), args, dropped func()) (P, error) {
	var zero P
	if dropped == nil {
		dropped = func() {}
	}
	cptr, err := client.acquireChild()
	if err != nil {
		args()
		dropped()
		return zero, err
	}
	ptr, abandoned, err := runCtxAbandon(ctx, what, func() (P, error) { return create(cptr) },
		func(p P, err error) {
			// Made after the caller gave up: never started, nobody will use it.
			if err == nil {
				free(p)
			}
			dropped()
			client.childDone()
		}, func() {
			args()
			client.childMade()
		})
	if err != nil {
		if !abandoned {
			dropped()
			client.childDone()
		}
		return zero, err
	}
	return ptr, nil
}

func (c *Client) childMade() {
	c.g.exit()
	c.maybeFree()
}

// childDone unpins the C client when a child is freed or failed to be created.
func (c *Client) childDone() {
	c.mu.Lock()
	c.children--
	c.mu.Unlock()
	c.maybeFree()
}

func (c *Client) maybeFree() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Not drained: a child's Close may get here while Close still waits for a call in
	// flight (ServerInfo), which must not see the client freed. ptr == nil: freed.
	if c.ptr == nil || c.children > 0 || !c.g.drained() {
		return
	}
	C.mongoelector_client_free(c.ptr)
	c.ptr = nil
}
