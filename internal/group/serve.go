package group

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/tracing"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// ServeGet serves a peer's Get (or warm pull, a Peek) of a key, as its acting owner.
func (g *Group[V]) ServeGet(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	if len(req.GetKeySizes()) > 0 {
		keys, err := batchKeys(req, true)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
		}
		resp, _ := g.serveMany(ctx, req, keys, false)
		return resp, nil
	}
	key := string(req.GetKey())
	if err := g.env.Limits.Key(key); err != nil {
		return nil, route.ToWire(err)
	}
	if req.GetPeek() {
		e, ok := g.local.PeekAny(key)
		if !ok && g.backup != nil {
			e, ok = g.backup.PeekAny(key) // a warm pull finds the backups too
		}
		// Two members may pull one key from each other at once — a member back in place after
		// it was declared dead and the successor that took its keys over — and each find
		// nothing on the other, which has not begun to load: both would load. So the one with
		// the smaller name waits for the other's fill, warm pull and all: told of the other's
		// pull when it asks, or, when the other asks first, named to its own fill, which then
		// waits rather than load (fill.LoadingUnlessAsked). The other is told nothing of the
		// first's pull, and loads. A fill waits only on a member with a greater name or on one
		// that loads, which waits on no one: never round a cycle.
		from := sender(req)
		lower := from != "" && from < g.env.Self
		if !ok && req.GetWaitFill() {
			if lower {
				e, ok = g.local.AwaitAny(ctx, key)
			} else {
				e, ok = g.local.AwaitFill(ctx, key)
			}
		}
		if !ok {
			// A fill of the key running here (this node is its acting owner since the owner
			// failed) will hold it soon: the asker may wait for it rather than fill too.
			// Each answer is one look at the fill, so that it cannot start to load between two.
			var filling bool
			switch {
			case from == "" || from == g.env.Self:
				filling = g.local.Filling(key)
			case lower:
				filling = g.local.Running(key)
			default:
				filling = g.local.NoteAsked(key, from)
			}
			return &peerpb.GetResponse{Filling: filling}, nil
		}
		pe, err := g.encodeEntry(key, e)
		if err != nil {
			return &peerpb.GetResponse{}, nil
		}
		g.env.Sent(1)
		return &peerpb.GetResponse{Entry: pe, Found: true, Source: peerpb.Source_HIT}, nil
	}
	g.peerGets.Add(1)
	g.servedAs(ctx, key)
	var chain []string
	for _, link := range req.GetHeader().GetChain() {
		chain = append(chain, string(link))
	}
	e, src, err := g.local.Lookup(fill.WithChain(ctx, chain), key)
	if err != nil {
		return nil, route.ToWire(err)
	}
	pe, err := g.encodeEntry(key, e)
	if err != nil {
		return nil, route.ToWire(err)
	}
	return &peerpb.GetResponse{Entry: pe, Found: true, Source: wireSource(src)}, nil
}

// sender is the name of the member that sent req.
func sender(req *peerpb.GetRequest) string { return req.GetHeader().GetSender() }

// ServeHeld is ServeGet for a key held here, which it answers without waiting, on the
// goroutine that reads the peer's stream; false leaves the request to ServeGet.
func (g *Group[V]) ServeHeld(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	if len(req.GetKeySizes()) > 0 {
		keys, err := batchKeys(req, false)
		if err != nil {
			return nil, false // ServeGet says why
		}
		return g.serveMany(ctx, req, keys, true)
	}
	key := string(req.GetKey())
	e, src, ok := g.local.LookupHeld(ctx, key)
	if !ok {
		return nil, false
	}
	pe, err := g.encodeEntry(key, e)
	if err != nil {
		return nil, false // ServeGet reports it
	}
	g.peerGets.Add(1)
	g.servedAs(ctx, key)
	return &peerpb.GetResponse{Entry: pe, Found: true, Source: wireSource(src)}, true
}

// servedAs records on the span of a peer's Get of key (if it records) the key, the member
// this node's view says owns it, and that this node serves it as the key's acting owner —
// whatever its view says: a corral.owner that is not this node means the views disagree for
// a moment, and the request is not forwarded.
func (g *Group[V]) servedAs(ctx context.Context, key string) {
	if g.env.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	owner := g.env.ownerName(key)
	span.SetAttributes(g.env.Tracer.KeyAttrs(key)...)
	span.SetAttributes(tracing.AttrOwner.String(owner), tracing.AttrActingOwner.Bool(true))
}

func wireSource(s fill.Source) peerpb.Source {
	switch s {
	case fill.SourceFill:
		return peerpb.Source_FILL
	case fill.SourceCoalesced:
		return peerpb.Source_COALESCED
	case fill.SourceStale:
		return peerpb.Source_STALE
	}
	return peerpb.Source_HIT
}

// ServeSet applies a peer's Set as the key's owner.
func (g *Group[V]) ServeSet(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	e := req.GetEntry()
	key := string(e.GetKey())
	if err := g.env.Limits.Key(key); err != nil {
		return nil, route.ToWire(err)
	}
	if err := version.Check(e.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	v, err := g.codec.Decode(e.GetValue())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	version := g.env.Versions.OrNext(e.GetVersion())
	stored, err := g.local.SetAt(key, v, version, e.GetTags()...)
	if err != nil {
		return nil, route.ToWire(err)
	}
	g.near.Invalidate(key, version)
	var unreached []string
	if stored {
		unreached = g.pushBackups(ctx, []string{key}) // before the writer returns
	}
	g.env.Log.Debug("corral: set as owner", "group", g.name, "key", key, "version", version, "stored", stored, "for", req.GetHeader().GetSender())
	return &peerpb.SetResponse{Version: version, Unreached: unreached}, nil
}

// ServeRemove applies a peer's Remove as the key's owner.
func (g *Group[V]) ServeRemove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	key := string(req.GetKey())
	if err := g.env.Limits.Key(key); err != nil {
		return nil, route.ToWire(err)
	}
	if err := version.Check(req.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	version := g.env.Versions.OrNext(req.GetVersion())
	if err := g.local.RemoveAt(key, version); err != nil {
		return nil, route.ToWire(err)
	}
	g.near.Invalidate(key, version)
	g.env.Log.Debug("corral: removed as owner", "group", g.name, "key", key, "version", version, "for", req.GetHeader().GetSender())
	return &peerpb.RemoveResponse{Version: version}, nil
}

// Invalidate applies a write of key at version made elsewhere: every copy of the key this
// node holds that is older — in its store and its near cache — is dropped, fills of it in
// flight are revoked, and the write is remembered, so that no older copy is stored later.
func (g *Group[V]) Invalidate(key string, version uint64) {
	if fill.CheckKey(key) != nil {
		return
	}
	g.local.Invalidate(key, version)
	g.near.Invalidate(key, version)
	if g.backup != nil {
		g.backup.Invalidate(key, version)
	}
	g.leases.Revoke(key, version)
}

// Latest returns the largest version of key known here, in either store (see
// fill.Cache.Latest).
func (g *Group[V]) Latest(key string) uint64 {
	l := max(g.local.Latest(key), g.near.Latest(key))
	if g.backup != nil {
		l = max(l, g.backup.Latest(key))
	}
	return l
}

// Accept stores an entry another member handed to this node — a leaver's hand-off, or a
// former owner's after a membership change (moveOn) — unless this node holds a newer version
// or knows of a write newer than the entry. A stored entry goes to its backups, as a fill's
// does (backUpHanded).
func (g *Group[V]) Accept(pe *peerpb.Entry) (bool, error) {
	key := string(pe.GetKey())
	if err := g.env.Limits.Key(key); err != nil {
		return false, route.ToWire(err)
	}
	e, err := g.decodeEntry(pe)
	if err != nil {
		return false, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	stored, err := g.local.Put(key, e)
	if stored {
		g.handed(key)
	}
	return stored, err
}

// HandoffEntries yields every entry this node holds that may still be served — fresh, stale
// within grace, or a remembered not-found — with the member that owns it on r.
func (g *Group[V]) HandoffEntries(r *ring.Ring, self string, add func(owner string, e *peerpb.Entry)) {
	for key, e := range g.local.All() {
		owner := r.Owner(key)
		if owner == "" || owner == self {
			continue
		}
		pe, err := g.encodeEntry(key, e)
		if err != nil {
			continue
		}
		add(owner, pe)
	}
}

// StillCurrent reports whether no write newer than e is known here: an entry read for a
// hand-off that a write has overtaken since is not sent.
func (g *Group[V]) StillCurrent(e *peerpb.Entry) bool {
	return e.GetVersion() >= g.tombs.Floor(string(e.GetKey()))
}

func (g *Group[V]) encodeEntry(key string, e fill.Entry[V]) (*peerpb.Entry, error) {
	b, err := g.codec.Encode(e.Value)
	if err != nil {
		return nil, fmt.Errorf("corral: encode value of %s/%q: %w", g.name, key, err)
	}
	if err := g.env.Limits.Value(len(b)); err != nil {
		return nil, err
	}
	return &peerpb.Entry{
		Group: g.name, Key: []byte(key), Value: b,
		FreshForNanos: int64(e.FreshFor), StaleForNanos: int64(e.StaleFor),
		Version: e.Version, FillNanos: int64(e.FillTime), NotFound: e.NotFound,
		Tags: e.Tags, Born: e.Born,
	}, nil
}

func (g *Group[V]) decodeEntry(pe *peerpb.Entry) (fill.Entry[V], error) {
	// Tags are checked on arrival, whatever the entry's lifetime: a peer's entry that breaks a
	// limit is refused, never stored or passed on.
	if err := fill.CheckTags(pe.GetTags()); err != nil {
		return fill.Entry[V]{}, err
	}
	e := fill.Entry[V]{
		FreshFor: time.Duration(pe.GetFreshForNanos()),
		StaleFor: time.Duration(pe.GetStaleForNanos()),
		Version:  pe.GetVersion(),
		FillTime: time.Duration(pe.GetFillNanos()),
		NotFound: pe.GetNotFound(),
		Tags:     pe.GetTags(),
		Born:     pe.GetBorn(),
	}
	if e.NotFound {
		return e, nil // no value to decode
	}
	v, err := g.codec.Decode(pe.GetValue())
	if err != nil {
		return fill.Entry[V]{}, err
	}
	e.Value = v
	return e, nil
}

// nearLifetime decides whether a value fetched from the owner is kept as a near copy, and
// for how long: only for keys this node asks for often (NearPromote requests within a
// second), never longer than NearTTL nor than the owner's remaining freshness.
func (g *Group[V]) nearLifetime(key string, freshFor int64) time.Duration {
	if g.env.NearBytes < 0 {
		return 0
	}
	c, _ := g.hot.ComputeIfAbsent(key, func() (*atomic.Int32, bool) { return new(atomic.Int32), false })
	if c == nil || c.Add(1) < int32(g.env.NearPromote) {
		return 0
	}
	return max(min(time.Duration(freshFor), g.env.NearTTL), 0)
}

func (g *Group[V]) closeStores(ctx context.Context) error {
	g.leases.Close()
	g.stopFollowing(ctx)
	return errors.Join(g.local.Close(ctx), g.near.Close(ctx), g.closeBackups(ctx), g.stopHot())
}

func (g *Group[V]) stopHot() error {
	g.hot.StopAllGoroutines()
	return nil
}

// Close closes the group's stores and ends its leases.
func (g *Group[V]) Close(ctx context.Context) error { return g.closeStores(ctx) }

// Writes returns the group's remembered writes, for the wire (see write.Writer.Exchange).
func (g *Group[V]) Writes() []*peerpb.Write {
	var out []*peerpb.Write
	for k, v := range g.tombs.All() {
		out = append(out, &peerpb.Write{Key: []byte(k), Version: v})
	}
	return out
}
