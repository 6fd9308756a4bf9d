package ring

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Ring maps keys to the members that own them. It is immutable after New
// and safe for concurrent use; Without memoizes the rings it derives, but
// that cache is invisible to callers. A nil *Ring behaves as an empty ring.
type Ring struct {
	cfg     Config   // defaults applied
	members []string // sorted, unique, non-empty
	epoch   uint64

	// owners[p] is the member owning partition p, copied out of consistent
	// at build time so that Owner takes no lock and allocates nothing. Its
	// entries share the strings in members. nil for an empty ring.
	owners []string

	// without maps a member name to a *derived: the ring minus that member,
	// built on first request. A sync.Map rather than a mutex and a map,
	// because once warm it is only read, from every goroutine routing around
	// a dead owner, and sync.Map reads its settled keys without a lock.
	without sync.Map
}

// derived is one memoized entry of Ring.without. once makes concurrent first
// callers for the same name wait for one build instead of each building one;
// ring is written inside once and only read after it.
type derived struct {
	once sync.Once
	ring *Ring
}

// New builds the ring over members with cfg; zero fields of cfg take their
// defaults (see Config). The order of members does not matter. Names must be
// non-empty, free of NUL bytes and unique, or New returns an error wrapping
// ErrInvalidMember; a Config field out of range gives an error wrapping
// ErrInvalidConfig. An empty member list is allowed: Owner then returns "".
// New does not keep members.
func New(members []string, cfg Config) (*Ring, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sorted := slices.Clone(members)
	slices.Sort(sorted)
	for i, name := range sorted {
		switch {
		case name == "":
			return nil, fmt.Errorf("%w: empty name", ErrInvalidMember)
		case strings.IndexByte(name, 0) >= 0:
			// NUL separates names in the epoch's input; forbidding it keeps
			// that input unambiguous ({"a\x00b"} vs {"a", "b"}).
			return nil, fmt.Errorf("%w: name %q contains NUL", ErrInvalidMember, name)
		case i > 0 && name == sorted[i-1]:
			return nil, fmt.Errorf("%w: duplicate name %q", ErrInvalidMember, name)
		}
	}
	return built.get(sorted, cfg), nil
}

// built remembers the rings New built last, by epoch: building one costs about a
// millisecond, and the nodes of one process that see the same members — a test cluster, a
// simulation — or a node that sees a member set again after a flap, build the same ring.
// Rings are immutable, so sharing one changes nothing but the cost.
var built ringCache

const ringCacheSize = 64

type ringCache struct {
	mu sync.Mutex
	// guards m and order
	m     map[uint64]*Ring
	order []uint64 // oldest first
}

// get returns the ring over sorted with cfg, from the cache or newly built.
func (c *ringCache) get(sorted []string, cfg Config) *Ring {
	e := epoch(sorted, cfg)
	c.mu.Lock()
	r, ok := c.m[e]
	c.mu.Unlock()
	// The epoch is a 64-bit hash: check the members, so that a collision builds its own.
	if ok && r.cfg == cfg && slices.Equal(r.members, sorted) {
		return r
	}
	r = build(sorted, cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[uint64]*Ring, ringCacheSize)
	}
	if _, ok := c.m[e]; !ok {
		if len(c.order) >= ringCacheSize {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, e)
	}
	c.m[e] = r
	return r
}

// build makes the ring over sorted, which must be sorted, unique and valid,
// with a validated cfg. It cannot fail: consistent panics only on a nil
// hasher or a Load below 1, and withDefaults rules both out.
func build(sorted []string, cfg Config) *Ring {
	r := &Ring{
		cfg:     cfg,
		members: sorted,
		epoch:   epoch(sorted, cfg),
	}
	if len(sorted) == 0 {
		return r
	}
	// Members go in sorted, so even a collision of two virtual-node hashes
	// (consistent keeps whichever member was added last) resolves alike on
	// every replica. Short of that, consistent's assignment depends only on
	// the set, not on the order members were added.
	ms := make([]consistent.Member, len(sorted))
	for i, name := range sorted {
		ms[i] = member(name)
	}
	c := consistent.New(ms, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
	})
	// The owners are our member values, whose String returns the name
	// itself, so the table shares the strings in sorted rather than holding
	// a copy of a name per partition.
	r.owners = make([]string, cfg.PartitionCount)
	for p := range r.owners {
		r.owners[p] = c.GetPartitionOwner(p).String()
	}
	return r
}

// Owner returns the member that owns key, or "" if the ring is empty. It is
// what consistent's LocateKey would return for the same members and config:
// the key's partition is xxhash64(key) mod PartitionCount, exactly as
// LocateKey computes it, and the partition's owner comes from the table
// built by New. It takes no lock and allocates nothing.
func (r *Ring) Owner(key string) string {
	if r == nil || len(r.owners) == 0 {
		return ""
	}
	return r.owners[xxhash.Sum64String(key)%uint64(len(r.owners))]
}

// Members returns the member names, sorted. The slice is a copy, and
// non-nil even for an empty ring.
func (r *Ring) Members() []string {
	out := make([]string, r.Len())
	if r != nil {
		copy(out, r.members)
	}
	return out
}

// Len returns the number of members.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.members)
}

// Contains reports whether name is a member.
func (r *Ring) Contains(name string) bool {
	_, ok := r.index(name)
	return ok
}

// index returns the position of name in r.members.
func (r *Ring) index(name string) (int, bool) {
	if r == nil {
		return 0, false
	}
	return slices.BinarySearch(r.members, name)
}

// Config returns the config the ring was built with, defaults applied.
func (r *Ring) Config() Config {
	if r == nil {
		return DefaultConfig()
	}
	return r.cfg
}

// member adapts a name to consistent.Member.
type member string

func (m member) String() string { return string(m) }

// hasher is xxhash64, the function Owner uses to pick a key's partition; it
// must be the one consistent uses too, or Owner and LocateKey would part.
type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }
