package group

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/owner"
)

// Group is a named read-through cache spread over the cluster (corral.Group): the stores of
// one group on one node and the paths of a Get, a write and a lease through the cluster's
// rooms. Its methods are safe for concurrent use.
type Group[V any] struct {
	env       Env
	name      string
	load      func(ctx context.Context, key string) (V, error)               // nil with a batch loader only
	batchLoad func(ctx context.Context, keys []string) (map[string]V, error) // nil: none
	codec     Codec[V]

	local *fill.Replica[V] // keys this node owns (or serves as acting owner)
	near  *fill.Replica[V] // single flight of owner requests, and near copies of hot remote keys
	tombs *fill.Tombstones // the recent writes of keys, shared by local and near
	hot   *otter.Cache[string, *atomic.Int32]

	leases *lease.Table[V] // the leases of the keys this node owns (see Lease)

	slow slowFill // the slowest recent loader run that was traced (SlowestFill)

	remoteGets atomic.Uint64 // Gets routed to another member (near hits included)
	nearHits   atomic.Uint64 // Gets answered by a near copy
	loads      atomic.Uint64 // runs of the application's loader
	peerGets   atomic.Uint64 // Get requests served for peers (local serves them with Lookup, which counts no Get), a batch's keys each
	// batchesSent counts the batched requests sent to owners (GetMany), batchKeysSent their keys.
	batchesSent, batchKeysSent atomic.Uint64

	// Backups (backup.go): how many members keep a copy of each entry; the copies this node
	// keeps for other owners; entries given to backups, and backups taken as this node's own.
	backups               int
	backup                *fill.Replica[V] // nil without backups
	backupsSent, promoted atomic.Uint64
	owedMu                sync.Mutex
	// guards owed: keys whose entries a backup could not be given (owe)
	owed map[string]struct{}

	// Membership changes (follow.go): the goroutine that follows them, and the keys other
	// members handed to this node, for its backups.
	followKick chan struct{}      // wakes follow
	followStop context.CancelFunc // ends it
	followDone chan struct{}      // closed when it has ended
	handedMu   sync.Mutex
	// guards handedKeys
	handedKeys map[string]bool
}

// Codec turns a group's values into bytes for the wire and back (corral.Codec).
type Codec[V any] interface {
	Encode(v V) ([]byte, error)
	Decode(b []byte) (V, error)
}

// Options configure a group: corral's GroupOptions apply to them. The zero value of each
// field is its default.
type Options struct {
	TTL, Grace, NegativeTTL time.Duration
	Jitter, RefreshAhead    float64
	FillTimeout             time.Duration // 0 = fill's default
	MaxBytes                int64         // 0 = fill's default
	// BatchWindow and MaxBatch shape the batches of the group's batch loader (see
	// fill.Config); 0 = fill's defaults, a negative BatchWindow = no wait.
	BatchWindow time.Duration
	MaxBatch    int
	// Backups is how many members keep a copy of each entry beside its owner (backup.go), at
	// most MaxBackups; 0 = none.
	Backups int
}

// New returns a group called name on the node env describes, which loads keys with load, or
// with batchLoad (in batches) when that is not nil, and puts values on the wire with codec.
// The name is valid (fill.CheckName) and one of the loaders is not nil: package corral checks
// both first, and registers the group with its node.
func New[V any](env Env, name string, load func(ctx context.Context, key string) (V, error),
	batchLoad func(ctx context.Context, keys []string) (map[string]V, error), codec Codec[V], o Options) (*Group[V], error) {
	o.FillTimeout = cmp.Or(o.FillTimeout, fill.DefaultFillTimeout)
	if o.Backups < 0 || o.Backups > MaxBackups {
		return nil, fmt.Errorf("corral: %d backups: want 0 to %d", o.Backups, MaxBackups)
	}
	g := &Group[V]{env: env, name: name, load: load, batchLoad: batchLoad, codec: codec, backups: o.Backups}
	var localLoad fill.ReplicaLoadFunc[V]
	if load != nil {
		localLoad = g.fillLocal
	}
	var localBatch fill.ReplicaBatchLoadFunc[V]
	if batchLoad != nil {
		localBatch = g.fillMany
	}
	g.leases = lease.NewTable(env.leaseConfig(name), lease.Store[V](leaseStore[V]{g}))
	// A write is remembered long enough to outlast any copy on its way: a remote Get waits
	// at most the fill timeout and a peer timeout, a hand-off and a warm pull less.
	g.tombs = fill.NewTombstones(fill.TombstoneConfig{
		TTL:   max(fill.DefaultTombstoneTTL, 2*(o.FillTimeout+env.PeerTimeout)),
		Clock: env.Clock,
	})
	if err := g.startBackups(o); err != nil {
		return nil, err
	}
	var stored func(keys []string)
	if g.backups > 0 {
		stored = g.stored
	}
	var err error
	g.local, err = fill.NewReplica(localLoad, localBatch, fill.Config[V]{
		Name: name, TTL: o.TTL, Jitter: o.Jitter, Grace: o.Grace, RefreshAhead: o.RefreshAhead,
		NegativeTTL: o.NegativeTTL, FillTimeout: o.FillTimeout, MaxBytes: o.MaxBytes,
		BatchWindow: o.BatchWindow, MaxBatch: o.MaxBatch,
		Refreshes: env.Refreshes, Fills: env.Fills, Clock: env.Clock, Logger: env.Log, Rand: env.Rand,
		OnFill: func(d time.Duration, err error) { env.OnFill(name, d, trace.SpanContext{}) },
	}, fill.ReplicaConfig{
		NextVersion: env.Versions.Next, Tombstones: g.tombs, Waits: env.Waits.Hook(nil),
		Tags: env.Tags, VersionNow: env.Versions.Now, Stored: stored,
		Tracing: g.loadTracing(),
	})
	if err != nil {
		g.closeBackups(context.Background())
		return nil, err
	}
	g.near, err = fill.NewReplica(g.fetch, g.fetchMany, fill.Config[V]{
		Name: name, FillTimeout: o.FillTimeout + env.PeerTimeout, MaxBytes: max(env.NearBytes, 1),
		Clock: env.Clock, Logger: env.Log, Rand: env.Rand,
		// A GetMany's keys go to their owners at once, one request each: no window, and
		// no bound but the GetMany's own.
		BatchWindow: -1, MaxBatch: MaxManyKeys,
	}, fill.ReplicaConfig{
		BatchOnlyMany: true, // a Get asks its owner alone, on the owner's stream
		// An owner request runs on the caller's goroutine, under its ctx: no hand-off to a
		// worker and back. When that caller leaves, its request ends, and the Gets that
		// waited on it ask the owner again — which fills once whoever asks.
		InlineFill:  true,
		NextVersion: env.Versions.Next, Tombstones: g.tombs, Waits: env.Waits.Hook(env.ownerAddr),
		Tags: env.Tags, VersionNow: env.Versions.Now,
		Tracing: env.fillTracing(name, "corral.fetch"),
	})
	if err == nil {
		g.hot, err = otter.New(&otter.Options[string, *atomic.Int32]{
			MaximumSize:      10_000,
			ExpiryCalculator: otter.ExpiryWriting[string, *atomic.Int32](time.Second),
			Clock:            otterClock(env.Clock),
		})
	}
	if err != nil {
		g.local.Close(context.Background())
		if g.near != nil {
			g.near.Close(context.Background())
		}
		g.closeBackups(context.Background())
		return nil, err
	}
	g.startFollowing()
	return g, nil
}

var (
	_ owner.Group   = (*Group[string])(nil)
	_ handoff.Group = (*Group[string])(nil)
)

// Name returns the group's name.
func (g *Group[V]) Name() string { return g.name }

// Owner returns the name of the member this node's view routes key to.
func (g *Group[V]) Owner(key string) string { return g.env.ownerName(key) }

// HotKeys returns up to n keys this node holds as owner, hottest first by the store's
// policy (for a debug page; it walks the store).
func (g *Group[V]) HotKeys(n int) []string { return g.local.Hottest(n) }

// otterClock gives an otter cache the node's clock: itself when it is the coarse clock
// (whose Tick serves otter too), else the clock without ticks (entries then expire when
// touched).
func otterClock(c fill.Clock) otter.Clock {
	if cc, ok := c.(*fill.CoarseClock); ok {
		return cc
	}
	return tickless{c}
}

type tickless struct{ fill.Clock }

func (tickless) Tick(time.Duration) <-chan time.Time { return nil }
