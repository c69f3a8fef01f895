package mongoelector

import "sync"

// guard keeps a C handle alive while calls are in flight. Unlike sync.RWMutex it never
// blocks a nested enter (an elector callback calling back into its elector while a
// Close waits), and close() waits only for calls already inside.
type guard struct {
	mu     sync.Mutex
	cond   *sync.Cond
	active int
	closed bool
}

func (g *guard) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.active++
	return true
}

func (g *guard) exit() {
	g.mu.Lock()
	g.active--
	if g.active == 0 && g.cond != nil {
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// markClosed refuses new calls; it reports whether this call closed the guard (so
// exactly one Close frees the handle).
func (g *guard) markClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	return true
}

func (g *guard) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// drained reports whether the guard is closed and no call is inside any more: from
// then on nothing can use the handle.
func (g *guard) drained() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed && g.active == 0
}

// wait blocks until no call is inside.
func (g *guard) wait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	for g.active > 0 {
		g.cond.Wait()
	}
}
