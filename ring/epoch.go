package ring

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
)

// Epoch identifies the ring's member set and config: two rings, built on any
// nodes in any join order, have the same epoch exactly when they have the
// same members and config (up to 64-bit hash collisions), and then they
// route every key alike. It is 0 for an empty ring and never 0 otherwise, so
// 0 can mean "no ring".
//
// Definition: xxhash64 of the config, as three little-endian 64-bit words
// (PartitionCount, ReplicationFactor, and the IEEE-754 bits of Load, defaults
// applied), followed by the sorted member names joined with "\x00"; a
// result of 0 is replaced by 1.
func (r *Ring) Epoch() uint64 {
	if r == nil {
		return 0
	}
	return r.epoch
}

func epoch(sorted []string, cfg Config) uint64 {
	if len(sorted) == 0 {
		return 0
	}
	d := xxhash.New()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(cfg.PartitionCount))
	binary.LittleEndian.PutUint64(b[8:], uint64(cfg.ReplicationFactor))
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(cfg.Load))
	d.Write(b[:])
	// The config prefix has a fixed length and names hold no NUL (New
	// checks), so distinct (config, set) pairs give distinct inputs.
	for i, name := range sorted {
		if i > 0 {
			d.WriteString("\x00")
		}
		d.WriteString(name)
	}
	if e := d.Sum64(); e != 0 {
		return e
	}
	return 1
}
