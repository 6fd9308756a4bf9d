package fill

import (
	"context"
	"slices"
	"time"
)

// Replica is a Cache kept as one copy of a cache spread over processes, as a corral node keeps
// each of its groups. For use on its own, Cache is all there is; a Replica adds what keeps
// copies in different processes consistent:
//
//   - writes at versions drawn from a clock the processes share (SetAt, SetFor, RemoveAt), and
//     writes made elsewhere applied here (Invalidate), remembered for a while as tombstones
//     (Tombstones) so that no older copy is stored after them;
//   - entries copied in and out with their remaining lifetime, version and tags (Put, PeekAny,
//     All, a loader's Copy), never as wall-clock instants;
//   - a hit stamped with the generation under which the key was found owned here
//     (GetStamped), so that a hit skips the owner lookup until ownership may have changed;
//   - lookups on behalf of another process that do not count as this one's Gets (Lookup,
//     LookupHeld), and questions about fills in flight (Filling, AwaitFill).
//
// Its Cache's methods work as on a Cache of its own.
type Replica[V any] struct{ *Cache[V] }

// ReplicaConfig is what a Replica shares with the other replicas of its process, and how it
// orders its writes with those of other processes. The zero value is a replica that shares
// nothing and orders its own writes only.
type ReplicaConfig struct {
	// Stored, if set, is given the keys a fill (or a batch's fill) stored, before any of the
	// fill's callers is woken: corral gives their entries (PeekAny) to a group's backups then,
	// so that a value any caller saw is held by them too. It runs on the fill's goroutine and
	// may block it. nil = nothing is told.
	Stored func(keys []string)
	// BatchOnlyMany, for a replica with both loaders, keeps the batch loader for GetMany,
	// GetEntries and GetEach: a Get's miss and a refresh use the per-key loader (corral's near cache: a
	// Get asks its owner on the owner's stream, a GetMany each owner for all its keys).
	BatchOnlyMany bool
	// InlineFill runs a fill on the goroutine of the Get that starts it, instead of a worker
	// (workers.go), under that Get's ctx: it saves the hand-off to the worker and back. When
	// that ctx ends, the loader's ends too, and if the fill then fails it is abandoned:
	// nothing is stored, the Get gets ctx.Err(), and the Gets that waited on it start over,
	// one of them filling again. So a Get still leaves when its ctx ends, but a fill may run
	// more than once for one miss: set it only for a loader whose repeat is cheap and
	// harmless (corral's near cache: its loader asks the key's owner, which fills once).
	// The loader must return once its ctx ends (at the fill timeout, if not before): no
	// timer ends an inline fill for it, and the Gets waiting on the fill wait that long.
	// Off by default.
	InlineFill bool
	// NextVersion returns the version of a write (Set, Remove): larger than every version
	// handed out or seen before, so that writes are ordered. It must be safe for concurrent
	// use. nil = a counter of this cache's own, which orders this cache's writes only; the
	// root package passes its node's version clock, which orders writes across nodes.
	NextVersion func() uint64
	// Tombstones remembers recent writes (see Tombstones); share one between caches that
	// must refuse the same old copies. nil = a Tombstones of this cache's own, on its clock.
	Tombstones *Tombstones
	// Waits, if set, is told of every wait of a Get made from inside a fill on a fill of
	// this cache, so that fill cycles through other caches and nodes are seen (see
	// WaitHook). nil = only cycles within one chain are seen.
	Waits WaitHook
	// Tags is the registry of tags and their purges (see Tags); share one between caches
	// that RemoveByTag must reach together. nil = a registry of this cache's own, with the
	// default purge TTL, on the cache's clock.
	Tags *Tags
	// VersionNow returns the version clock's reading — the largest version handed out or
	// seen — which a fill records as its value's born version when it starts (see Tags). It
	// must be safe for concurrent use and never go back. nil = NextVersion (a new version is
	// above every one seen, too), or when that is nil as well, this cache's own counter.
	VersionNow func() uint64
	// Tracing, if set, makes every fill a span with links to the Gets coalesced onto it
	// (see Tracing). nil = no spans, and nothing is recorded of the Gets that join a fill.
	Tracing *Tracing
}

// ReplicaLoadFunc loads a key for a Replica: as a LoadFunc does, or by taking a copy another
// replica holds, which it describes with a non-nil *Copy.
type ReplicaLoadFunc[V any] func(ctx context.Context, key string) (V, *Copy, error)

// Copy describes a value a ReplicaLoadFunc took from elsewhere (another process's replica)
// rather than loading it from the source of truth. The fill stores it with the copy's
// remaining lifetime instead of the cache's TTL, jitter and grace, and only if no write of
// the key newer than Version is known here; a copy with no remaining lifetime is returned to
// the fill's callers and not stored. With ErrNotFound it is a remembered not-found, kept for
// FreshFor.
type Copy struct {
	// FreshFor is how long the value stays fresh (≤ 0: it is stale already), and StaleFor
	// how long it may still be served, both from now, as in Entry.
	FreshFor, StaleFor time.Duration
	Version            uint64   // the latest write the value reflects
	Tags               []string // its tags
	Born               uint64   // the version clock's reading where it was made (Entry.Born), for purges of its tags
}

// NewReplica returns a Replica that fills missing keys with load, or in batches with
// batchLoad when it is not nil (it stands for cfg.BatchLoad); cfg is as for New.
func NewReplica[V any](load ReplicaLoadFunc[V], batchLoad ReplicaBatchLoadFunc[V], cfg Config[V], rc ReplicaConfig) (*Replica[V], error) {
	c, err := newCache(load, batchLoad, cfg, rc)
	if err != nil {
		return nil, err
	}
	return &Replica[V]{c}, nil
}

// take makes x, the choices of a fill whose loader returned cp, those of a copy.
func (x *choice) take(cp *Copy) {
	fresh := max(cp.FreshFor, 0)
	x.set, x.fresh, x.stale = true, fresh, max(cp.StaleFor-fresh, 0)
	x.copied, x.version = true, cp.Version
	if len(cp.Tags) > 0 {
		x.bornSet, x.born = true, cp.Born
		for _, t := range cp.Tags {
			if !slices.Contains(x.tags, t) {
				x.tags = append(x.tags, t)
			}
		}
	}
}
