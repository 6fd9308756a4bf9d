package node

import (
	"context"
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// server is the node's side of the peer protocol: the transport.Handler. It is a type of
// its own so that these methods, which take the wire's types, stay out of Node's API.
//
// A peer request is served as acting owner and never forwarded again, whatever this node's
// ring says: views that disagree for a moment cost at most one extra fill, never a loop.
type server struct{ n *Node }

var _ transport.HitHandler = server{}

// Handler is the node's side of the peer protocol, which its peer server serves: for a test
// that plays a peer in-process.
func (n *Node) Handler() interface {
	transport.HitHandler
	transport.LeaseHandler
} {
	return server{n}
}

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
	return g.ServeGet(ctx, req)
}

// GetHit answers a peer's Get of a key this node holds (fresh, or stale within grace) at
// once, on the goroutine that reads the peer's stream; anything else — a miss, a warm pull,
// a refusal — is left to Get.
func (s server) GetHit(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	n := s.n
	if req.GetPeek() || n.draining.Load() {
		return nil, false
	}
	g, ok := n.Group(req.GetGroup())
	if !ok || !n.isMemberCaller(ctx) {
		return nil, false // Get says why, and counts the refusal once
	}
	if n.admitHeader(req.GetHeader()) != nil {
		return nil, false
	}
	return g.ServeHeld(ctx, req)
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
	return g.ServeSet(ctx, req)
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
	return g.ServeRemove(ctx, req)
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
	if err := n.CheckKey(key); err != nil {
		return nil, route.ToWire(err)
	}
	if err := version.Check(req.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	n.versions.Observe(req.GetVersion())
	// A node that does not have the group holds no copy; it may still know members that do.
	if g, ok := n.Group(req.GetGroup()); ok {
		g.Invalidate(key, req.GetVersion())
	}
	n.log.Debug("corral: told of a write", "group", req.GetGroup(), "key", key, "version", req.GetVersion(), "by", req.GetHeader().GetSender())
	if n.left.Load() {
		return &peerpb.InvalidateResponse{}, nil // its view is no longer kept up
	}
	// A write or copy of the key newer than this one, which the writer had not heard of when
	// it drew its version, is reported back (see write.Writer.Write).
	var newer uint64
	if g, ok := n.Group(req.GetGroup()); ok {
		if v := g.Latest(key); v > req.GetVersion() {
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
	ok, err := g.Accept(e)
	if ok {
		n.HandoffReceived()
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

func (n *Node) handle(group string) (Group, error) {
	g, ok := n.Group(group)
	if !ok && fill.CheckName(group) != nil {
		n.metrics.limits.hit(limit.GroupName)
	}
	if !ok && n.cfg.AutoGroup != nil && fill.CheckName(group) == nil && !n.leaving.Load() {
		if err := n.cfg.AutoGroup(group); err != nil {
			n.log.Warn("corral: AutoGroup failed", "group", group, "err", err)
		}
		g, ok = n.Group(group)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q on %s", transport.ErrUnknownGroup, group, n.cfg.Name)
	}
	return g, nil
}
