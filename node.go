package corral

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/crash"
	"github.com/corralcache/corral/internal/group"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/memhost"
	"github.com/corralcache/corral/internal/network"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/internal/peertls"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/tracing"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/viewkeeper"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Node is one member of a corral cluster: gossip membership, the peer server and client,
// and the groups registered on it. Create it with New and stop it with Close.
//
// A Node is the composition of the cluster's parts (see docs/design.md for the drawing):
// New builds each with what it needs, in the order below, and Close takes them down in
// reverse. Its own state is only what ties them together.
type Node struct {
	cfg      Config // validated, defaults filled in; not changed after New
	log      *slog.Logger
	rand     *lockedRand // Config.Rand, or nil
	net      network.Network
	started  time.Time // when this life of the member began (its gossip meta's StartedAt)
	peerAddr string    // the "ip:port" peers dial

	// The parts, each built once by New.
	metrics   *metrics
	tracer    *tracing.Tracer // Config.TracerProvider's; nil: no spans
	clock     fill.Clock      // the stores' time source
	stopClock func()
	versions  *version.Clock  // orders writes (package version)
	tags      *fill.Tags      // the tags of every group's values, and their purges
	waits     *fill.WaitGraph // fills waiting on fills, here and through peers
	limits    limit.Checker
	refreshes *fill.Limiter // background refreshes at once, over every group
	fills     *fill.Limiter // loader runs at once, over every group; nil = unbounded
	client    *transport.Client
	router    *route.Router      // owners of keys, fail-over, breakers
	writer    *write.Writer      // writes and their telling
	mover     *handoff.Mover     // hand-offs and warm pulls
	owner     *owner.Server      // the owner's side of the peer protocol
	server    *transport.Server  // serves owner
	keeper    *viewkeeper.Keeper // the view, from the membership
	members   viewkeeper.Membership
	groups    groups    // the groups registered here (groups.go)
	env       group.Env // what every group is built with

	view       atomic.Pointer[view.View] // written by keeper, read by every part
	state      owner.State
	serverDone chan struct{} // closed when server's Serve returns

	closeOnce sync.Once
	closeErr  error
}

// New starts a node: it binds the peer port and the gossip port, and joins the seeds in
// cfg.Join (a node with no seeds is a one-node cluster that others may join). Joining is
// retried in the background when no seed answers at first.
func New(cfg Config) (*Node, error) { return newNode(cfg, network.OS) }

// The module's own tools reach past the public API here: to stop a node as a crash would (no
// leave, no hand-off), and to start one on an in-memory network.
func init() {
	crash.Node = func(n any) { n.(*Node).kill() }
	memhost.New = func(cfg any, nw network.Network) (any, error) {
		n, err := newNode(cfg.(Config), nw)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// newNode starts the node cfg describes on nw. Each step undoes what it started when a later
// one fails.
func newNode(cfg Config, nw network.Network) (*Node, error) {
	if err := cfg.validateOn(nw); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, net: nw, log: cfg.Logger.With("node", cfg.Name), rand: newLockedRand(cfg.Rand),
		started: time.Now(), serverDone: make(chan struct{}), refreshes: fill.NewLimiter(cfg.MaxRefreshes)}
	if cfg.MaxFills > 0 {
		n.fills = fill.NewLimiter(cfg.MaxFills)
	}
	var err error
	n.metrics, err = newMetrics(cfg.Registerer, &metricSources{view: &n.view, members: &n.members,
		groups: n.groups.stats, fills: n.fills, refreshes: n.refreshes})
	if err != nil {
		return nil, err
	}
	lis, err := n.listenPeers()
	if err != nil {
		n.metrics.unregister()
		return nil, err
	}
	if err := n.buildParts(); err != nil {
		lis.Close()
		n.metrics.unregister()
		return nil, err
	}
	n.servePeers(lis)
	if err := n.join(); err != nil {
		n.stopPeers(context.Background())
		n.stopClock()
		n.metrics.unregister()
		return nil, err
	}
	return n, nil
}

// listenPeers binds the peer port and fixes the address peers dial.
func (n *Node) listenPeers() (net.Listener, error) {
	ip := n.net.AdvertiseIP()
	if ip == "" {
		var err error
		if ip, err = advertiseAddr(n.cfg); err != nil {
			return nil, err
		}
	}
	lis, err := n.net.ListenPeers(n.cfg.BindAddr, n.cfg.PeerPort)
	if err != nil {
		return nil, fmt.Errorf("corral: listen for peers: %w", err)
	}
	n.peerAddr = net.JoinHostPort(ip, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))
	return lis, nil
}

// buildParts builds the cluster's parts, each with what it needs, in the order they need
// each other, and the environment every group is built with.
func (n *Node) buildParts() error {
	cfg := &n.cfg
	n.tracer = tracing.New(cfg.TracerProvider, tracing.Keys(cfg.TraceKeys), "")
	n.clock, n.stopClock = n.net.Clock()
	n.versions = version.New(cfg.Name, time.Now)
	n.tags = fill.NewTags(fill.TagsConfig{})
	n.waits = fill.NewWaitGraph(n.resolveWaits)
	n.limits = limit.Checker{MaxValueBytes: cfg.MaxValueBytes, Hit: n.metrics.limits.hit}
	msgSize := cfg.MaxValueBytes + envelope
	var serverTLS, clientTLS *tls.Config
	if cfg.PeerTLS != nil {
		v := &peertls.Verifier{Members: viewkeeper.CertMembers(&n.view, &n.members), Refused: n.metrics.refuse, Log: n.log}
		serverTLS, clientTLS = v.Configs(cfg.PeerTLS)
	}
	var err error
	n.client, err = transport.NewClient(transport.ClientConfig{
		TLS: clientTLS, MaxMessageSize: msgSize, CallTimeout: cfg.PeerTimeout,
		SilentPeerTimeout: cfg.SilentPeerTimeout, OnCall: n.metrics.peerCall, Dialer: n.net.Dial(),
		TracerProvider: cfg.TracerProvider,
	})
	if err != nil {
		n.stopClock()
		return fmt.Errorf("corral: peer transport: %w", err)
	}
	n.metrics.client.Store(n.client)
	n.router = route.New(route.Config{View: &n.view, Client: n.client, Clock: n.versions, Log: n.log,
		LocalFallback: cfg.LocalFallback, PeerAddr: n.peerAddr, Started: n.started, Leaving: &n.state.Leaving})
	n.writer = write.New(write.Config{Self: cfg.Name, View: &n.view, Router: n.router, Client: n.client,
		Clock: n.versions, Log: n.log, Live: n.members.Live, LiveCount: n.members.LiveCount, PeerTLS: cfg.PeerTLS != nil, PeerTimeout: cfg.PeerTimeout,
		Tags: n.tags})
	n.keeper = viewkeeper.New(viewkeeper.Config{Self: cfg.Name, PeerAddr: n.peerAddr, PeerTLS: cfg.PeerTLS != nil,
		PeekWindow: cfg.PeekWindow, Ring: ring.DefaultConfig(), View: &n.view, Membership: &n.members,
		Client: n.client, Router: n.router, Writer: n.writer, Groups: n.groups.forWrites, Log: n.log,
		Moved: n.groups.viewChanged, Changed: n.changed})
	var auto func(name string) error
	if cfg.AutoGroup != nil {
		auto = func(name string) error { return cfg.AutoGroup(n, name) }
	}
	n.groups.init(cfg.Name, auto, &n.state.Leaving, &n.limits, n.clock, n.log)
	n.owner = owner.New(owner.Config{Self: cfg.Name, PeerAddr: n.peerAddr, View: &n.view, Clock: n.versions,
		Writer: n.writer, Waits: n.waits, Log: n.log, PeerTLS: cfg.PeerTLS != nil, AllowNonMemberPeers: cfg.AllowNonMemberPeers,
		PeekWindow: cfg.PeekWindow, Members: n.members.LiveAndClaimants, Groups: &n.groups, Limits: &n.limits,
		Reconciled: n.keeper.Reconciled, State: &n.state, Refused: n.metrics.refuse, Received: n.metrics.received,
		Purged: n.metrics.purges.Inc})
	n.mover = handoff.New(handoff.Config{View: &n.view, Router: n.router, Client: n.client, Clock: n.versions,
		Log: n.log, PeekWindow: cfg.PeekWindow, PeekTimeout: cfg.PeekTimeout, AskedAt: n.owner.AskedAt,
		Sent: n.metrics.sent, Tags: n.tags})
	n.server, err = transport.NewServer(n.owner, transport.ServerConfig{TLS: serverTLS, MaxMessageSize: msgSize,
		Logger: n.log, OnLimit: n.metrics.limits.hit, TracerProvider: cfg.TracerProvider, Lateness: n.client.Lateness})
	if err != nil {
		n.client.Close()
		n.stopClock()
		return fmt.Errorf("corral: peer transport: %w", err)
	}
	n.env = group.Env{
		Self: cfg.Name, View: &n.view, State: &n.state,
		Router: n.router, Client: n.client, Writer: n.writer, Mover: n.mover, Versions: n.versions,
		Waits: n.waits, Tags: n.tags, Limits: &n.limits,
		Refreshes: n.refreshes, Fills: n.fills, Clock: n.clock, Rand: n.rand.float(), Log: n.log, Tracer: n.tracer,
		PeerTimeout: cfg.PeerTimeout, PeekWindow: cfg.PeekWindow, PeekTimeout: cfg.PeekTimeout, AskedAt: n.owner.AskedAt,
		NearBytes: cfg.NearBytes, NearTTL: cfg.NearTTL, NearPromote: cfg.NearPromote,
		OnFill: n.metrics.fillObserved, Received: n.metrics.received, Sent: n.metrics.sent,
	}
	return nil
}

// servePeers serves the owner's side on lis until stopPeers.
func (n *Node) servePeers(lis net.Listener) {
	go func() {
		defer close(n.serverDone)
		if err := n.server.Serve(lis); err != nil {
			n.log.Error("corral: peer server stopped", "err", err)
		}
	}()
}

// join starts the membership, which joins the seeds (in the background when none answers),
// and makes the first view from what it knows.
func (n *Node) join() error {
	cfg := &n.cfg
	pc := cfg.membershipConfig()
	pc.AdvertiseAddr, _, _ = net.SplitHostPort(n.peerAddr)
	if n.rand != nil {
		pc.Rand = n.rand.child()
	}
	pc.Meta = peer.Meta{PeerAddr: n.peerAddr, PeerTLS: cfg.PeerTLS != nil, StartedAt: n.started}
	pc.Logger = n.log
	pc.OnChange, pc.OnEvent = n.keeper.SetMembers, n.keeper.Event
	pc.LocalState, pc.MergeState = n.versions.LocalState, n.versions.MergeState
	tr, port, err := n.net.Gossip(cfg.BindAddr, cfg.GossipPort)
	if err != nil {
		return fmt.Errorf("corral: membership: %w", err)
	}
	if tr != nil {
		pc.Transport, pc.BindPort = tr, port
		pc.NoCompression = true // no bandwidth to save in memory
	}
	members, err := peer.New(pc)
	if err != nil {
		return fmt.Errorf("corral: membership: %w", err)
	}
	// Peers may call in, and the membership call back, before it is recorded here: the keeper
	// reads the list it may have missed once it is.
	n.members.Set(members)
	n.keeper.Start()
	return nil
}

// changed is the keeper's news of a view whose member set changed: the user's OnChange.
func (n *Node) changed(v *view.View) {
	if n.cfg.OnChange != nil {
		n.cfg.OnChange(members(v.List))
	}
}

// resolveWaits asks the member at t.Where what its fill of t waits on, for the wait graph.
func (n *Node) resolveWaits(ctx context.Context, t fill.WaitTarget) ([]fill.WaitTarget, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.PeerTimeout)
	defer cancel()
	resp, err := n.client.WaitsFor(ctx, t.Where, &peerpb.WaitsForRequest{
		Header: n.router.Header(context.Background()), Group: t.Cache, Key: []byte(t.Key),
	})
	if err != nil {
		return nil, err
	}
	var out []fill.WaitTarget
	for _, w := range resp.GetWaits() {
		where := w.GetAddr()
		if where == n.peerAddr {
			where = ""
		}
		out = append(out, fill.WaitTarget{Cache: w.GetGroup(), Key: string(w.GetKey()), Where: where})
	}
	return out, nil
}

// Name returns this member's name.
func (n *Node) Name() string { return n.cfg.Name }

// GossipAddr returns the "ip:port" gossip actually bound and advertises, usable as another
// node's Join seed.
func (n *Node) GossipAddr() string { return n.members.Get().GossipAddr() }

// PeerAddr returns the "ip:port" of the peer server.
func (n *Node) PeerAddr() string { return n.peerAddr }

// Members returns the current view, self included, sorted by Name.
func (n *Node) Members() []Member { return members(n.view.Load().List) }

// Owner returns the member this node's ring routes key to.
func (n *Node) Owner(key string) Member {
	v := n.view.Load()
	if st, ok := v.Members[v.Owner(key)]; ok {
		return Member(st.Member)
	}
	return Member{}
}

// Epoch identifies the member set of this node's view: equal views have equal epochs.
func (n *Node) Epoch() uint64 { return n.view.Load().Ring.Epoch() }

// Shares returns the fraction of the ring each member owns in this node's view.
func (n *Node) Shares() map[string]float64 { return n.view.Load().Ring.Shares() }

// Ready reports whether the node serves: not closing. (Joined-ness is the caller's policy:
// compare len(Members()) with what it expects.)
func (n *Node) Ready() bool { return !n.state.Leaving.Load() }

// JoinRefusals returns the seeds whose last join attempt was turned away, sorted by address,
// each with this node's reading of why (another cluster label, likely, or another gossip
// key; see peer.JoinRefusedError). It is empty when no seed refuses this node: joined, or
// not yet reached. corral_join_refused_total counts every refusal.
func (n *Node) JoinRefusals() []*peer.JoinRefusedError {
	if m := n.members.Get(); m != nil {
		return m.JoinRefusals()
	}
	return nil
}

// Stats returns the counters of every group on this node, by group name.
func (n *Node) Stats() map[string]GroupStats { return n.groups.stats() }

// members returns ms as the public type.
func members(ms []view.Member) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member(m)
	}
	return out
}

// Close leaves the cluster gracefully: it stops being ready and takes no more writes, tells
// the cluster it is leaving, pushes every entry it holds that may still be served (fresh,
// stale within its grace, a remembered not-found) to the key's new owner (the owner once it
// is gone) while it still serves, stops serving from its stores (its own Gets ask the other
// members from then on), leaves the gossip cluster (peers record Left, not Dead, and route
// to the new owners), answers the new owners' warm pulls for Config.DrainTimeout, and stops;
// after that every call returns ErrClosed. ctx bounds the whole; when it ends, Close stops
// at once. Close is safe to call more than once; later calls return the first call's result.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx, true) })
	return n.closeErr
}

// kill stops the node at once, without leaving or handing off: peers find out only through
// failure detection, as when a process is killed (package internal/crash). Kill after Close
// (or Close after Kill) does nothing.
func (n *Node) kill() {
	n.closeOnce.Do(func() {
		n.state.Closed.Store(true)
		n.closeErr = n.close(context.Background(), false)
	})
}

func (n *Node) close(ctx context.Context, graceful bool) error {
	n.state.Leaving.Store(true)
	defer n.state.Closed.Store(true)
	var errs []error
	if graceful {
		errs = n.leave(ctx)
	} else {
		n.stopServing()
	}
	if err := n.members.Get().Close(); err != nil {
		errs = append(errs, fmt.Errorf("membership: %w", err))
	}
	n.keeper.Close()
	n.router.Close()
	n.stopPeers(ctx)
	errs = append(errs, n.groups.close(ctx)...)
	for _, st := range n.view.Load().Members {
		st.Cancel() // the view changes no more: requests in flight see every member gone
	}
	n.stopClock()
	n.metrics.unregister()
	return errors.Join(errs...)
}

// leave is the graceful part of Close: hand off, stop serving, leave the gossip cluster and
// drain.
func (n *Node) leave(ctx context.Context) []error {
	var errs []error
	members := n.members.Get()
	alone := len(n.view.Load().List) <= 1
	var sent handoff.Sent
	if !alone {
		// Hand off before leaving, while peers still route here: the entries are with their
		// new owners before any Get reaches them there. Members handing off at the same time
		// are told apart by the flag, and take none of each other's entries.
		if err := members.StartLeaving(ctx); err != nil && !errors.Is(err, peer.ErrClosed) {
			errs = append(errs, fmt.Errorf("announce leaving: %w", err))
		}
		var err error
		if sent, err = n.mover.Send(ctx, n.groups.forHandoff(), nil); err != nil {
			errs = append(errs, fmt.Errorf("hand-off: %w", err))
		}
	}
	// Stop serving from the stores before leaving, while every writer still tells this node:
	// once a writer's view has dropped it, no write reaches its copies. From here no write is
	// applied here: writers go to the keys' next owners.
	n.stopServing()
	if !alone {
		// The writes applied here while the entries were on their way (a value a Set or
		// FillSet made, in a group with no loader, would be lost with this node).
		if _, err := n.mover.Send(ctx, n.groups.forHandoff(), sent); err != nil {
			errs = append(errs, fmt.Errorf("hand-off, last round: %w", err))
		}
	}
	if err := members.Leave(ctx); err != nil && !errors.Is(err, peer.ErrClosed) {
		errs = append(errs, fmt.Errorf("leave: %w", err))
	}
	n.state.Left.Store(true)
	if n.cfg.DrainTimeout > 0 && !alone { // with no peers there is no one to drain for
		t := time.NewTimer(n.cfg.DrainTimeout)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return errs
}

// stopServing ends reads from this node's stores: peers' Gets, Sets, Removes and Leases are
// refused as "leaving" (they go to the key's next owner, which holds the hand-off), and this
// node's own Gets and Leases go to the other members. Warm pulls are still answered: their
// copies are checked by whoever takes them. A stopped view makes the hit path see it at once
// (group.Group.Hit).
func (n *Node) stopServing() {
	n.state.Writes.Shut() // waits for the writes being applied here
	n.state.Draining.Store(true)
	n.keeper.Stop()
}

// stopPeers stops the peer server, within a second of ctx, and the peer client.
func (n *Node) stopPeers(ctx context.Context) {
	stopCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	n.server.Stop(stopCtx)
	<-n.serverDone
	n.client.Close()
}
