package mongoelector

/*
#include <stdlib.h>
#include "mongoelector.h"
*/
import "C"

import (
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
	infoMu   sync.Mutex // mongoelector_client_server_info is not concurrent with itself
	mu       sync.Mutex // guards children and ptr once closed
	children int
}

// NewClient connects lazily to uri ("mongodb://host:port/?options") and uses database.
// Nothing is sent until first use; a malformed URI is ErrInvalidArgument.
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
// "mongo-java-server") and version. One round trip.
func (c *Client) ServerInfo() (name, version string, err error) {
	if !c.g.enter() {
		return "", "", closedError("client")
	}
	defer c.g.exit()
	c.infoMu.Lock()
	defer c.infoMu.Unlock()
	var n, v *C.char
	err = call(func() C.mongoelector_status { return C.mongoelector_client_server_info(c.ptr, &n, &v) })
	if err != nil {
		return "", "", err
	}
	return C.GoString(n), C.GoString(v), nil
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

// acquireChild pins the C client for a new locker/elector. The caller calls c.g.exit()
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
