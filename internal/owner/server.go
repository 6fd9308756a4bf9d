package owner

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Group is what the owner's side needs of a group, whatever its value type. Package group
// implements it.
type Group interface {
	write.Group
	// Latest returns the largest version of key known here, in either store.
	Latest(key string) uint64
	ServeGet(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error)
	// ServeHeld answers a Get of a key held here at once; false leaves it to ServeGet.
	ServeHeld(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool)
	ServeSet(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error)
	ServeRemove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error)
	ServeLease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error)
	ServeFillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error)
	// Accept stores an entry another member handed to this node — a leaver's hand-off, or a
	// key's former owner's after a membership change — unless a newer one is known here.
	Accept(e *peerpb.Entry) (bool, error)
	// KeepBackup keeps a copy its owner gave this node as one of the key's backups, unless a
	// newer write is known here.
	KeepBackup(e *peerpb.Entry) (bool, error)
}

// Config is what a Server serves with. Every field is required; the pointers are the
// node's, read as the node changes them.
type Config struct {
	Self     string // this node's name
	PeerAddr string // this node's peer address
	View     *atomic.Pointer[view.View]
	Clock    *version.Clock
	Writer   *write.Writer
	Waits    *fill.WaitGraph
	Log      *slog.Logger

	// PeerTLS says the peer port speaks mutual TLS, whose handshake checks the caller: no
	// address check then. AllowNonMemberPeers turns the address check off without it.
	PeerTLS, AllowNonMemberPeers bool
	// PeekWindow is how long after a membership change a new owner asks the previous owners:
	// a stranger is remembered at least that long.
	PeekWindow time.Duration
	// Members returns the membership's live set and its claimants (members back at a new
	// address that it does not admit yet): nil while the node starts.
	Members func() []peer.Member

	// Groups are the groups this node serves.
	Groups Groups
	// Limits checks keys against the limits, and counts their hits.
	Limits *limit.Checker
	// Reconciled notes that sender exchanged one group's writes with this node.
	Reconciled func(sender, group string)
	// State is the node's lifecycle: a leaving node takes no hand-off, a draining one
	// answers warm pulls only, and its Writes gate lets a peer's Set, Remove and FillSet be
	// applied until the node stops serving.
	State *State
	// Refused counts a request refused for the address it came from; Received an entry a
	// hand-off delivered.
	Refused  func(reason string)
	Received func()
	// Purged counts a purge of a tag applied here.
	Purged func()
}

// Groups are the groups a node serves, by name.
type Groups interface {
	// Lookup returns the group registered as name.
	Lookup(name string) (Group, bool)
	// Serve returns the group a request names, registering it first when the node may
	// (corral.Config.AutoGroup), or an error wrapping transport.ErrUnknownGroup.
	Serve(name string) (Group, error)
	// Remember keeps a write of key at version, in the group called name that is not
	// registered here, until the group is: it then refuses every copy older than the write
	// from the start — a hand-off or a warm pull from a member that missed the write.
	Remember(name, key string, version uint64)
}

// Server is the owner's side of the peer protocol: the transport.Handler, which serves a
// peer's request as the key's acting owner and never forwards it again, whatever this node's
// ring says: views that disagree for a moment cost at most one extra fill, never a loop.
// Every request is admitted first (admit.go).
type Server struct {
	cfg Config
	// firstAsked is when another member first asked this node anything (Unix nanoseconds;
	// 0: never): see view.View.PeekCandidates.
	firstAsked atomic.Int64
}

var (
	_ transport.HitHandler    = (*Server)(nil)
	_ transport.LeaseHandler  = (*Server)(nil)
	_ transport.BackupHandler = (*Server)(nil)
)

// New returns the Server of a node.
func New(cfg Config) *Server { return &Server{cfg: cfg} }

// AskedAt is when another member first asked this node anything; zero if none has.
func (s *Server) AskedAt() time.Time {
	if t := s.firstAsked.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// Get serves a peer's Get (or warm pull) of a key. Once this node has left, it answers only
// warm pulls; Gets go to the key's next owner (ErrLeaving tells the sender so).
func (s *Server) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	if err := s.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if s.cfg.State.Draining.Load() && !req.GetPeek() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, s.cfg.Self)
	}
	if req.GetPeek() && req.GetGroup() == "" {
		// A probe (route.Router's): the answer is all it asks for. It names no group, and is
		// neither a bad group name nor an unknown group.
		return &peerpb.GetResponse{}, nil
	}
	g, err := s.cfg.Groups.Serve(req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.ServeGet(ctx, req)
}

// GetHit answers a peer's Get of a key this node holds (fresh, or stale within grace) at
// once, on the goroutine that reads the peer's stream; anything else — a miss, a warm pull,
// a refusal — is left to Get.
func (s *Server) GetHit(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	if req.GetPeek() || s.cfg.State.Draining.Load() {
		return nil, false
	}
	g, ok := s.cfg.Groups.Lookup(req.GetGroup())
	if !ok || !s.isMemberCaller(ctx) {
		return nil, false // Get says why, and counts the refusal once
	}
	if s.admitHeader(req.GetHeader()) != nil {
		return nil, false
	}
	return g.ServeHeld(ctx, req)
}

// Set serves a peer's write-through.
func (s *Server) Set(ctx context.Context, req *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	if err := s.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if !s.cfg.State.Writes.Enter() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, s.cfg.Self)
	}
	defer s.cfg.State.Writes.Exit()
	g, err := s.cfg.Groups.Serve(req.GetEntry().GetGroup())
	if err != nil {
		return nil, err
	}
	return g.ServeSet(ctx, req)
}

// Remove serves a peer's Remove.
func (s *Server) Remove(ctx context.Context, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	if err := s.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if !s.cfg.State.Writes.Enter() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, s.cfg.Self)
	}
	defer s.cfg.State.Writes.Exit()
	g, err := s.cfg.Groups.Serve(req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.ServeRemove(ctx, req)
}

// Invalidate applies a write made through another member — this node drops its copies of
// the key older than the write and remembers it — then tells the members this node knows
// of that the sender did not list, before it answers.
func (s *Server) Invalidate(ctx context.Context, req *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error) {
	if err := s.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if req.GetTag() != "" {
		return s.purge(ctx, req)
	}
	key := string(req.GetKey())
	if err := s.cfg.Limits.Key(key); err != nil {
		return nil, route.ToWire(err)
	}
	if err := version.Check(req.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	s.cfg.Clock.Observe(req.GetVersion())
	// A node that does not have the group yet holds no copy; it remembers the write for when
	// the group is registered (its application registers its groups after the node joined),
	// and it may know members that do have the group.
	if g, ok := s.cfg.Groups.Lookup(req.GetGroup()); ok {
		g.Invalidate(key, req.GetVersion())
	} else if fill.CheckName(req.GetGroup()) == nil {
		s.cfg.Groups.Remember(req.GetGroup(), key, req.GetVersion())
	}
	s.cfg.Log.Debug("corral: told of a write", "group", req.GetGroup(), "key", key, "version", req.GetVersion(), "by", req.GetHeader().GetSender())
	if s.cfg.State.Left.Load() {
		return &peerpb.InvalidateResponse{}, nil // its view is no longer kept up
	}
	// A write or copy of the key newer than this one, which the writer had not heard of when
	// it drew its version, is reported back (see write.Writer.Write).
	var newer uint64
	if g, ok := s.cfg.Groups.Lookup(req.GetGroup()); ok {
		if v := g.Latest(key); v > req.GetVersion() {
			newer = v
		}
	}
	told := append(req.GetTold(), s.cfg.Self)
	unreached, further := s.cfg.Writer.Tell(ctx, req.GetGroup(), key, req.GetVersion(), told)
	return &peerpb.InvalidateResponse{Unreached: unreached, NewerVersion: max(newer, further)}, nil
}

// purge applies a purge of a tag made through another member — every value carrying it
// born below its version is gone from this node's groups — then tells the members this node
// knows of that the sender did not list, before it answers. It answers this node's clock
// reading when that is at or above the purge's version, so that the purger purges again
// above it (see write.Writer.Purge).
func (s *Server) purge(ctx context.Context, req *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error) {
	tag := req.GetTag()
	if err := fill.CheckTag(tag); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	if err := version.Check(req.GetVersion()); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	newer := s.cfg.Writer.ApplyPurge(tag, req.GetVersion())
	s.cfg.Purged()
	s.cfg.Log.Debug("corral: told of a purge", "tag", tag, "version", req.GetVersion(), "by", req.GetHeader().GetSender())
	if s.cfg.State.Left.Load() {
		return &peerpb.InvalidateResponse{}, nil // its view is no longer kept up
	}
	told := append(req.GetTold(), s.cfg.Self)
	unreached, further := s.cfg.Writer.TellPurge(ctx, tag, req.GetVersion(), told)
	return &peerpb.InvalidateResponse{Unreached: unreached, NewerVersion: max(newer, further)}, nil
}

// Handoff stores an entry a leaving member pushed, or a key's former owner after a
// membership change, unless this node holds a newer version or knows of a write newer than
// the entry. A node that is leaving itself refuses it, so that the sender gives it to a
// member that stays.
func (s *Server) Handoff(ctx context.Context, e *peerpb.Entry) (bool, error) {
	if err := s.admit(ctx, nil); err != nil {
		return false, err
	}
	if s.cfg.State.Leaving.Load() {
		return false, fmt.Errorf("%w: %s is leaving", transport.ErrLeaving, s.cfg.Self)
	}
	if err := version.Check(e.GetVersion()); err != nil {
		return false, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	}
	s.cfg.Clock.Observe(e.GetVersion())
	g, err := s.cfg.Groups.Serve(e.GetGroup())
	if err != nil {
		return false, err
	}
	ok, err := g.Accept(e)
	if ok {
		s.cfg.Received()
	}
	return ok, err
}

// Backup keeps the copies a key's owner gives this node as one of the key's backups (a group
// with backups), each unless a write newer than it is known here. A node that is leaving
// keeps nothing: it answers that it is leaving, and the owner gives the copies to the members
// that stay.
func (s *Server) Backup(ctx context.Context, req *peerpb.BackupRequest) (*peerpb.BackupResponse, error) {
	if err := s.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	if s.cfg.State.Leaving.Load() {
		return nil, fmt.Errorf("%w: %s is leaving", transport.ErrLeaving, s.cfg.Self)
	}
	resp := &peerpb.BackupResponse{Kept: make([]bool, len(req.GetEntries()))}
	for i, e := range req.GetEntries() {
		if err := version.Check(e.GetVersion()); err != nil {
			return nil, fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
		}
		s.cfg.Clock.Observe(e.GetVersion())
		g, err := s.cfg.Groups.Serve(e.GetGroup())
		if err != nil {
			return nil, err
		}
		if resp.Kept[i], err = g.KeepBackup(e); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// WaitsFor lists what this node's fill of a key waits on, for a member looking for a fill
// cycle through this one.
func (s *Server) WaitsFor(ctx context.Context, req *peerpb.WaitsForRequest) (*peerpb.WaitsForResponse, error) {
	if err := s.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	resp := &peerpb.WaitsForResponse{}
	for _, t := range s.cfg.Waits.WaitsOf(req.GetGroup(), string(req.GetKey())) {
		addr := t.Where
		if addr == "" {
			addr = s.cfg.PeerAddr
		}
		resp.Waits = append(resp.Waits, &peerpb.Wait{Group: t.Cache, Key: []byte(t.Key), Addr: addr})
	}
	return resp, nil
}

// Lease serves a peer's Lease, as acting owner. Once this node has left, it answers that it
// is leaving: the caller asks the key's next owner.
func (s *Server) Lease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	g, err := s.leaseGroup(ctx, req.GetHeader(), req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.ServeLease(ctx, req)
}

// FillSet serves a peer's FillSet, as acting owner.
func (s *Server) FillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error) {
	g, err := s.leaseGroup(ctx, req.GetHeader(), req.GetEntry().GetGroup())
	if err != nil {
		return nil, err
	}
	if !s.cfg.State.Writes.Enter() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, s.cfg.Self)
	}
	defer s.cfg.State.Writes.Exit()
	return g.ServeFillSet(ctx, req)
}

func (s *Server) leaseGroup(ctx context.Context, h *peerpb.Header, group string) (Group, error) {
	if err := s.admit(ctx, h); err != nil {
		return nil, err
	}
	if s.cfg.State.Draining.Load() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, s.cfg.Self)
	}
	return s.cfg.Groups.Serve(group)
}

// Reconcile serves a peer's exchange of remembered writes: it applies the peer's and answers
// with this node's. A peer this node is waiting to reconcile with needs no exchange of its
// own any more: this one did it.
func (s *Server) Reconcile(ctx context.Context, req *peerpb.ReconcileRequest) (*peerpb.ReconcileResponse, error) {
	if err := s.admit(ctx, req.GetHeader()); err != nil {
		return nil, err
	}
	g, err := s.cfg.Groups.Serve(req.GetGroup())
	if err != nil {
		return nil, err
	}
	for _, w := range req.GetWrites() {
		if err := version.Check(w.GetVersion()); err != nil {
			return nil, fmt.Errorf("%w: a write of %q: %v", transport.ErrInvalidArgument, w.GetKey(), err)
		}
	}
	s.cfg.Writer.Apply(g, req.GetWrites())
	s.cfg.Writer.ApplyPurges(req.GetPurges())
	resp := &peerpb.ReconcileResponse{Writes: g.Writes(), Purges: s.cfg.Writer.Purges()}
	s.cfg.Reconciled(req.GetHeader().GetSender(), req.GetGroup())
	return resp, nil
}
