package corral

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// groupHandle is what the node needs of a group whatever its value type: serving peers,
// handing off, metrics and closing.
type groupHandle interface {
	Name() string
	writes() []*peerpb.Write
	serveGet(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error)
	serveHeld(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool)
	serveSet(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error)
	serveRemove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error)
	invalidate(key string, version uint64)
	latest(key string) uint64
	accept(e *peerpb.Entry) (bool, error)
	handoffEntries(r *ring.Ring, self string, add func(owner string, e *peerpb.Entry))
	stillCurrent(e *peerpb.Entry) bool
	stats() GroupStats
	close(ctx context.Context) error
}

var _ groupHandle = (*Group[string])(nil)

// server is the node's side of the peer protocol: the transport.Handler. It is a type of
// its own so that these methods, which take the wire's types, stay out of Node's API.
//
// A peer request is served as acting owner and never forwarded again, whatever this node's
// ring says: views that disagree for a moment cost at most one extra fill, never a loop.
type server struct{ n *Node }

var _ transport.HitHandler = server{}

// Get serves a peer's Get (or warm pull) of a key. Once this node has left, it answers only
// warm pulls; Gets go to the key's next owner (ErrLeaving tells the sender so).
func (s server) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	n := s.n
	if err := n.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if n.draining.Load() && !req.GetPeek() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, n.cfg.Name)
	}
	g, err := n.handle(req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveGet(ctx, req)
}

// GetHit answers a peer's Get of a key this node holds (fresh, or stale within grace) at
// once, on the goroutine that reads the peer's stream; anything else — a miss, a warm pull,
// a refusal — is left to Get.
func (s server) GetHit(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	n := s.n
	if req.GetPeek() || n.draining.Load() {
		return nil, false
	}
	g, ok := n.group(req.GetGroup())
	if !ok || !n.isMemberCaller(ctx) {
		return nil, false // Get says why, and counts the refusal once
	}
	if n.admitHeader(req.GetHeader()) != nil {
		return nil, false
	}
	return g.serveHeld(ctx, req)
}

// Set serves a peer's write-through.
func (s server) Set(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	n := s.n
	if err := n.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if n.draining.Load() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, n.cfg.Name)
	}
	g, err := n.handle(req.GetEntry().GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveSet(ctx, req)
}

// Remove serves a peer's Remove.
func (s server) Remove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	n := s.n
	if err := n.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if n.draining.Load() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, n.cfg.Name)
	}
	g, err := n.handle(req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.serveRemove(ctx, req)
}

// Invalidate applies a write made through another member — this node drops its copies of
// the key older than the write and remembers it — then tells the members this node knows
// of that the sender did not list, before it answers.
func (s server) Invalidate(ctx context.Context, req *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error) {
	n := s.n
	if err := n.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	key := string(req.GetKey())
	if err := n.checkKey(key); err != nil {
		return nil, toWire(err)
	}
	if err := version.Check(req.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	n.versions.Observe(req.GetVersion())
	// A node that does not have the group holds no copy; it may still know members that do.
	if g, ok := n.group(req.GetGroup()); ok {
		g.invalidate(key, req.GetVersion())
	}
	n.log.Debug("corral: told of a write", "group", req.GetGroup(), "key", key, "version", req.GetVersion(), "by", req.GetHeader().GetSender())
	if n.left.Load() {
		return &peerpb.InvalidateResponse{}, nil // its view is no longer kept up
	}
	// A write or copy of the key newer than this one, which the writer had not heard of when
	// it drew its version, is reported back (see write.Writer.Write).
	var newer uint64
	if g, ok := n.group(req.GetGroup()); ok {
		if v := g.latest(key); v > req.GetVersion() {
			newer = v
		}
	}
	told := append(req.GetTold(), n.cfg.Name)
	unreached, further := n.writer.Tell(ctx, req.GetGroup(), key, req.GetVersion(), told)
	return &peerpb.InvalidateResponse{Unreached: unreached, NewerVersion: max(newer, further)}, nil
}

// Handoff stores an entry a leaving member pushed, unless this node holds a newer version
// or knows of a write newer than the entry. A node that is leaving itself refuses it, so
// that the sender gives it to a member that stays.
func (s server) Handoff(ctx context.Context, e *peerpb.Entry) (bool, error) {
	n := s.n
	if err := n.admit(ctx, nil); err != nil {
		return false, err
	}
	if n.leaving.Load() {
		return false, fmt.Errorf("%w: %s is leaving", transport.ErrLeaving, n.cfg.Name)
	}
	if err := version.Check(e.GetVersion()); err != nil {
		return false, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	n.versions.Observe(e.GetVersion())
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

// WaitsFor lists what this node's fill of a key waits on, for a member looking for a fill
// cycle through this one.
func (s server) WaitsFor(ctx context.Context, req *peerpb.WaitsForRequest) (*peerpb.WaitsForResponse, error) {
	n := s.n
	if err := n.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	resp := &peerpb.WaitsForResponse{}
	for _, t := range n.waits.WaitsOf(req.GetGroup(), string(req.GetKey())) {
		addr := t.Where
		if addr == "" {
			addr = n.peerAddr
		}
		resp.Waits = append(resp.Waits, &peerpb.Wait{Group: t.Cache, Key: []byte(t.Key), Addr: addr})
	}
	return resp, nil
}

func (n *Node) handle(group string) (groupHandle, error) {
	g, ok := n.group(group)
	if !ok && fill.CheckName(group) != nil {
		n.metrics.limits.hit(limitGroupName)
	}
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
	key := string(req.GetKey())
	if err := g.node.checkKey(key); err != nil {
		return nil, toWire(err)
	}
	if req.GetPeek() {
		e, ok := g.local.PeekAny(key)
		if !ok && req.GetWaitFill() {
			e, ok = g.local.AwaitFill(ctx, key)
		}
		if !ok {
			// A fill of the key running here (this node is its acting owner since the owner
			// failed) will hold it soon: the asker may wait for it rather than fill too.
			return &peerpb.GetResponse{Filling: g.local.Filling(key)}, nil
		}
		pe, err := g.encodeEntry(key, e)
		if err != nil {
			return &peerpb.GetResponse{}, nil
		}
		g.node.metrics.handoff.WithLabelValues("sent").Inc()
		return &peerpb.GetResponse{Entry: pe, Found: true, Source: peerpb.Source_HIT}, nil
	}
	g.peerGets.Add(1)
	var chain []string
	for _, link := range req.GetHeader().GetChain() {
		chain = append(chain, string(link))
	}
	e, src, err := g.local.Lookup(fill.WithChain(ctx, chain), key)
	if err != nil {
		return nil, toWire(err)
	}
	pe, err := g.encodeEntry(key, e)
	if err != nil {
		return nil, toWire(err)
	}
	return &peerpb.GetResponse{Entry: pe, Found: true, Source: wireSource(src)}, nil
}

// serveHeld is serveGet for a key held here, which it answers without waiting (see
// server.GetHit); false leaves the request to serveGet.
func (g *Group[V]) serveHeld(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	key := string(req.GetKey())
	e, src, ok := g.local.LookupHeld(ctx, key)
	if !ok {
		return nil, false
	}
	pe, err := g.encodeEntry(key, e)
	if err != nil {
		return nil, false // serveGet reports it
	}
	g.peerGets.Add(1)
	return &peerpb.GetResponse{Entry: pe, Found: true, Source: wireSource(src)}, true
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
	key := string(e.GetKey())
	if err := g.node.checkKey(key); err != nil {
		return nil, toWire(err)
	}
	if err := version.Check(e.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	v, err := g.codec.Decode(e.GetValue())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	version := g.node.versions.OrNext(e.GetVersion())
	stored, err := g.local.SetAt(key, v, version)
	if err != nil {
		return nil, toWire(err)
	}
	g.near.Invalidate(key, version)
	g.node.log.Debug("corral: set as owner", "group", g.name, "key", key, "version", version, "stored", stored, "for", req.GetHeader().GetSender())
	return &peerpb.SetResponse{Version: version}, nil
}

func (g *Group[V]) serveRemove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	key := string(req.GetKey())
	if err := g.node.checkKey(key); err != nil {
		return nil, toWire(err)
	}
	if err := version.Check(req.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	version := g.node.versions.OrNext(req.GetVersion())
	if err := g.local.RemoveAt(key, version); err != nil {
		return nil, toWire(err)
	}
	g.near.Invalidate(key, version)
	g.node.log.Debug("corral: removed as owner", "group", g.name, "key", key, "version", version, "for", req.GetHeader().GetSender())
	return &peerpb.RemoveResponse{Version: version}, nil
}

// invalidate applies a write of key at version made elsewhere: every copy of the key this
// node holds that is older — in its store and its near cache — is dropped, fills of it in
// flight are revoked, and the write is remembered, so that no older copy is stored later.
func (g *Group[V]) invalidate(key string, version uint64) {
	if fill.CheckKey(key) != nil {
		return
	}
	g.local.Invalidate(key, version)
	g.near.Invalidate(key, version)
	g.leases.Revoke(key, version)
}

// latest returns the largest version of key known here, in either store (see
// fill.Cache.Latest).
func (g *Group[V]) latest(key string) uint64 {
	return max(g.local.Latest(key), g.near.Latest(key))
}

func (g *Group[V]) accept(pe *peerpb.Entry) (bool, error) {
	key := string(pe.GetKey())
	if err := g.node.checkKey(key); err != nil {
		return false, toWire(err)
	}
	e, err := g.decodeEntry(pe)
	if err != nil {
		return false, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	return g.local.Put(key, e)
}

// handoffEntries yields every entry this node holds that may still be served — fresh, stale
// within grace, or a remembered not-found — with the member that owns it on r.
func (g *Group[V]) handoffEntries(r *ring.Ring, self string, add func(owner string, e *peerpb.Entry)) {
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

// stillCurrent reports whether no write newer than e is known here: an entry read for a
// hand-off that a write has overtaken since is not sent.
func (g *Group[V]) stillCurrent(e *peerpb.Entry) bool {
	return e.GetVersion() >= g.tombs.Floor(string(e.GetKey()))
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
		Group: g.name, Key: []byte(key), Value: b,
		FreshForNanos: int64(e.FreshFor), StaleForNanos: int64(e.StaleFor),
		Version: e.Version, FillNanos: int64(e.FillTime), NotFound: e.NotFound,
	}, nil
}

func (g *Group[V]) decodeEntry(pe *peerpb.Entry) (fill.Entry[V], error) {
	e := fill.Entry[V]{
		FreshFor: time.Duration(pe.GetFreshForNanos()),
		StaleFor: time.Duration(pe.GetStaleForNanos()),
		Version:  pe.GetVersion(),
		FillTime: time.Duration(pe.GetFillNanos()),
		NotFound: pe.GetNotFound(),
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
	g.leases.Close()
	err1 := g.local.Close(ctx)
	err2 := g.near.Close(ctx)
	g.hot.StopAllGoroutines()
	if err1 != nil {
		return err1
	}
	return err2
}

func (g *Group[V]) close(ctx context.Context) error { return g.closeStores(ctx) }
