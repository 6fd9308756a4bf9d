package corral

import (
	"encoding/binary"
	"sync/atomic"
	"time"
)

// versionClock hands out the versions of writes (Set and Remove): a hybrid logical clock.
// Every version it hands out is larger than every version this node handed out or saw
// before — in a peer's request header, an invalidation, an entry, or a full state exchange
// — so a write that starts after another returned gets a larger version, whichever nodes
// ran them, whatever their wall clocks say: the first write reached every member (see the
// package documentation), and the second's owner learned the first's version from it or
// from its caller. The wall clock is only a floor (milliseconds in the upper 48 bits), so a
// restarted node begins above the versions of its earlier life without having heard of them.
type versionClock struct {
	last atomic.Uint64
	now  func() time.Time // for testing
}

// Next returns a new version.
func (c *versionClock) Next() uint64 {
	wall := uint64(c.now().UnixMilli()) << 16
	for {
		last := c.last.Load()
		next := max(last+1, wall)
		if c.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Observe moves the clock past v.
func (c *versionClock) Observe(v uint64) {
	for {
		last := c.last.Load()
		if v <= last || c.last.CompareAndSwap(last, v) {
			return
		}
	}
}

// Now returns the largest version handed out or seen.
func (c *versionClock) Now() uint64 { return c.last.Load() }

// stateFormat is the first byte of the state a node sends in memberlist's full state
// exchanges: format 1 is the byte and the clock, big-endian.
const stateFormat = 1

// localState is the state sent in a full state exchange: this node's clock, so that a
// joining node starts above every version the cluster has seen.
func (c *versionClock) localState(bool) []byte {
	b := make([]byte, 9)
	b[0] = stateFormat
	binary.BigEndian.PutUint64(b[1:], c.Now())
	return b
}

// mergeState observes another member's clock; state of another format is ignored.
func (c *versionClock) mergeState(b []byte, _ bool) {
	if len(b) >= 9 && b[0] == stateFormat {
		c.Observe(binary.BigEndian.Uint64(b[1:9]))
	}
}
