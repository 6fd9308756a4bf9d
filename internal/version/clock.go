package version

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
)

// Clock hands out the versions of writes. The writer draws a write's version — not the owner
// — so that a write that reaches an owner late (its writer failed over meanwhile, and wrote
// again) is applied at its own, older version and cannot pass the newer write. The upper 48
// bits are milliseconds of the wall clock, the floor.
//
// The low byte of every version is the node's id (a hash of its name), so two nodes that
// write a key at the same instant draw different versions, and every member orders their
// writes alike; the byte above it counts within a millisecond.
//
// Its methods are safe for concurrent use.
type Clock struct {
	last atomic.Uint64
	id   uint64           // in [0, 255]
	now  func() time.Time // for testing
}

// New returns the clock of the node called name, reading the wall clock from now.
func New(name string, now func() time.Time) *Clock {
	return &Clock{id: id(name), now: now}
}

// Next returns a new version.
func (c *Clock) Next() uint64 {
	wall := uint64(c.now().UnixMilli()) << 16
	for {
		last := c.last.Load()
		next := (max(last+0x100, wall) &^ 0xff) | c.id
		if c.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// id is the low byte of a node's versions: FNV-1a of its name.
func id(name string) uint64 {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return uint64(h & 0xff)
}

// Max is the largest version a node takes from elsewhere — a peer's message, an owner's
// answer, a state exchange. The clock cannot pass 2^64−1: Next would wrap around to the wall
// clock and hand out versions below the ones it gave before, so the writes that follow would
// be silently lost, and an entry stored at a version no clock can pass could never be written
// again. Honest versions are milliseconds since 1970 in their upper 48 bits, below 2^63 until
// the year 6400.
const Max = 1<<63 - 1

// Check refuses a version from elsewhere above Max.
func Check(v uint64) error {
	if v > Max {
		return fmt.Errorf("corral: version %#x out of range (largest %#x)", v, uint64(Max))
	}
	return nil
}

// Observe moves the clock past v. A v above Max is ignored (see there); the callers that
// store something at v refuse it first (Check).
func (c *Clock) Observe(v uint64) {
	if v > Max {
		return
	}
	for {
		last := c.last.Load()
		if v <= last || c.last.CompareAndSwap(last, v) {
			return
		}
	}
}

// OrNext returns the version of a write a peer asks this node to apply: v, the one the writer
// drew, which the clock observes; or a new one for a writer that sent none (v == 0).
func (c *Clock) OrNext(v uint64) uint64 {
	if v == 0 {
		return c.Next()
	}
	c.Observe(v)
	return v
}

// Now returns the largest version handed out or seen.
func (c *Clock) Now() uint64 { return c.last.Load() }

// stateFormat is the first byte of the state a node sends in memberlist's full state
// exchanges: format 1 is the byte and the clock, big-endian.
const stateFormat = 1

// LocalState is the state sent in a full state exchange (peer.Config.LocalState): this node's
// clock, so that a joining node starts above every version the cluster has seen.
func (c *Clock) LocalState(bool) []byte {
	b := make([]byte, 9)
	b[0] = stateFormat
	binary.BigEndian.PutUint64(b[1:], c.Now())
	return b
}

// MergeState observes another member's clock (peer.Config.MergeState); state of another
// format is ignored.
func (c *Clock) MergeState(b []byte, _ bool) {
	if len(b) >= 9 && b[0] == stateFormat {
		c.Observe(binary.BigEndian.Uint64(b[1:9]))
	}
}
