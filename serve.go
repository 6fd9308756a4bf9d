package corral

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// groupHandle is what the node needs of a group whatever its value type: serving peers,
// handing off, metrics and closing.
type groupHandle interface {
	serveGet(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error)
	serveSet(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error)
	serveRemove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error)
	dropNear(key string)
	accept(e *peerpb.Entry) (bool, error)
	handoffEntries(r *ring.Ring, self string, add func(owner string, e *peerpb.Entry))
	stats() GroupStats
	close(ctx context.Context) error
}

var _ groupHandle = (*Group[string])(nil)
var _ transport.Handler = (*Node)(nil)

// The transport.Handler methods. A peer request is served as acting owner and never
// forwarded again, whatever this node's ring says: views that disagree for a moment cost at
// most one extra fill, never a loop.

// Get serves a peer's Get (or peek) for a key.
func (n *Node) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	g, err := n.handle(req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveGet(ctx, req)
}

// Set serves a peer's write-through.
func (n *Node) Set(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	g, err := n.handle(req.GetEntry().GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveSet(ctx, req)
}

// Remove serves a peer's Remove.
func (n *Node) Remove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	g, err := n.handle(req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveRemove(ctx, req)
}

// Invalidate drops this node's near copy of a key.
func (n *Node) Invalidate(ctx context.Context, req *peerpb.InvalidateRequest) error {
	g, err := n.handle(req.GetGroup())
	if err != nil {
		return err
	}
	g.dropNear(req.GetKey())
	return nil
}

// Handoff stores an entry a leaving member pushed, unless a newer version is held.
func (n *Node) Handoff(ctx context.Context, e *peerpb.Entry) (bool, error) {
	g, err := n.handle(e.GetGroup())
	if err != nil {
		return false, err
	}
	ok, err := g.accept(e)
	if ok {
		n.metrics.handoff.WithLabelValues("received").Inc()
	}
	return ok, err
}

func (n *Node) handle(group string) (groupHandle, error) {
	g, ok := n.group(group)
	if !ok && n.cfg.AutoGroup != nil && fill.CheckName(group) == nil && !n.leaving.Load() {
		if err := n.cfg.AutoGroup(n, group); err != nil {
			n.log.Warn("corral: AutoGroup failed", "group", group, "err", err)
		}
		g, ok = n.group(group)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q on %s", transport.ErrUnknownGroup, group, n.cfg.Name)
	}
	return g, nil
}

func (g *Group[V]) serveGet(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	key := req.GetKey()
	if err := checkKey(key); err != nil {
		return nil, toWire(err)
	}
	if req.GetPeek() {
		e, ok := g.local.Peek(key)
		if !ok || e.FreshFor <= 0 {
			return &peerpb.GetResponse{}, nil
		}
		pe, err := g.encodeEntry(key, e)
		if err != nil {
			return &peerpb.GetResponse{}, nil
		}
		return &peerpb.GetResponse{Entry: pe, Found: true, Source: peerpb.Source_HIT}, nil
	}
	g.peerGets.Add(1)
	e, src, err := g.local.GetEntry(fill.WithChain(ctx, req.GetHeader().GetChain()), key)
	if err != nil {
		return nil, toWire(err)
	}
	pe, err := g.encodeEntry(key, e)
	if err != nil {
		return nil, toWire(err)
	}
	return &peerpb.GetResponse{Entry: pe, Found: true, Source: wireSource(src)}, nil
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

func (g *Group[V]) serveSet(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	e := req.GetEntry()
	if err := checkKey(e.GetKey()); err != nil {
		return nil, toWire(err)
	}
	v, err := g.codec.Decode(e.GetValue())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	version, err := g.local.Set(e.GetKey(), v)
	if err != nil {
		return nil, toWire(err)
	}
	g.near.Remove(e.GetKey())
	return &peerpb.SetResponse{Version: version}, nil
}

func (g *Group[V]) serveRemove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	if err := checkKey(req.GetKey()); err != nil {
		return nil, toWire(err)
	}
	version, err := g.local.Remove(req.GetKey())
	if err != nil {
		return nil, toWire(err)
	}
	g.near.Remove(req.GetKey())
	return &peerpb.RemoveResponse{Version: version}, nil
}

// dropNear drops the near copy of key and revokes a fetch of it in flight, whose answer may
// predate the write that caused the invalidation.
func (g *Group[V]) dropNear(key string) {
	if fill.CheckKey(key) == nil {
		g.near.Remove(key)
	}
}

func (g *Group[V]) accept(pe *peerpb.Entry) (bool, error) {
	if err := checkKey(pe.GetKey()); err != nil {
		return false, toWire(err)
	}
	e, err := g.decodeEntry(pe)
	if err != nil {
		return false, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	return g.local.Put(pe.GetKey(), e)
}

// handoffEntries yields every entry this node holds that is still fresh, with the member
// that owns it on r.
func (g *Group[V]) handoffEntries(r *ring.Ring, self string, add func(owner string, e *peerpb.Entry)) {
	for key, e := range g.local.All() {
		if e.FreshFor <= 0 {
			continue
		}
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

func (g *Group[V]) encodeEntry(key string, e fill.Entry[V]) (*peerpb.Entry, error) {
	b, err := g.codec.Encode(e.Value)
	if err != nil {
		return nil, fmt.Errorf("corral: encode value of %s/%q: %w", g.name, key, err)
	}
	if err := g.node.checkValue(len(b)); err != nil {
		return nil, err
	}
	return &peerpb.Entry{
		Group: g.name, Key: key, Value: b,
		FreshForNanos: int64(e.FreshFor), StaleForNanos: int64(e.StaleFor),
		Version: e.Version, FillNanos: int64(e.FillTime),
	}, nil
}

func (g *Group[V]) decodeEntry(pe *peerpb.Entry) (fill.Entry[V], error) {
	v, err := g.codec.Decode(pe.GetValue())
	if err != nil {
		return fill.Entry[V]{}, err
	}
	return fill.Entry[V]{
		Value:    v,
		FreshFor: time.Duration(pe.GetFreshForNanos()),
		StaleFor: time.Duration(pe.GetStaleForNanos()),
		Version:  pe.GetVersion(),
		FillTime: time.Duration(pe.GetFillNanos()),
	}, nil
}

// nearLifetime decides whether a value fetched from the owner is kept as a near copy, and
// for how long: only for keys this node asks for often (NearPromote requests within a
// second), never longer than NearTTL nor than the owner's remaining freshness.
func (g *Group[V]) nearLifetime(key string, e *peerpb.Entry) time.Duration {
	n := g.node
	if n.cfg.NearBytes < 0 {
		return 0
	}
	c, _ := g.hot.ComputeIfAbsent(key, func() (*atomic.Int32, bool) { return new(atomic.Int32), false })
	if c == nil || c.Add(1) < int32(n.cfg.NearPromote) {
		return 0
	}
	return max(min(time.Duration(e.GetFreshForNanos()), n.cfg.NearTTL), 0)
}

func (g *Group[V]) closeStores(ctx context.Context) error {
	err1 := g.local.Close(ctx)
	err2 := g.near.Close(ctx)
	g.hot.StopAllGoroutines()
	if err1 != nil {
		return err1
	}
	return err2
}

func (g *Group[V]) close(ctx context.Context) error { return g.closeStores(ctx) }
