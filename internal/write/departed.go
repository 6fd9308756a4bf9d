package write

import (
	"sync"
	"time"
)

// Departures remembers the members whose graceful leave this node heard of (memberlist state
// Left, not a failure detected), until they come back. A member that has left serves none
// of its copies — it stopped serving from its stores once it had handed them off, before it
// left — so a write need not reach it: a tell that fails because the member left meanwhile
// does not name it unreached (see Writer.Tell).
type Departures struct {
	mu sync.Mutex
	// guards m
	m map[string]time.Time // name → when it left
}

// maxDepartures bounds the set; past it the oldest entries give way (a tell to a member
// that left that long ago cannot still be on its way).
const maxDepartures = 1024

// Left remembers that name left gracefully at at.
func (d *Departures) Left(name string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = make(map[string]time.Time)
	}
	if _, ok := d.m[name]; !ok && len(d.m) >= maxDepartures {
		var oldest string
		for n, t := range d.m {
			if oldest == "" || t.Before(d.m[oldest]) {
				oldest = n
			}
		}
		delete(d.m, oldest)
	}
	d.m[name] = at
}

// Back forgets that name left: it joined again (a new life under the same name).
func (d *Departures) Back(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, name)
}

// has reports whether name left gracefully and has not come back.
func (d *Departures) has(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.m[name]
	return ok
}
