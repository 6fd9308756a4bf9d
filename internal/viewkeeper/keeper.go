package viewkeeper

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
)

// Config is what a Keeper keeps the view with. Every field is required but the hooks.
type Config struct {
	Self       string                     // this node's name
	PeerAddr   string                     // this node's peer address
	PeerTLS    bool                       // this node's peer port speaks mutual TLS
	PeekWindow time.Duration              // how long after a change a new owner asks the previous owners (view.Next)
	Ring       ring.Config                // how the views' rings are made
	View       *atomic.Pointer[view.View] // where the current view is kept: the Keeper writes it, everyone reads it
	Membership *Membership                // the node's membership, once it has started
	Client     *transport.Client          // its connections to members that leave are forgotten, to new ones made
	Router     *route.Router              // its breakers of members back in a new life are reset
	Writer     *write.Writer              // strangers, departures, and the exchange of writes with a member back
	Groups     func() []write.Group       // the node's groups, whose writes a member back exchanges
	Log        *slog.Logger

	// Moved, if set, is called with each new view, under the Keeper's lock: the node ends
	// the leases of keys whose owner changed. Changed, if set, is called after a view whose
	// member set changed (a new ring epoch), from one goroutine at a time.
	Moved, Changed func(v *view.View)
}

// Keeper keeps a node's view (see the package documentation). Its methods are safe for
// concurrent use.
type Keeper struct {
	cfg Config

	// mu serialises view changes (membership callbacks, reconciliations, TLS checks, Stop)
	// and guards the fields below.
	mu          sync.Mutex
	lastMembers []peer.Member        // the membership's last list
	failedAt    map[string]time.Time // members declared dead, and when (see reconcile.go)
	pending     map[string]bool      // members back from the dead, kept out of the ring until reconciled
	warnedTLS   map[string]bool      // members logged once for a peer TLS that differs from this node's
	unadmitted  map[string]string    // members whose peer TLS is being checked, or failed (see tls.go)
	admitted    map[string]string    // members whose peer TLS completed, with the address checked

	// ctx ends the reconciliations and TLS checks at Close; wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	recMu sync.Mutex
	// guards recGroups: the groups each pending member has exchanged with this node
	recGroups map[string]map[string]bool
}

// New returns a Keeper whose view is this node alone.
func New(cfg Config) *Keeper {
	k := &Keeper{cfg: cfg}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	cfg.View.Store(view.Alone(cfg.Self, cfg.PeerAddr, cfg.Ring))
	return k
}

// Start reads the membership's list, which SetMembers may have been called with before the
// membership was known: peers may call in, and the membership call back, while it starts.
func (k *Keeper) Start() { k.SetMembers(nil) }

// SetMembers is the membership's OnChange: it makes the next view from ms (nil: the
// membership's current list). The membership serialises its calls; the Keeper's lock orders
// them against the rest.
func (k *Keeper) SetMembers(ms []peer.Member) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ms == nil {
		m := k.cfg.Membership.Get()
		if m == nil {
			return
		}
		// Read under mu, so a newer list delivered meanwhile is not overwritten by this one.
		ms = m.Members()
	}
	k.lastMembers = ms
	k.rebuildLocked()
}

// Event is the membership's OnEvent.
func (k *Keeper) Event(e peer.Event) {
	k.cfg.Log.Info("corral: member "+e.Kind.String(), "member", e.Member.Name, "addr", e.Member.GossipAddr)
	switch e.Kind {
	case peer.EventFail:
		k.memberFailed(e.Member.Name)
	case peer.EventLeave:
		k.cfg.Writer.Departures().Left(e.Member.Name, time.Now())
	case peer.EventJoin:
		k.cfg.Writer.Departures().Back(e.Member.Name)
	}
}

// Stop makes the view a stopped one (view.View.Stop): the node serves nothing from its
// stores any more, and its own requests go to the other members.
func (k *Keeper) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cfg.View.Store(k.cfg.View.Load().Stop())
}

// Close ends the reconciliations and TLS checks under way and waits for them. Call it once
// the membership is closed: the view changes no more after it.
func (k *Keeper) Close() {
	k.cancel()
	k.wg.Wait()
}

// rebuildLocked makes the view from the membership's last list, keeping out the members that
// are being reconciled or TLS-checked. k.mu must be held.
func (k *Keeper) rebuildLocked() {
	ms := k.lastMembers
	now := time.Now()
	exclude := k.reconcileNewcomersLocked(ms, now)
	// A member whose peer port speaks TLS when this one's does not, or the other way round,
	// can be neither asked nor told: it is never an owner here (and never a hand-off target).
	for _, m := range ms {
		if m.Name != k.cfg.Self && m.Meta.PeerTLS != k.cfg.PeerTLS {
			exclude[m.Name] = view.ExcludedPeerTLS
			if !k.warnedTLS[m.Name] {
				if k.warnedTLS == nil {
					k.warnedTLS = make(map[string]bool)
				}
				k.warnedTLS[m.Name] = true
				k.cfg.Log.Warn("corral: a member's peer port does not speak this node's protocol: it is never an owner here",
					"member", m.Name, "its_peer_tls", m.Meta.PeerTLS, "this_peer_tls", k.cfg.PeerTLS)
			}
		}
	}
	k.admitNewcomersLocked(exclude)
	cur := k.cfg.View.Load()
	nv, gone, err := view.Next(cur, ms, k.cfg.Ring, now, k.cfg.PeekWindow, exclude)
	if err != nil {
		k.cfg.Log.Error("corral: membership change ignored", "err", err)
		return
	}
	k.cfg.View.Store(nv)
	if k.cfg.Moved != nil {
		k.cfg.Moved(nv)
	}
	k.forgetGoneLocked(nv, gone)
	k.connectNewLocked(cur, nv)
	if nv.Ring.Epoch() != cur.Ring.Epoch() {
		k.cfg.Log.Info("corral: members changed", "members", len(nv.List), "epoch", nv.Ring.Epoch())
		if k.cfg.Changed != nil {
			k.cfg.Changed(nv)
		}
	}
}

// forgetGoneLocked ends the member states that nv replaced or dropped: their requests in
// flight see them gone, and the connections of members no longer at that address close.
func (k *Keeper) forgetGoneLocked(nv *view.View, gone []*view.MemberState) {
	for _, st := range gone {
		if st.Name == nv.Self {
			continue
		}
		st.Cancel()
		if _, still := nv.Members[st.Name]; !still || nv.Members[st.Name].PeerAddr != st.PeerAddr {
			k.cfg.Client.Forget(st.PeerAddr)
		}
		if _, still := nv.Members[st.Name]; !still {
			// Out of the view, it is no stranger either: a member gone from every view is
			// not one a write must reach (a new life that asks again is remembered again).
			k.cfg.Writer.Strangers().Forget(st.Name)
		}
	}
}

// connectNewLocked connects to every member new to the view, or in a new life, that can be
// asked.
func (k *Keeper) connectNewLocked(cur, nv *view.View) {
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
			// to the breaker's longest wait, and its keys on their successors. Dial it afresh.
			k.cfg.Router.Breakers().Reset(st.PeerAddr)
			k.cfg.Client.Forget(st.PeerAddr)
		}
		switch nv.Excluded[name] {
		case view.ExcludedPeerTLS, view.ExcludedTLSFailed: // it cannot be asked
			continue
		}
		// New in the view, or in a new life: connect now, not on the first question, which
		// is often its warm pull's or ours, with only a peek's short time to wait.
		k.cfg.Client.Prepare(st.PeerAddr)
	}
}

// pause waits d before a check of a member is tried again, and reports false when the
// Keeper closes meanwhile.
func (k *Keeper) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-k.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Membership is a node's membership once it has started (nil before): the view's source,
// and the live set that peers are checked against before the view has caught up.
type Membership struct {
	p atomic.Pointer[peer.Membership]
}

// Set records m, once it has started.
func (m *Membership) Set(p *peer.Membership) { m.p.Store(p) }

// Get returns the membership, nil while the node starts.
func (m *Membership) Get() *peer.Membership { return m.p.Load() }

// Live returns the membership's live set, nil while the node starts.
func (m *Membership) Live() []peer.Member {
	if p := m.Get(); p != nil {
		return p.Members()
	}
	return nil
}

// LiveCount returns the size of the membership's live set, this node included; 0 while the
// node starts.
func (m *Membership) LiveCount() int {
	if p := m.Get(); p != nil {
		return p.NumMembers()
	}
	return 0
}

// LiveAndClaimants returns the live set and its claimants (members back at a new address the
// membership does not admit yet), nil while the node starts.
func (m *Membership) LiveAndClaimants() []peer.Member {
	if p := m.Get(); p != nil {
		return slices.Concat(p.Members(), p.Claimants())
	}
	return nil
}
