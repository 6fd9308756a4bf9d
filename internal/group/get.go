package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/tracing"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport/peerpb"
)

// Get returns the value of key: from this node's store when it owns the key (filling it once
// for all concurrent callers when missing or expired), from a near copy, or from the owner
// over gRPC, with one owner request for all concurrent callers on this node.
//
// Errors: *limit.Error for a bad key; fill.ErrFillCycle for a loader that asks for its own
// fill; ctx.Err() alone when ctx ends first; *FillError when the fill failed (here or on the
// owner); view.ErrClosed after Close.
func (g *Group[V]) Get(ctx context.Context, key string) (V, error) {
	if val, ok := g.Hit(ctx, key); ok {
		return val, nil
	}
	return g.Miss(ctx, key)
}

// Hit returns the value of key when this node holds it as the owner its current view found
// it owned under: the local hit, one store lookup. It is a function of its own, apart from
// Miss, so that package corral's Get pays a two-line frame for a hit, not Get's whole one:
// a hit costs what it cost when Get was package corral's.
func (g *Group[V]) Hit(ctx context.Context, key string) (V, bool) {
	// A key found owned here under this view is stamped with it: its hits skip the owner
	// lookup (xxhash and a search of the ring, a third of a hit's time) until the view
	// changes.
	return g.local.GetStamped(ctx, key, g.env.View.Load().Stamp)
}

// Present is Hit for any fresh value this node holds as the key's owner under its current
// view, stamped or not yet (a value a fill stored is stamped here, as by Miss): it returns
// false, having done nothing, for anything Get would have to fill, refresh, wait for or ask a
// peer for.
func (g *Group[V]) Present(ctx context.Context, key string) (V, bool) {
	if val, ok := g.Hit(ctx, key); ok {
		return val, true
	}
	v := g.env.View.Load()
	if v.Stopped || v.Owner(key) != v.Self {
		var zero V
		return zero, false
	}
	return g.local.HitStamping(ctx, key, v.Stamp)
}

// PresentTags is Present that also returns the value's tags (nil: none).
func (g *Group[V]) PresentTags(ctx context.Context, key string) (V, []string, bool) {
	val, tags, _, ok := g.present(ctx, key, false)
	return val, tags, ok
}

// PresentHeld is PresentTags that also answers, for a key another member owns under this
// node's view, from a fresh near copy held here, as GetWithInfo would (Info.How SourceHit,
// Remote: near is set) and counted as it counts one; false, having done nothing, for
// anything else.
func (g *Group[V]) PresentHeld(ctx context.Context, key string) (val V, tags []string, near, ok bool) {
	return g.present(ctx, key, true)
}

// present is PresentTags, and with near PresentHeld.
func (g *Group[V]) present(ctx context.Context, key string, near bool) (val V, tags []string, fromNear, ok bool) {
	v := g.env.View.Load()
	if val, tags, ok := g.local.GetStampedTags(ctx, key, v.Stamp); ok {
		return val, tags, false, true
	}
	if v.Stopped {
		return val, nil, false, false
	}
	if v.Owner(key) == v.Self {
		val, tags, ok = g.local.HitStampingTags(ctx, key, v.Stamp)
		return val, tags, false, ok
	}
	// As getRemote, which a Get of the key would run: a key past the limits is its error's.
	if !near || g.near == nil || g.env.Limits.Key(key) != nil {
		return val, nil, false, false
	}
	if val, tags, ok = g.near.GetFresh(ctx, key); ok {
		g.remoteGets.Add(1)
		g.nearHits.Add(1)
	}
	return val, tags, ok, ok
}

// Miss is Get of a key that is no local hit (see Hit).
func (g *Group[V]) Miss(ctx context.Context, key string) (V, error) {
	v := g.env.View.Load()
	if v.Stopped {
		val, _, err := g.getStopped(ctx, key)
		return val, err
	}
	if v.Owner(key) == v.Self {
		val, err := g.local.GetStamping(ctx, key, v.Stamp)
		if err != nil {
			return val, g.wrapErr(key, err)
		}
		return val, nil
	}
	val, _, err := g.getRemote(ctx, key)
	return val, err
}

// Info is what GetWithInfo and Peek say of a value besides the value itself.
type Info struct {
	// How is how the store that answered found the value: the local store's, or with
	// Remote the near cache's, whose fill is a request to the key's owner (SourceHit: a near
	// copy; SourceCoalesced: another Get's request; else this Get asked the owner). For Peek,
	// SourceHit or SourceStale.
	How    fill.Source
	Remote bool
	Tags   []string // the value's tags (RemoveByTag)
	// FreshFor and StaleFor are, for Peek, how long the value stays fresh (≤ 0 once stale)
	// and may still be served, as its owner sees it.
	FreshFor, StaleFor time.Duration
}

// GetWithInfo is Get that also says how the value was found and what tags it carries.
func (g *Group[V]) GetWithInfo(ctx context.Context, key string) (V, Info, error) {
	v := g.env.View.Load()
	if v.Stopped {
		return g.getStopped(ctx, key)
	}
	if v.Owner(key) == v.Self {
		e, src, err := g.local.GetEntry(ctx, key)
		if err != nil {
			return e.Value, Info{}, g.wrapErr(key, err)
		}
		return e.Value, Info{How: src, Tags: e.Tags}, nil
	}
	return g.getRemote(ctx, key)
}

// Peek returns what key's owner holds of key — fresh, or stale within its grace — without
// filling it or refreshing it: the value, its tags and its remaining lifetime. Errors:
// fill.ErrNotFound when the owner holds nothing servable (or a remembered not-found), and
// Get's others.
func (g *Group[V]) Peek(ctx context.Context, key string) (V, Info, error) {
	var zero V
	if err := g.env.Limits.Key(key); err != nil {
		return zero, Info{}, err
	}
	var e fill.Entry[V]
	var found bool
	_, err := g.env.Router.OnOwner(ctx, key, false,
		func() error { e, found = g.local.PeekAny(key); return nil },
		func(ctx context.Context, st *view.MemberState) error {
			resp, err := g.env.Client.Get(ctx, st.PeerAddr, &peerpb.GetRequest{
				Header: g.env.Router.Header(ctx), Group: g.name, Key: []byte(key), Peek: true,
			})
			if err != nil || !resp.GetFound() {
				return err
			}
			if err := version.Check(resp.GetEntry().GetVersion()); err != nil {
				return err
			}
			e, err = g.decodeEntry(resp.GetEntry())
			found = err == nil
			return err
		})
	if err != nil {
		return zero, Info{}, g.wrapErr(key, route.FromWire(err))
	}
	if !found || e.NotFound {
		return zero, Info{}, fill.ErrNotFound
	}
	src := fill.SourceHit
	if e.FreshFor <= 0 {
		src = fill.SourceStale
	}
	return e.Value, Info{How: src, Tags: e.Tags, FreshFor: e.FreshFor, StaleFor: e.StaleFor}, nil
}

func (g *Group[V]) getRemote(ctx context.Context, key string) (V, Info, error) {
	var zero V
	if err := g.env.Limits.Key(key); err != nil {
		return zero, Info{}, err
	}
	g.remoteGets.Add(1)
	e, src, err := g.near.GetEntry(ctx, key)
	if err != nil {
		return zero, Info{}, g.wrapErr(key, g.blamePeers(ctx, key, err))
	}
	if src == fill.SourceHit {
		g.nearHits.Add(1)
	}
	return e.Value, Info{How: src, Remote: true, Tags: e.Tags}, nil
}

// getStopped is Get on a node that serves nothing from its stores any more (view.View.Stopped):
// while it drains, no write reaches its copies, so it asks the key's owner among the other
// members, as a client would; once closed, it answers ErrClosed.
func (g *Group[V]) getStopped(ctx context.Context, key string) (V, Info, error) {
	var val V
	if g.env.State.Closed.Load() {
		return val, Info{}, view.ErrClosed
	}
	if err := g.env.Limits.Key(key); err != nil {
		return val, Info{}, err
	}
	var cp *fill.Copy
	_, err := g.env.Router.OnOwner(ctx, key, true, func() error { return view.ErrClosed },
		func(ctx context.Context, st *view.MemberState) error {
			var err error
			val, cp, err = g.askOwner(ctx, st, key)
			return err
		})
	if err != nil {
		return val, Info{}, g.wrapErr(key, route.FromWire(err))
	}
	return val, Info{How: fill.SourceFill, Remote: true, Tags: cp.Tags}, nil
}

// blamePeers says where the time went when the request to key's owner — the near cache's
// fill — ran past its bound: to peers that did not answer, not to a loader. (A loader that
// ran past the fill timeout on the owner comes back as the owner's answer, and stays so.)
func (g *Group[V]) blamePeers(ctx context.Context, key string, err error) error {
	if err == nil {
		return nil // before the targets of errors.As below, which escape: a batch's keys pay none
	}
	var fe *fill.FillError
	var te *fill.TimeoutError
	if !errors.As(err, &fe) {
		return err
	}
	// The near cache's fill timed out (its timer), or its request ran out of the same time
	// first (its ctx) while the caller's own ctx had not.
	if !errors.As(fe.Err, &te) && !(errors.Is(fe.Err, context.DeadlineExceeded) && ctx.Err() == nil) {
		return err
	}
	bound := g.near.FillTimeout()
	owner := g.env.ownerName(key)
	return &fill.FillError{Name: fe.Name, Key: fe.Key, Shared: fe.Shared,
		Err: fmt.Errorf("%w: asked %s (the key's owner) and the members it failed over to for %v (the fill timeout %v and the peer timeout %v)",
			ErrPeerTimeout, owner, bound, bound-g.env.PeerTimeout, g.env.PeerTimeout)}
}

// ErrPeerTimeout is the Err of a *fill.FillError when a Get asked the key's owner (and the
// members it failed over to) and got no answer within the group's fill timeout plus the
// peer timeout: the time went to peers, not to the loader (corral.ErrPeerTimeout).
var ErrPeerTimeout = errors.New("corral: no answer from the key's owner in time")

// wrapErr turns the fill engine's and the peers' errors into the group's: a *fill.FillError
// named for the group for a fill that failed, here or on the owner (whose Err is then a
// *route.RemoteError); a counted *limit.Error for a bad key; view.ErrClosed when this node
// is closing.
func (g *Group[V]) wrapErr(key string, err error) error {
	if err == nil {
		return nil // before the targets of errors.As below, which escape: a batch's keys pay none
	}
	if errors.Is(err, view.ErrClosed) || errors.Is(err, fill.ErrClosed) {
		return view.ErrClosed // this node is closing: not a failure of the fill
	}
	var fe *fill.FillError
	if !errors.As(err, &fe) {
		var ke *fill.KeyError
		if errors.As(err, &ke) {
			return g.env.Limits.Key(key)
		}
		return err
	}
	out := &fill.FillError{Name: g.name, Key: key, Err: fe.Err, Shared: fe.Shared}
	// A remote fetch that failed over to a local fill returns the local fill's FillError.
	var inner *fill.FillError
	if errors.As(out.Err, &inner) {
		out.Err, out.Shared = inner.Err, out.Shared || inner.Shared
	}
	return out
}

// fillLocal is the local store's loader. For a while after a membership change made this
// node the owner of a key it does not hold, it first looks for the copy another member still
// holds (a warm pull), so a join, a leave or a scale-up does not cost a wave of fills.
//
// A copy that is stale within its grace there is taken as it is — served stale here, with
// its one refresh started (fill refreshes a stale copy it takes) — and so is a remembered
// not-found, for the rest of its time: a move must not turn a value the cluster may still
// serve into a miss that the source cannot answer. A refresh loads from the source.
func (g *Group[V]) fillLocal(ctx context.Context, key string) (V, *fill.Copy, error) {
	if !fill.IsRefresh(ctx) {
		// A backup this node keeps of the key, from when another member owned it: the
		// owner crashed, and this node, its successor, takes over its value.
		if e, ok := g.fromBackup(key); ok {
			tracing.Event(ctx, "corral.backup_taken")
			cp := copyOf(e)
			if e.NotFound {
				return e.Value, cp, fill.ErrNotFound
			}
			return e.Value, cp, nil
		}
		if e, ok := handoff.Pull(ctx, g.env.Mover, g.name, key, g.tombs.Floor, g.decodeEntry); ok {
			return g.pulled(ctx, e)
		}
	}
	// From here on the fill waits for no other member: a member's warm pull may wait for it
	// (see handoff.Pull) — unless a member with a greater name asked for the key while this
	// fill looked for a copy: it was told nothing and loads, and this fill takes its value
	// (see ServeGet).
	if member := fill.LoadingUnlessAsked(ctx); member != "" {
		if e, ok := handoff.Await(ctx, g.env.Mover, g.name, key, member, g.tombs.Floor, g.decodeEntry); ok {
			return g.pulled(ctx, e)
		}
		fill.Loading(ctx)
	}
	g.loads.Add(1)
	v, err := g.load(ctx, key)
	return v, nil, err
}

// pulled is fillLocal's result for e, a copy another member held (a warm pull's).
func (g *Group[V]) pulled(ctx context.Context, e fill.Entry[V]) (V, *fill.Copy, error) {
	tracing.Event(ctx, "corral.warm_pull")
	g.env.Received()
	cp := copyOf(e)
	if e.NotFound {
		return e.Value, cp, fill.ErrNotFound
	}
	return e.Value, cp, nil
}

// copyOf describes e, an entry copied from another member, to the fill that takes it: its
// remaining lifetime, version, tags and born version, so that a write or a purge newer than
// the copy is not undone here.
func copyOf[V any](e fill.Entry[V]) *fill.Copy {
	return &fill.Copy{FreshFor: e.FreshFor, StaleFor: e.StaleFor, Version: e.Version, Tags: e.Tags, Born: e.Born}
}
