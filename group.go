package corral

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/group"
	"github.com/corralcache/corral/internal/tracing"
)

// LoadFunc loads the value of a key from the source of truth. It runs on the key's owner
// only, under the fill's own context: the caller's values, the fill chain and the fill
// timeout. It may return ErrNotFound. A loader that calls Get must pass the ctx it was given,
// so fill cycles are seen.
type LoadFunc[V any] func(ctx context.Context, key string) (V, error)

// Group is a named read-through cache spread over the cluster. Every replica registers the
// group under the same name with the same loader; each key is filled only on its owner.
// Its methods are safe for concurrent use.
type Group[V any] struct {
	g  *group.Group[V]
	tr *tracing.Tracer // the node's; nil: it does not trace
}

// NewGroup registers a group on n. name must be [a-zA-Z0-9_.-]{1,64} and not registered on n
// yet; load must not be nil, unless the group has a batch loader (WithBatchLoad).
func NewGroup[V any](n *Node, name string, load LoadFunc[V], opts ...GroupOption) (*Group[V], error) {
	if n == nil {
		return nil, errors.New("corral: NewGroup: nil node")
	}
	if err := fill.CheckName(name); err != nil {
		return nil, err
	}
	var o groupOptions
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.apply(&o); err != nil {
			return nil, err
		}
	}
	var batch BatchLoadFunc[V]
	if o.batchLoad != nil {
		b, ok := o.batchLoad.(BatchLoadFunc[V])
		if !ok {
			return nil, fmt.Errorf("corral: NewGroup(%q): WithBatchLoad's loader does not load %T", name, *new(V))
		}
		batch = b
	}
	if load == nil && batch == nil {
		return nil, fmt.Errorf("corral: NewGroup(%q): nil loader", name)
	}
	codec := defaultCodec[V]()
	if o.codec != nil {
		c, ok := o.codec.(Codec[V])
		if !ok {
			return nil, fmt.Errorf("corral: NewGroup(%q): codec %T does not encode %T", name, o.codec, *new(V))
		}
		codec = c
	}
	if _, dup := n.groups.get(name); dup {
		return nil, fmt.Errorf("corral: group %q is already registered on this node", name)
	}
	g, err := group.New(n.env, name, load, batch, codec, o.Options)
	if err != nil {
		return nil, err
	}
	if err := n.groups.register(name, g); err != nil {
		g.Close(context.Background())
		return nil, err
	}
	return &Group[V]{g: g, tr: n.tracer}, nil
}

// Name returns the group's name.
func (g *Group[V]) Name() string { return g.g.Name() }

// HotKeys returns up to n keys this node holds as owner, hottest first by the store's
// policy (for a debug page; it walks the store).
func (g *Group[V]) HotKeys(n int) []string { return g.g.HotKeys(n) }

// Get returns the value of key: from this node's store when it owns the key (filling it once
// for all concurrent callers when missing or expired), from a near copy, or from the owner
// on the peer port, with one owner request for all concurrent callers on this node.
//
// Errors: *LimitError for a bad key; ErrFillCycle for a loader that asks for its own fill;
// ctx.Err() alone when ctx ends first; *FillError when the fill failed (here or on the
// owner); ErrClosed after Close.
func (g *Group[V]) Get(ctx context.Context, key string) (V, error) {
	if g.tr != nil {
		v, _, err := g.getTraced(ctx, "corral.Get", key)
		return v, publicErr(err)
	}
	if v, ok := g.g.Hit(ctx, key); ok {
		return v, nil
	}
	v, err := g.g.Miss(ctx, key)
	if err != nil {
		return v, publicErr(err)
	}
	return v, nil
}

// GetIfPresent returns the value of key when this node can answer a Get of it at once, as the
// key's owner, from a fresh value in its store (Get's local hit), and false otherwise: a miss,
// a stale value, a key owned elsewhere (a near copy included), a bad key, a draining node. It
// never fills, refreshes in place, waits or asks a peer, and records no span: it is for code
// that must not block — an event loop that answers what it can and hands the rest to Get.
// A refresh ahead of expiry (WithRefreshAhead) still starts in the background, as for Get.
func (g *Group[V]) GetIfPresent(ctx context.Context, key string) (V, bool) {
	return g.g.Present(ctx, key)
}

// GetIfPresentWithInfo is GetIfPresent that also says what GetWithInfo would of the value:
// its Source (SourceHit) and its tags.
func (g *Group[V]) GetIfPresentWithInfo(ctx context.Context, key string) (V, EntryInfo, bool) {
	v, tags, ok := g.g.PresentTags(ctx, key)
	if !ok {
		return v, EntryInfo{}, false
	}
	return v, EntryInfo{Source: SourceHit, Tags: tags}, true
}

// GetIfHeld is GetIfPresentWithInfo that also answers from a near copy: for a key another
// member owns, the value of a fresh near copy this node holds (Source SourceNear), as
// GetWithInfo would answer it. It is what an event loop can answer at once from this node's
// memory, as owner or near cache; like GetIfPresent it never fills, refreshes in place,
// waits or asks a peer, and records no span, and it is false for anything else (a stale
// near copy included: Get serves it and starts its refresh).
func (g *Group[V]) GetIfHeld(ctx context.Context, key string) (V, EntryInfo, bool) {
	v, tags, near, ok := g.g.PresentHeld(ctx, key)
	switch {
	case !ok:
		return v, EntryInfo{}, false
	case near:
		return v, EntryInfo{Source: SourceNear, Tags: tags}, true
	}
	return v, EntryInfo{Source: SourceHit, Tags: tags}, true
}

// Source says how a Get was answered.
type Source string

const (
	SourceHit       Source = "hit"       // a fresh value this node holds as owner
	SourceFill      Source = "fill"      // this Get ran the loader
	SourceCoalesced Source = "coalesced" // this Get waited on a fill or owner request in flight
	SourceStale     Source = "stale"     // a stale value within grace; a refresh runs on the owner
	SourceNear      Source = "near"      // a near copy of a key owned elsewhere
	SourcePeer      Source = "peer"      // this Get asked the owner
)

// GetWithSource is Get that also says how the value was found (the daemon's X-Corral-Source).
func (g *Group[V]) GetWithSource(ctx context.Context, key string) (V, Source, error) {
	v, info, err := g.getWithInfo(ctx, key)
	if err != nil {
		return v, "", publicErr(err)
	}
	return v, sourceOf(info), nil
}

// Set writes v through key's owner, under the owner's TTL, and drops every near copy of the
// key in the cluster. A fill of key in flight on the owner does not store its older result.
// If some member could not be told to drop its copy, Set returns an *UnreachedError naming
// them (the write itself stands).
func (g *Group[V]) Set(ctx context.Context, key string, v V) (err error) {
	if g.tr != nil {
		var span trace.Span
		ctx, span = g.tr.Start(ctx, "corral.Set", g.g.Name(), key)
		defer func() { tracing.End(span, err) }()
	}
	return publicErr(g.g.Set(ctx, key, v))
}

// Remove deletes key on its owner and drops every near copy of it in the cluster before it
// returns nil. A fill of key in flight on the owner does not store its result. If some member
// could not be told, Remove returns an *UnreachedError naming them (the owner's delete
// stands).
func (g *Group[V]) Remove(ctx context.Context, key string) (err error) {
	if g.tr != nil {
		var span trace.Span
		ctx, span = g.tr.Start(ctx, "corral.Remove", g.g.Name(), key)
		defer func() { tracing.End(span, err) }()
	}
	return publicErr(g.g.Remove(ctx, key))
}

// Backups returns the members that keep the backups of key in this node's view, in order
// (see WithBackups); none without backups.
func (g *Group[V]) Backups(key string) []Member { return members(g.g.BackupsOf(key)) }

// KeepsBackup reports whether this node keeps a backup of key (see WithBackups): a copy its
// owner gave it, which it would serve as its own, filling nothing, if the owner were gone.
func (g *Group[V]) KeepsBackup(key string) bool { return g.g.KeepsBackup(key) }

// Stats returns this group's counters on this node.
func (g *Group[V]) Stats() GroupStats { return statsOf(g.g.Stats()) }

// sourceOf says how the Get that found info was answered.
func sourceOf(info group.Info) Source {
	if info.Remote {
		switch info.How {
		case fill.SourceHit:
			return SourceNear
		case fill.SourceCoalesced:
			return SourceCoalesced
		}
		return SourcePeer // the near cache's fill (stale at once when it keeps no copy) asked the owner
	}
	switch info.How {
	case fill.SourceFill:
		return SourceFill
	case fill.SourceCoalesced:
		return SourceCoalesced
	case fill.SourceStale:
		return SourceStale
	}
	return SourceHit
}
