package owner

import "sync"

// WriteGate lets writes be applied on this node as a key's owner (a peer's Set, Remove or
// FillSet, and this node's own) until it is shut, and Shut waits for the ones being applied:
// a leaving node shuts it when it stops serving, so that the last round of its hand-off sees
// every write it applied, and none lands after (see State). The zero value is open.
type WriteGate struct {
	mu   sync.RWMutex
	shut bool
}

// Enter reports whether a write may be applied here; if so, the caller applies it and then
// calls Exit. Writes enter at once, concurrently, until Shut is called.
func (g *WriteGate) Enter() bool {
	g.mu.RLock()
	if g.shut {
		g.mu.RUnlock()
		return false
	}
	return true
}

// Exit ends a write that Enter let in.
func (g *WriteGate) Exit() { g.mu.RUnlock() }

// Shut refuses every write from now on, and returns once the writes let in have ended.
func (g *WriteGate) Shut() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
}
