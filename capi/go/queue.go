package mongoelector

/*
#include <stdlib.h>
#include "mongoelector.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unsafe"
)

// QueueOf says whose fair queue ReadQueue reads.
type QueueOf int

const (
	QueueLock      QueueOf = C.MONGOELECTOR_QUEUE_LOCK      // a plain lock's (fair Lockers)
	QueueSemaphore QueueOf = C.MONGOELECTOR_QUEUE_SEMAPHORE // a semaphore's
	QueueRWLock    QueueOf = C.MONGOELECTOR_QUEUE_RWLOCK    // a read-write lock's (fair writers)
)

func (o QueueOf) String() string {
	switch o {
	case QueueLock:
		return "lock"
	case QueueSemaphore:
		return "semaphore"
	case QueueRWLock:
		return "read-write lock"
	}
	return fmt.Sprintf("QueueOf(%d)", int(o))
}

// QueueStatus is who waits in a key's fair queue.
type QueueStatus struct {
	ServerTime time.Time      // when it was read: the earliest the server's clock could read
	Waiting    []QueuedWaiter // the live waiters, first in line first; empty when nobody waits
}

// QueuedWaiter is one fair waiter still queued for a key.
type QueuedWaiter struct {
	UUID    string    // the waiting Locker's, Semaphore's or RWLock's UUID
	Ticket  int64     // its place in the line: smaller tickets are served first
	Expires time.Time // when its entry expires unless renewed (server time)
}

type queueStatusJSON struct {
	ServerTimeMS extInt `json:"server_time_ms"`
	Waiting      []struct {
		UUID     string `json:"uuid"`
		Ticket   extInt `json:"ticket"`
		ExpireMS extInt `json:"expire_ms"`
	} `json:"waiting"`
}

// ReadQueue reads who waits for key in its fair queue without joining it (nothing is
// written): the blocking acquires of fair Lockers (of QueueLock), Semaphores
// (QueueSemaphore) or RWLock writers (QueueRWLock) that found the key taken. collection
// is the lock's, semaphore's or read-write lock's collection, "" for the default of its
// kind. One read plus, now and then, a sample of the server's clock.
func ReadQueue(ctx context.Context, client *Client, of QueueOf, collection, key string) (*QueueStatus, error) {
	if client == nil {
		return nil, invalidArgument("client is nil")
	}
	if !client.g.enter() {
		return nil, closedError("client")
	}
	ckey, err := cstring("key", key)
	if err != nil {
		client.g.exit()
		return nil, err
	}
	var ccoll *C.char
	if collection != "" {
		if ccoll, err = cstring("collection", collection); err != nil {
			freeC(ckey)
			client.g.exit()
			return nil, err
		}
	}
	// The status is parsed on the goroutine of the C call: one that ends after ctx frees
	// its own text.
	return runCtx(ctx, "queue of "+of.String()+" "+key, func() (*QueueStatus, error) {
		var text *C.char
		if err := call(func() C.mongoelector_status {
			return C.mongoelector_client_read_queue(client.ptr, C.mongoelector_queue_of(of), ccoll, ckey, &text)
		}); err != nil {
			return nil, err
		}
		return parseQueueStatus(text)
	}, nil, func() {
		freeC(ckey)
		if ccoll != nil {
			freeC(ccoll)
		}
		client.g.exit()
	})
}

// parseQueueStatus reads (and frees) the C API's queue object.
func parseQueueStatus(text *C.char) (*QueueStatus, error) {
	defer C.mongoelector_free(unsafe.Pointer(text))
	var j queueStatusJSON
	if err := json.Unmarshal([]byte(C.GoString(text)), &j); err != nil {
		return nil, err
	}
	st := &QueueStatus{ServerTime: msTime(j.ServerTimeMS), Waiting: []QueuedWaiter{}}
	for _, w := range j.Waiting {
		st.Waiting = append(st.Waiting, QueuedWaiter{UUID: w.UUID, Ticket: int64(w.Ticket),
			Expires: msTime(w.ExpireMS)})
	}
	return st, nil
}
