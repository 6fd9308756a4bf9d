package fill

import (
	"math"
	"sync/atomic"
	"time"
)

// Never is the FreshFor and StaleFor of an entry that never expires.
const Never = time.Duration(math.MaxInt64)

// Entry is a stored value as seen at one instant: its remaining freshness, not an expiry
// instant, so it can cross to another process whose clock has another origin or skew.
type Entry[V any] struct {
	Value    V
	FreshFor time.Duration // remaining freshness; ≤ 0 once stale; Never if it never expires
	StaleFor time.Duration // remaining time it may still be served (stale once FreshFor ≤ 0); ≥ FreshFor
	Version  uint64        // orders writes of one key; see Cache.Put
	FillTime time.Duration // how long the fill that produced the value took (XFetch's delta)
	NotFound bool          // a remembered ErrNotFound (negative caching): Value is the zero value, and StaleFor is FreshFor
	Tags     []string      // the entry's tags (see Tags); nil = none
	Born     uint64        // for a tagged entry, the version clock's reading when its value was made (see Tags); 0 otherwise
}

// entry is what the store holds. It is immutable once stored, except for flagRefreshing.
// Its layout is kept at 48 bytes for a string value (an allocation size class): 1M entries
// cost 16 MB less than with the obvious layout, and the weight is computed, not stored.
type entry[V any] struct {
	value      V
	fresh      int64  // clock nanos until which the value is fresh; math.MaxInt64 = forever
	stale      int64  // clock nanos until which it may be served stale; ≥ fresh
	version    uint64 // orders the writes of the key
	fillMicros uint32 // how long the fill took, µs, saturating (XFetch's δ)

	// flags holds flagNotFound and flagTagged, set before the entry is stored, and
	// flagRefreshing, set by the one read that starts a background refresh of this entry —
	// so that a hot stale key does not send every read through Cache.mu — and cleared when
	// the refresh ends without replacing the entry, so a later read may try again. Its bits
	// from stampShift up hold the entry's stamp (see Cache.GetStamped); 0 = none.
	flags atomic.Uint32
}

const (
	flagNotFound   = 1 << iota // a remembered ErrNotFound (negative caching)
	flagRefreshing             // a background refresh of this entry runs
	flagTagged                 // the entry is the head of a taggedEntry (tags.go)

	stampShift = 3
	// StampMask bounds the stamps GetStamped and GetStamping take: a stamp is kept in the
	// entry's flag word, above the flags.
	StampMask = 1<<(32-stampShift) - 1
)

// stamp sets the entry's stamp, keeping its flags.
func (e *entry[V]) stamp(stamp uint32) {
	for {
		f := e.flags.Load()
		if f>>stampShift == stamp || e.flags.CompareAndSwap(f, f&(1<<stampShift-1)|stamp<<stampShift) {
			return
		}
	}
}

func (e *entry[V]) notFound() bool { return e.flags.Load()&flagNotFound != 0 }

// startRefresh sets flagRefreshing and reports whether this call set it.
func (e *entry[V]) startRefresh() bool {
	for {
		f := e.flags.Load()
		if f&flagRefreshing != 0 {
			return false
		}
		if e.flags.CompareAndSwap(f, f|flagRefreshing) {
			return true
		}
	}
}

func (e *entry[V]) endRefresh() { e.flags.And(^uint32(flagRefreshing)) }

func (e *entry[V]) fillTime() time.Duration { return time.Duration(e.fillMicros) * time.Microsecond }

func micros(d time.Duration) uint32 {
	return uint32(min(max(d/time.Microsecond, 0), math.MaxUint32))
}

// export returns the entry as seen at now.
func (e *entry[V]) export(now int64) Entry[V] {
	x := exported(e.value, e.fresh, e.stale, e.version, e.fillMicros, now)
	x.NotFound = e.notFound()
	x.Tags, x.Born = e.tagsOf()
	return x
}

// exported is an entry of these fields as seen at now, for export and for a fill whose value
// is returned without an entry being stored.
func exported[V any](v V, fresh, stale int64, version uint64, fillMicros uint32, now int64) Entry[V] {
	return Entry[V]{
		Value:    v,
		FreshFor: remaining(fresh, now),
		StaleFor: remaining(stale, now),
		Version:  version,
		FillTime: time.Duration(fillMicros) * time.Microsecond,
	}
}

// remaining converts an instant on the clock into the duration left at now.
func remaining(until, now int64) time.Duration {
	if until == math.MaxInt64 {
		return Never
	}
	return time.Duration(until - now)
}

// deadline converts a remaining duration into an instant on the clock, saturating so that
// Never (or any duration past the clock's range) stays forever.
func deadline(now int64, d time.Duration) int64 {
	if d == Never || int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}

// entryOverhead approximates the bytes a stored entry costs beyond its key and value: the
// entry struct, the store's node and its hash-table slot. It keeps MaxBytes honest for
// small values.
const entryOverhead = 128
