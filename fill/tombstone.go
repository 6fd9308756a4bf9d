package fill

import (
	"iter"
	"sync"
	"sync/atomic"
	"time"
)

// Tombstones remembers the recent writes (Set, Remove and the writes of other nodes that
// Invalidate reports) of each key, so that a copy of a value older than a write is never
// stored after the write: a hand-off, a warm pull or a near copy that was on its way when
// the write landed. A copy is older than a write when its version is below the write's
// (see Entry.Version).
//
// A write is remembered for TTL, which must exceed the longest time a copy can be on its
// way (every peer request has a deadline far below it); copies that take longer are not
// checked. When the remembered writes outweigh MaxBytes, the oldest are forgotten early but
// folded into a per-bucket floor, so that the check stays safe: a copy below the floor of
// its key's bucket is refused too, at worst costing a refill, never a stale value.
//
// One Tombstones can be shared by several caches (a group's store and its near cache) through
// Config.Tombstones. It is safe for concurrent use; the zero value is not usable: create it
// with NewTombstones.
type Tombstones struct {
	ttl      int64 // nanoseconds
	maxBytes int64
	clock    Clock

	// live is len(byKey), for Version to answer a key without the lock while no write is
	// remembered (a cache that is only read); written under mu.
	live atomic.Int64

	mu sync.Mutex
	// guards everything below
	byKey  map[string]tomb
	queue  []queued // in order of expiry (records are made in clock order)
	head   int      // queue[head:] is live
	bytes  int64
	floors [tombFloorBuckets]uint64
}

// TombstoneConfig configures NewTombstones. Zero fields take their defaults.
type TombstoneConfig struct {
	// TTL is how long a write is remembered. 0 = DefaultTombstoneTTL.
	TTL time.Duration
	// MaxBytes bounds the memory of the remembered writes: each costs its key and about 64
	// bytes (and 32 more for each write of a key remembered at once). 0 = DefaultTombstoneBytes.
	MaxBytes int64
	// Clock is the time source. nil = the monotonic clock of time.Now.
	Clock Clock
}

const (
	// DefaultTombstoneTTL is how long a write is remembered by default: well above any
	// peer request's deadline (a remote Get waits at most a fill timeout plus a peer
	// timeout, 35 s by default) and above a drain window.
	DefaultTombstoneTTL = 5 * time.Minute
	// DefaultTombstoneBytes bounds the remembered writes of one Tombstones by default: about
	// 50 000 writes of 20-byte keys.
	DefaultTombstoneBytes = 4 << 20

	tombOverhead     = 64 // the map entry
	queuedOverhead   = 32 // one record in the queue
	tombFloorBuckets = 4096
)

type tomb struct {
	version uint64
	expires int64
}

type queued struct {
	key     string
	expires int64
}

// NewTombstones returns an empty Tombstones.
func NewTombstones(cfg TombstoneConfig) *Tombstones {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTombstoneTTL
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultTombstoneBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = NewSystemClock()
	}
	return &Tombstones{ttl: int64(cfg.TTL), maxBytes: cfg.MaxBytes, clock: cfg.Clock, byKey: make(map[string]tomb)}
}

// Record remembers a write of key at version for TTL from now. A key remembers its largest
// version. A write recorded again at that very version within TTL/1024 of its last record
// is not queued again (it is remembered at least TTL − TTL/1024 from now): a write applied
// here is recorded by the store that applied it, and again at once by each cache of the
// group that the writer then tells — three records a Set that made the queue three times as
// long. One recorded again later, from a member that learned of it late, is remembered for
// TTL from then: copies older than it may still be on their way from that member.
func (t *Tombstones) Record(key string, version uint64) {
	if version == 0 {
		return
	}
	now := t.clock.NowNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	expires := now + t.ttl
	if old, ok := t.byKey[key]; ok && old.version == version && old.expires >= expires-t.ttl/1024 {
		return
	} else if ok {
		t.byKey[key] = tomb{version: max(old.version, version), expires: expires}
	} else {
		t.byKey[key] = tomb{version: version, expires: expires}
		t.live.Store(int64(len(t.byKey)))
		t.bytes += int64(len(key)) + tombOverhead
	}
	t.queue = append(t.queue, queued{key: key, expires: expires})
	t.bytes += queuedOverhead
	for t.bytes > t.maxBytes && t.head < len(t.queue) {
		t.popLocked(true)
	}
}

// Version returns the largest remembered write version of key, or 0.
func (t *Tombstones) Version(key string) uint64 {
	if t.live.Load() == 0 {
		return 0
	}
	now := t.clock.NowNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if tb, ok := t.byKey[key]; ok && tb.expires > now {
		return tb.version
	}
	return 0
}

// Floor returns the version a copy of key must reach to be stored: the largest remembered
// write of key, or of a forgotten one of its bucket.
func (t *Tombstones) Floor(key string) uint64 {
	v := t.Version(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(v, t.floors[floorBucket(key)])
}

// All yields every remembered write, key and version, in no particular order (to hand them
// to another member that may have missed them). Writes recorded while it runs may or may
// not be seen.
func (t *Tombstones) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		now := t.clock.NowNano()
		t.mu.Lock()
		type kv struct {
			k string
			v uint64
		}
		live := make([]kv, 0, len(t.byKey))
		for k, tb := range t.byKey {
			if tb.expires > now {
				live = append(live, kv{k, tb.version})
			}
		}
		t.mu.Unlock()
		for _, e := range live {
			if !yield(e.k, e.v) {
				return
			}
		}
	}
}

// Len returns the number of remembered writes.
func (t *Tombstones) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byKey)
}

// expireLocked forgets the writes whose time is up.
func (t *Tombstones) expireLocked(now int64) {
	for t.head < len(t.queue) && t.queue[t.head].expires <= now {
		t.popLocked(false)
	}
}

// popLocked drops the oldest queue record, and with it the key's write when the record is
// the key's latest; fold puts the forgotten version into the bucket's floor.
func (t *Tombstones) popLocked(fold bool) {
	q := t.queue[t.head]
	t.queue[t.head] = queued{}
	t.head++
	t.bytes -= queuedOverhead
	if tb, ok := t.byKey[q.key]; ok && tb.expires == q.expires {
		delete(t.byKey, q.key)
		t.live.Store(int64(len(t.byKey)))
		t.bytes -= int64(len(q.key)) + tombOverhead
		if fold {
			b := floorBucket(q.key)
			t.floors[b] = max(t.floors[b], tb.version)
		}
	}
	// Reuse the backing array once most of it is dead.
	if t.head > 1024 && t.head > len(t.queue)/2 {
		n := copy(t.queue, t.queue[t.head:])
		clear(t.queue[n:])
		t.queue, t.head = t.queue[:n], 0
	}
	if t.head == len(t.queue) {
		t.queue, t.head = t.queue[:0], 0
	}
}

// floorBucket hashes key with FNV-1a: deterministic, so a seeded simulation replays.
func floorBucket(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % tombFloorBuckets)
}
