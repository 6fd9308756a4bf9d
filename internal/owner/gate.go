package owner

import "sync"

// WriteGate lets writes be applied on this node as a key's owner (a peer's Set, Remove or
// FillSet, and this node's own) until it is shut, and Shut waits for the ones being applied:
// a leaving node shuts it when it stops serving, so that the last round of its hand-off sees
// every write it applied, and none lands after (see State). The zero value is open.
//
// A write being applied may wait on the network (its backups are told before it returns), so
// Shut waits on a channel rather than on a lock: a write that enters while Shut waits is
// refused at once instead of queueing behind it, and the wait is one a virtual clock (the
// simulator's) can see as blocked.
type WriteGate struct {
	mu      sync.Mutex
	shut    bool
	applied int           // writes let in and not yet ended
	drained chan struct{} // closed when shut and applied reaches zero; made by Shut
}

// Enter reports whether a write may be applied here; if so, the caller applies it and then
// calls Exit. Writes enter at once, concurrently, until Shut is called.
func (g *WriteGate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return false
	}
	g.applied++
	return true
}

// Exit ends a write that Enter let in.
func (g *WriteGate) Exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.applied--
	if g.shut && g.applied == 0 {
		close(g.drained)
	}
}

// Shut refuses every write from now on, and returns once the writes let in have ended.
// Calling it again waits the same way.
func (g *WriteGate) Shut() {
	g.mu.Lock()
	if !g.shut {
		g.shut = true
		g.drained = make(chan struct{})
		if g.applied == 0 {
			close(g.drained)
		}
	}
	drained := g.drained
	g.mu.Unlock()
	<-drained
}
