package group

import (
	"context"
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport/peerpb"
)

// fetch is the near cache's loader: one owner request for all concurrent Gets of a remote
// key on this node. Its ctx carries the near cache's own link in the fill chain, which is not
// a fill of the key (the owner's is), so it is dropped before the chain goes out.
func (g *Group[V]) fetch(ctx context.Context, key string) (V, *fill.Copy, error) {
	var val V
	var cp *fill.Copy
	_, err := g.env.Router.OnOwner(ctx, key, true,
		func() error {
			// Acting owner after a failover (or the view changed under us): fill here; the
			// value lives in the local store, so keep no near copy (no lifetime).
			var err error
			val, err = g.local.Get(fill.Outer(ctx), key)
			cp = &fill.Copy{}
			return err
		},
		func(ctx context.Context, st *view.MemberState) error {
			var err error
			val, cp, err = g.askOwner(ctx, st, key)
			return err
		})
	if err != nil {
		return val, nil, route.FromWire(err)
	}
	return val, cp, nil
}

// askOwner asks st, the key's owner, for the value of key on the owner's stream, and returns
// it with what a near cache keeps of it (see fromOwner).
func (g *Group[V]) askOwner(ctx context.Context, st *view.MemberState, key string) (V, *fill.Copy, error) {
	resp, err := g.env.Client.GetFrom(ctx, st.PeerAddr, st.Gone.Done(), &peerpb.GetRequest{
		Header: g.env.Router.HeaderWith(fill.OuterChain(ctx)), Group: g.name, Key: []byte(key),
	})
	if err != nil {
		var zero V
		return zero, nil, err
	}
	return g.fromOwner(st, key, resp.GetEntry())
}

// fromOwner checks and decodes e, the entry of key that st, its owner, answered with, and
// says what a near cache keeps of it: a copy at the owner's version, tags and born, for as
// long as nearLifetime says (not at all for a key that is not hot). The copy is stored only
// if no write newer than it is known here by then, nor a purge of one of its tags newer than
// its making.
func (g *Group[V]) fromOwner(st *view.MemberState, key string, e *peerpb.Entry) (V, *fill.Copy, error) {
	cp := new(fill.Copy)
	val, err := g.ownerValue(st, key, e.GetValue(), e.GetVersion(), e.GetFreshForNanos(), e.GetTags(), e.GetBorn(), cp)
	if err != nil {
		return val, nil, err
	}
	return val, cp, nil
}

// ownerValue is fromOwner for the parts of an entry, a batch's row (batchwire.go) or an
// Entry: it decodes raw, the value, and sets cp. raw is the caller's own, as the wire gave it
// (see ownedDecoder).
func (g *Group[V]) ownerValue(st *view.MemberState, key string, raw []byte, ver uint64, freshFor int64,
	tags []string, born uint64, cp *fill.Copy) (V, error) {
	var val V
	if err := version.Check(ver); err != nil {
		return val, fmt.Errorf("corral: value of %s/%q from %s: %w", g.name, key, st.Name, err)
	}
	if err := fill.CheckTags(tags); err != nil {
		return val, fmt.Errorf("corral: value of %s/%q from %s: %w", g.name, key, st.Name, err)
	}
	g.env.Versions.Observe(ver)
	val, err := g.decodeOwned(raw)
	if err != nil {
		return val, fmt.Errorf("corral: value of %s/%q from %s: %w", g.name, key, st.Name, err)
	}
	near := g.nearLifetime(key, freshFor)
	*cp = fill.Copy{FreshFor: near, StaleFor: near, Version: ver, Tags: tags, Born: born}
	return val, nil
}

// remoteSet asks st, the key's owner, to apply a Set of key at version, tagged with tags, and
// returns the backups it could not give the value to.
func (g *Group[V]) remoteSet(ctx context.Context, st *view.MemberState, key string, value []byte, version uint64, tags []string) ([]string, error) {
	resp, err := g.env.Client.Set(ctx, st.PeerAddr, &peerpb.SetRequest{
		Header: g.env.Router.Header(ctx), Entry: &peerpb.Entry{Group: g.name, Key: []byte(key), Value: value, Version: version, Tags: tags},
	})
	return resp.GetUnreached(), err
}

// remoteRemove asks st, the key's owner, to apply a Remove of key at version.
func (g *Group[V]) remoteRemove(ctx context.Context, st *view.MemberState, key string, version uint64) error {
	_, err := g.env.Client.Remove(ctx, st.PeerAddr, &peerpb.RemoveRequest{
		Header: g.env.Router.Header(ctx), Group: g.name, Key: []byte(key), Version: version,
	})
	return err
}
