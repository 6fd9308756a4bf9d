package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Node is one member of a corral cluster: gossip membership, the peer gRPC server and client,
// the protocol's rooms (owner, route, write, handoff) and the groups registered on it. Start it
// with Start and stop it with Close.
type Node struct {
	cfg       Config
	log       *slog.Logger
	ringCfg   ring.Config
	clock     fill.Clock
	stopClock func()
	rand      *lockedRand // Config.Rand, or nil
	refreshes *fill.Limiter
	fills     *fill.Limiter // nil = unbounded
	metrics   *metrics

	lis        net.Listener
	server     *transport.Server
	serverDone chan struct{}
	client     *transport.Client
	members    *peer.Membership
	peerAddr   string    // the "ip:port" peers dial, fixed at Start
	started    time.Time // when Start ran: this life of the member (its gossip meta's StartedAt)

	versions *version.Clock  // orders writes (package version)
	tags     *fill.Tags      // the tags of every group's values, and their purges (RemoveByTag)
	router   *route.Router   // owners of keys, failover, breakers (package route)
	waits    *fill.WaitGraph // fills waiting on fills, here and through peers
	writer   *write.Writer   // writes and their telling (package write)
	mover    *handoff.Mover  // hand-offs and warm pulls (package handoff)
	owner    *owner.Server   // the owner's side of the peer protocol (package owner)

	view atomic.Pointer[view.View]
	// viewMu serialises view changes (membership callbacks, reconciliations and Close), and
	// guards members while Start sets it, and the fields below.
	viewMu      sync.Mutex
	lastMembers []peer.Member        // the membership's last list
	failedAt    map[string]time.Time // members declared dead, and when (see reconcile.go)
	pending     map[string]bool      // members back from the dead, kept out of the ring until reconciled
	warnedTLS   map[string]bool      // members logged once for a peer TLS that differs from this node's
	unadmitted  map[string]string    // members whose peer TLS is being checked, or failed (see tls.go)
	admitted    map[string]string    // members whose peer TLS completed, with the address checked

	recCtx    context.Context // ends the reconciliations at Close
	recCancel context.CancelFunc
	recWG     sync.WaitGroup

	recMu sync.Mutex
	// guards recGroups: the groups each pending member has exchanged with this node
	recGroups map[string]map[string]bool

	// mu guards groups.
	mu     sync.RWMutex
	groups map[string]Group

	leaving   atomic.Bool     // Close began: not ready, new writes fail, no hand-off is taken
	writes    owner.WriteGate // shut by stopServing: no write is applied here as owner after it
	draining  atomic.Bool     // handed off: peers get warm pulls only, and this node's own Gets go to other members (view.Stopped)
	left      atomic.Bool     // left the gossip cluster: its view is no longer kept up
	closed    atomic.Bool     // Close returned, or the node was killed: every call returns ErrClosed
	closeOnce sync.Once
	closeErr  error
}

// Start starts n, a zero Node, as the member cfg describes: it binds the peer gRPC port and
// the gossip port, and joins the seeds in cfg.Join (a node with no seeds is a one-node cluster
// that others may join). Joining is retried in the background when no seed answers at first.
// A Node is started once; one whose Start failed is not used again.
//
// Start works on a Node its caller holds already, rather than returning a new one, so that
// the callbacks of cfg may name the caller's handle of it from the first request on.
func (n *Node) Start(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	var advertise string
	if cfg.Host != nil {
		advertise = cfg.Host.IP()
	} else {
		var err error
		if advertise, err = advertiseAddr(cfg); err != nil {
			return err
		}
	}
	var err error
	n.cfg = cfg
	n.log = cfg.Logger.With("node", cfg.Name)
	n.ringCfg = ring.DefaultConfig()
	n.refreshes = fill.NewLimiter(cfg.MaxRefreshes)
	n.groups = make(map[string]Group)
	n.serverDone = make(chan struct{})
	n.rand = newLockedRand(cfg.Rand)
	n.started = time.Now()
	n.versions = version.New(cfg.Name, time.Now)
	n.tags = fill.NewTags(fill.TagsConfig{})
	n.waits = fill.NewWaitGraph(n.resolveWaits)
	n.recCtx, n.recCancel = context.WithCancel(context.Background())
	if cfg.MaxFills > 0 {
		n.fills = fill.NewLimiter(cfg.MaxFills)
	}
	n.metrics, err = newMetrics(n, cfg.Registerer)
	if err != nil {
		return err
	}

	var lis net.Listener
	if cfg.Host != nil {
		lis, err = cfg.Host.Listen(cfg.PeerPort)
	} else {
		lis, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.PeerPort)))
	}
	if err != nil {
		n.metrics.unregister()
		return fmt.Errorf("corral: listen for peers: %w", err)
	}
	n.lis = lis
	peerAddr := net.JoinHostPort(advertise, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))
	n.peerAddr = peerAddr
	msgSize := cfg.MaxValueBytes + envelope
	var serverTLS, clientTLS *tls.Config
	if cfg.PeerTLS != nil {
		serverTLS, clientTLS = n.peerTLSConfigs(cfg.PeerTLS)
	}
	cc := transport.ClientConfig{
		TLS: clientTLS, MaxMessageSize: msgSize, CallTimeout: cfg.PeerTimeout,
		SilentPeerTimeout: cfg.SilentPeerTimeout, OnCall: n.metrics.peerCall,
	}
	if cfg.Host != nil {
		cc.Dialer = cfg.Host.DialContext
	}
	n.client, err = transport.NewClient(cc)
	if err == nil {
		n.router = route.New(route.Config{View: &n.view, Client: n.client, Clock: n.versions, Log: n.log,
			LocalFallback: cfg.LocalFallback, PeerAddr: peerAddr, Started: n.started, Leaving: &n.leaving})
		n.writer = write.New(write.Config{Self: cfg.Name, View: &n.view, Router: n.router, Client: n.client,
			Clock: n.versions, Log: n.log, Live: n.liveMembers, PeerTLS: cfg.PeerTLS != nil, PeerTimeout: cfg.PeerTimeout,
			Tags: n.tags})
		n.owner = owner.New(owner.Config{Self: cfg.Name, PeerAddr: peerAddr, View: &n.view, Clock: n.versions,
			Writer: n.writer, Waits: n.waits, Log: n.log, PeerTLS: cfg.PeerTLS != nil, AllowNonMemberPeers: cfg.AllowNonMemberPeers,
			PeekWindow: cfg.PeekWindow, Members: n.membersAndClaimants, Lookup: n.ownerLookup, Serve: n.ownerServe,
			CheckKey: n.CheckKey, Reconciled: n.reconciledGroup, Leaving: &n.leaving, Draining: &n.draining, Left: &n.left, Writes: &n.writes,
			Refused: func(reason string) { n.metrics.refused.WithLabelValues(reason).Inc() }, Received: n.HandoffReceived,
			Purged: n.metrics.purges.Inc})
		n.mover = handoff.New(handoff.Config{View: &n.view, Router: n.router, Client: n.client, Clock: n.versions,
			Log: n.log, PeekWindow: cfg.PeekWindow, PeekTimeout: cfg.PeekTimeout, AskedAt: n.owner.AskedAt,
			Sent: n.HandoffSent, Tags: n.tags})
		n.server, err = transport.NewServer(n.owner, transport.ServerConfig{TLS: serverTLS, MaxMessageSize: msgSize, Logger: n.log,
			OnLimit: n.metrics.limits.hit})
		if err != nil {
			n.client.Close()
		}
	}
	if err != nil {
		lis.Close()
		n.metrics.unregister()
		return fmt.Errorf("corral: peer transport: %w", err)
	}
	go func() {
		defer close(n.serverDone)
		if err := n.server.Serve(lis); err != nil {
			n.log.Error("corral: peer server stopped", "err", err)
		}
	}()

	if cfg.Host != nil {
		// A ticker per node would wake every simulated node every millisecond.
		n.clock, n.stopClock = fill.NewSystemClock(), func() {}
	} else {
		cc := fill.NewCoarseClock(time.Millisecond)
		n.clock, n.stopClock = cc, cc.Stop
	}
	n.view.Store(view.Alone(cfg.Name, peerAddr, n.ringCfg))

	var seeds []string
	for _, s := range cfg.Join {
		if s != "" {
			seeds = append(seeds, s)
		}
	}
	pc := peer.Config{
		Name:                cfg.Name,
		BindAddr:            cfg.BindAddr,
		BindPort:            cfg.GossipPort,
		AdvertiseAddr:       advertise,
		Meta:                peer.Meta{PeerAddr: peerAddr, PeerTLS: cfg.PeerTLS != nil, StartedAt: n.started},
		Seeds:               seeds,
		SecretKey:           cfg.SecretKey,
		SecondaryKeys:       cfg.SecondaryKeys,
		AcceptPlaintext:     cfg.AcceptPlaintextGossip,
		SendPlaintext:       cfg.SendPlaintextGossip,
		Label:               cfg.Label,
		ProbeInterval:       cfg.ProbeInterval,
		ProbeTimeout:        cfg.ProbeTimeout,
		GossipInterval:      cfg.GossipInterval,
		PushPullInterval:    cfg.PushPullInterval,
		SuspicionMult:       cfg.SuspicionMult,
		DeadNodeReclaimTime: cfg.DeadNodeReclaimTime,
		RejoinInterval:      cfg.RejoinInterval,
		ReconnectInterval:   cfg.ReconnectInterval,
		Logger:              n.log,
		OnChange:            n.setMembers,
		OnEvent:             n.memberEvent,
		LocalState:          n.versions.LocalState,
		MergeState:          n.versions.MergeState,
	}
	if n.rand != nil {
		pc.Rand = n.rand.child()
	}
	if cfg.Host != nil {
		tr, terr := cfg.Host.NewTransport(cfg.GossipPort)
		if terr != nil {
			err = terr
		} else {
			pc.Transport, pc.BindPort = tr, tr.Port()
			pc.NoCompression = true // no bandwidth to save in memory
		}
	}
	var members *peer.Membership
	if err == nil {
		members, err = peer.New(pc)
	}
	if err != nil {
		n.stopTransport(context.Background())
		n.stopClock()
		n.metrics.unregister()
		return fmt.Errorf("corral: membership: %w", err)
	}
	// Peers may call in (and read n.members, see liveMembers) while Start still runs: set it
	// under viewMu.
	n.viewMu.Lock()
	n.members = members
	n.viewMu.Unlock()
	// OnChange may have run before n.members was set; read the list under viewMu, so a newer
	// list delivered meanwhile is not overwritten by this older read.
	n.setMembers(nil)
	return nil
}

// setMembers is the membership callback: it rebuilds the view. Calls are serialised by the
// peer package; viewMu also orders them against Close.
// A nil ms means "read the current list".
func (n *Node) setMembers(ms []peer.Member) {
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	if ms == nil {
		if n.members == nil {
			return
		}
		ms = n.members.Members()
	}
	n.lastMembers = ms
	n.rebuildLocked()
}

// rebuildLocked makes the view from the membership's last list, keeping out the members that
// are being reconciled. n.viewMu must be held.
func (n *Node) rebuildLocked() {
	ms := n.lastMembers
	now := time.Now()
	exclude := n.reconcileNewcomersLocked(ms, now)
	// A member whose peer port speaks TLS when this one's does not, or the other way round,
	// can be neither asked nor told: it is never an owner here (and never a hand-off target).
	tls := n.cfg.PeerTLS != nil
	for _, m := range ms {
		if m.Name != n.cfg.Name && m.Meta.PeerTLS != tls {
			exclude[m.Name] = view.ExcludedPeerTLS
			if !n.warnedTLS[m.Name] {
				if n.warnedTLS == nil {
					n.warnedTLS = make(map[string]bool)
				}
				n.warnedTLS[m.Name] = true
				n.log.Warn("corral: a member's peer port does not speak this node's protocol: it is never an owner here",
					"member", m.Name, "its_peer_tls", m.Meta.PeerTLS, "this_peer_tls", tls)
			}
		}
	}
	n.admitNewcomersLocked(exclude)
	cur := n.view.Load()
	nv, gone, err := view.Next(cur, ms, n.ringCfg, now, n.cfg.PeekWindow, exclude)
	if err != nil {
		n.log.Error("corral: membership change ignored", "err", err)
		return
	}
	n.view.Store(nv)
	n.leasesMoved(nv)
	for _, st := range gone {
		if st.Name == nv.Self {
			continue
		}
		st.Cancel()
		if _, still := nv.Members[st.Name]; !still || nv.Members[st.Name].PeerAddr != st.PeerAddr {
			n.client.Forget(st.PeerAddr)
		}
		if _, still := nv.Members[st.Name]; !still {
			// Out of the view, it is no stranger either: a member gone from every view is
			// not one a write must reach (a new life that asks again is remembered again).
			n.writer.Strangers().Forget(st.Name)
		}
	}
	for name, st := range nv.Members {
		if name == nv.Self || cur.Members[name] == st {
			continue
		}
		_, was := cur.Members[name]
		_, departed := cur.Departed[name]
		if was || departed {
			// A name seen before, in a new life (restarted in place, or back after it was
			// found dead): what requests learnt of its old life — a tripped breaker, a
			// connection in backoff to its address — would keep it unreachable here for up
			// to breakerMax, and its keys on their successors. Dial it afresh.
			n.router.Breakers().Reset(st.PeerAddr)
			n.client.Forget(st.PeerAddr)
		}
		switch nv.Excluded[name] {
		case view.ExcludedPeerTLS, view.ExcludedTLSFailed: // it cannot be asked
			continue
		}
		// New in the view, or in a new life: connect now, not on the first question, which
		// is often its warm pull's or ours, with only a peek's short time to wait.
		n.client.Prepare(st.PeerAddr)
	}
	if nv.Ring.Epoch() != cur.Ring.Epoch() {
		n.log.Info("corral: members changed", "members", len(nv.List), "epoch", nv.Ring.Epoch())
		if n.cfg.OnChange != nil {
			n.cfg.OnChange(slices.Clone(nv.List))
		}
	}
}

func (n *Node) memberEvent(e peer.Event) {
	n.log.Info("corral: member "+e.Kind.String(), "member", e.Member.Name, "addr", e.Member.GossipAddr)
	switch e.Kind {
	case peer.EventFail:
		n.memberFailed(e.Member.Name)
	case peer.EventLeave:
		n.writer.Departures().Left(e.Member.Name, time.Now())
	case peer.EventJoin:
		n.writer.Departures().Back(e.Member.Name)
	}
}

// membership returns the membership, nil while Start runs: peers may call in before it is
// set, so it is read under viewMu.
func (n *Node) membership() *peer.Membership {
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	return n.members
}

// membersAndClaimants returns the live set of the membership and its claimants (members
// back at a new address it does not admit yet), nil while Start runs.
func (n *Node) membersAndClaimants() []peer.Member {
	if members := n.membership(); members != nil {
		return slices.Concat(members.Members(), members.Claimants())
	}
	return nil
}

// liveMembers returns the live set of the membership, nil while Start runs.
func (n *Node) liveMembers() []peer.Member {
	if members := n.membership(); members != nil {
		return members.Members()
	}
	return nil
}

// Name returns this member's name.
func (n *Node) Name() string { return n.cfg.Name }

// GossipAddr returns the "ip:port" gossip actually bound and advertises, usable as another
// node's Join seed.
func (n *Node) GossipAddr() string { return n.members.GossipAddr() }

// PeerAddr returns the "ip:port" of the peer gRPC server.
func (n *Node) PeerAddr() string { return n.peerAddr }

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

// Members returns the current view, self included, sorted by Name.
func (n *Node) Members() []view.Member { return slices.Clone(n.view.Load().List) }

// Owner returns the member this node's ring routes key to.
func (n *Node) Owner(key string) view.Member {
	v := n.view.Load()
	if st, ok := v.Members[v.Owner(key)]; ok {
		return st.Member
	}
	return view.Member{}
}

// Epoch identifies the member set of this node's view: equal views have equal epochs.
func (n *Node) Epoch() uint64 { return n.view.Load().Ring.Epoch() }

// Shares returns the fraction of the ring each member owns in this node's view.
func (n *Node) Shares() map[string]float64 { return n.view.Load().Ring.Shares() }

// Ready reports whether the node serves: not closing. (Joined-ness is the caller's policy:
// compare len(Members()) with what it expects.)
func (n *Node) Ready() bool { return !n.leaving.Load() }

// Group returns the group registered as name.
func (n *Node) Group(name string) (Group, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	g, ok := n.groups[name]
	return g, ok
}

func (n *Node) groupList() []Group {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]Group, 0, len(n.groups))
	for _, g := range n.groups {
		out = append(out, g)
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

// Kill stops the node at once, without leaving or handing off: peers find out only through
// failure detection, as when a process is killed. It is for the module's tests, demo and
// test cluster (through package internal/crash); production code calls Close. Kill after
// Close (or Close after Kill) does nothing.
func (n *Node) Kill() {
	n.closeOnce.Do(func() {
		n.closed.Store(true)
		n.closeErr = n.close(context.Background(), false)
	})
}

func (n *Node) close(ctx context.Context, graceful bool) error {
	n.leaving.Store(true)
	defer n.closed.Store(true)
	var errs []error
	if !graceful {
		n.stopServing()
	}
	if graceful {
		alone := len(n.view.Load().List) <= 1
		var sent handoff.Sent
		if !alone {
			// Hand off before leaving, while peers still route here: the entries are with
			// their new owners before any Get reaches them there. Members handing off at the
			// same time are told apart by the flag, and take none of each other's entries.
			if err := n.members.StartLeaving(ctx); err != nil && !errors.Is(err, peer.ErrClosed) {
				errs = append(errs, fmt.Errorf("announce leaving: %w", err))
			}
			var err error
			if sent, err = n.handoff(ctx, nil); err != nil {
				errs = append(errs, fmt.Errorf("hand-off: %w", err))
			}
		}
		// Stop serving from the stores before leaving, while every writer still tells this
		// node: once a writer's view has dropped it, no write reaches its copies. From here
		// no write is applied here: writers go to the keys' next owners.
		n.stopServing()
		if !alone {
			// The writes applied here while the entries were on their way (a value a Set
			// or FillSet made, in a group with no loader, would be lost with this node).
			if _, err := n.handoff(ctx, sent); err != nil {
				errs = append(errs, fmt.Errorf("hand-off, last round: %w", err))
			}
		}
		if err := n.members.Leave(ctx); err != nil && !errors.Is(err, peer.ErrClosed) {
			errs = append(errs, fmt.Errorf("leave: %w", err))
		}
		n.left.Store(true)
		if n.cfg.DrainTimeout > 0 && !alone { // with no peers there is no one to drain for
			t := time.NewTimer(n.cfg.DrainTimeout)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	if err := n.members.Close(); err != nil {
		errs = append(errs, fmt.Errorf("membership: %w", err))
	}
	n.recCancel()
	n.router.Close()
	n.recWG.Wait()
	n.stopTransport(ctx)
	for _, g := range n.groupList() {
		if err := g.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	n.viewMu.Lock()
	for _, st := range n.view.Load().Members {
		st.Cancel()
	}
	n.viewMu.Unlock()
	n.stopClock()
	n.metrics.unregister()
	return errors.Join(errs...)
}

// stopServing ends reads from this node's stores: peers' Gets, Sets, Removes and Leases are
// refused as "leaving" (they go to the key's next owner, which holds the hand-off), and this
// node's own Gets and Leases go to the other members. Warm pulls are still answered: their
// copies are checked by whoever takes them. A new view, stamped anew, makes the hit path
// see it at once (group.Group.Get).
func (n *Node) stopServing() {
	n.writes.Shut() // waits for the writes being applied here
	n.viewMu.Lock()
	defer n.viewMu.Unlock()
	n.draining.Store(true)
	n.view.Store(n.view.Load().Stop())
}

func (n *Node) stopTransport(ctx context.Context) {
	stopCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	n.server.Stop(stopCtx)
	<-n.serverDone
	n.client.Close()
}
