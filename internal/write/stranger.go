package write

import (
	"sync"
	"time"
)

// Strangers remembers, for a while, the peers that asked this node for something before
// they were in its view: a member that has just joined and is pulling keys. A write must
// reach every member that may hold a copy, and such a member may have taken one from this
// node before anyone else knew it, so the writes this node is told of are passed on to
// them too (see Writer.Tell).
type Strangers struct {
	mu sync.Mutex
	// guards m
	m map[string]stranger
}

type stranger struct {
	addr  string
	until time.Time
}

// maxStrangers bounds the set; past it the oldest entries give way. Joins are rare, so this
// is far more than a cluster needs.
const maxStrangers = 256

// Add remembers name, whose peer port is at addr, until until.
func (s *Strangers) Add(name, addr string, until time.Time) {
	if name == "" || addr == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]stranger)
	}
	if len(s.m) >= maxStrangers {
		var oldest string
		for n, st := range s.m {
			if oldest == "" || st.until.Before(s.m[oldest].until) {
				oldest = n
			}
		}
		delete(s.m, oldest)
	}
	s.m[name] = stranger{addr: addr, until: until}
}

// Forget drops name: it is in the view now, or has left it, or is leaving — a member that
// every view has dropped keeps no copy a write must reach.
func (s *Strangers) Forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
}

// none reports whether no stranger is remembered (expired ones included: list forgets them).
func (s *Strangers) none() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m) == 0
}

// list returns the strangers remembered at now, by name, and forgets the expired ones.
func (s *Strangers) list(now time.Time) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.m))
	for n, st := range s.m {
		if now.After(st.until) {
			delete(s.m, n)
			continue
		}
		out[n] = st.addr
	}
	return out
}
