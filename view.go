package corral

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
)

// view is one node's picture of the cluster: the members and the ring over them. It is
// immutable; a membership change swaps in a new view, so the hot path reads it with one
// atomic load.
type view struct {
	self    string
	ring    *ring.Ring
	members map[string]*memberState // live members, by name
	list    []Member                // sorted by name
	// excluded names the live members kept out of the ring, with the reason.
	excluded map[string]string
	// memberIPs holds the IPs of the members and of the ones that departed within
	// PeekWindow, as transport.CallerAddr gives them: peer requests are served for them (see
	// admit.go).
	memberIPs map[netip.Addr]bool

	// history holds the rings this node routed by before ring, newest first, each with the
	// time it was replaced, for PeekWindow: a key's owners on them may still hold it.
	history []pastRing
	// departed holds the members that left the view within PeekWindow, with the time they
	// left: a member that left gracefully answers warm pulls while it drains.
	departed map[string]departedMember
	// stamp marks the entries of the local store this view was found to own (fill's
	// GetStamping): while this view stands, a Get of a stamped key skips the owner lookup.
	// Every view has a stamp of its own, so a new view unstamps every entry at once.
	stamp uint32

	// stopped is set once this node serves nothing from its stores (see Node.stopServing):
	// its own requests go to the other members.
	stopped bool

	// joined is when this node first saw a cluster that was there before it (a member that
	// started no later than this one): for PeekWindow after it, keys this node owns may be
	// held by their owner on the ring without it. Zero for the founding member.
	joined time.Time
}

// nextStamp is the stamp of the view after one stamped s: the next in [1, fill.StampMask].
// A stamp recurs only after 2^30 views, and an entry stamped then and never read since would
// have to outlive them all to be mistaken.
func nextStamp(s uint32) uint32 {
	if s >= fill.StampMask {
		return 1
	}
	return s + 1
}

// pastRing is a ring this node routed by until a membership change.
type pastRing struct {
	ring  *ring.Ring
	until time.Time
}

// departedMember is a member that left the view at a time.
type departedMember struct {
	*memberState
	at time.Time
}

// maxHistory bounds the rings kept: past it, a key whose owner changed more often within
// the window is looked for among every member instead (see peekCandidates).
const maxHistory = 8

// memberState is one live member. gone is cancelled when it leaves the view, which aborts
// requests in flight to it so that they fail over at once instead of waiting out their
// deadline.
type memberState struct {
	Member
	started time.Time   // when its process started, as its meta says
	leaving atomic.Bool // it has started a graceful leave: it is given nothing to keep
	gone    context.Context
	cancel  context.CancelFunc
}

// owner returns the member this view routes key to.
func (v *view) owner(key string) string { return v.ring.Owner(key) }

// lookup returns the live or recently departed member called name, or nil.
func (v *view) lookup(name string) *memberState {
	if st, ok := v.members[name]; ok {
		return st
	}
	if d, ok := v.departed[name]; ok {
		return d.memberState
	}
	return nil
}

// peekCandidates returns the members that may hold key from before a recent membership
// change, to ask before loading it (a warm pull): its owners on the rings of the last
// PeekWindow (the member it moved from, and the ones before it when changes overlapped),
// and, while this node has only just joined a cluster, its owner on the ring without this
// node (its own earlier views, built while it was joining, may not show who held it). moved
// reports whether key's owner changed within the window at all: if none of the candidates
// holds it, it may be anywhere, and the caller asks every member. Nothing for keys whose
// owner did not change.
//
// The time this node joined counts from asked instead when that is later: when a member
// first asked it anything. A node whose admission the others delayed — one back under its
// name at a new address waits for memberlist to forget its old self, a minute or more —
// begins to own keys in their views only then.
func (v *view) peekCandidates(key string, window time.Duration, now, asked time.Time) (cands []*memberState, moved bool) {
	if window < 0 {
		return nil, false
	}
	seen := map[string]bool{v.self: true}
	add := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		moved = true
		if st := v.lookup(name); st != nil {
			cands = append(cands, st)
		}
	}
	for _, h := range v.history {
		if now.Sub(h.until) > window {
			break
		}
		add(h.ring.Owner(key))
	}
	if !v.joined.IsZero() && (now.Sub(v.joined) <= window || now.Sub(asked) <= window) {
		add(v.ring.Without(v.self).Owner(key))
	}
	return cands, moved
}

// others returns the live members other than this node and the ones in skip.
func (v *view) others(skip []*memberState) []*memberState {
	var out []*memberState
	for _, m := range v.list {
		st := v.members[m.Name]
		if m.Name == v.self || slices.Contains(skip, st) {
			continue
		}
		out = append(out, st)
	}
	return out
}

// handoffRing returns the ring without this node, the members in excluded, and every member
// that is leaving: the ring that will route this node's keys once it is gone.
func (v *view) handoffRing(excluded map[string]bool) *ring.Ring {
	r := v.ring.Without(v.self)
	for _, m := range v.list {
		if excluded[m.Name] || v.members[m.Name].leaving.Load() {
			r = r.Without(m.Name)
		}
	}
	return r
}

// nextView builds the view after a membership change. Members that stay keep their
// memberState; the ones that are gone are returned so the caller can cancel them. window is
// Config.PeekWindow: how long replaced rings and departed members are remembered. The
// members in exclude are live but kept out of the ring, each for the reason given (being
// reconciled; a peer port this node cannot speak to).
func nextView(cur *view, ms []peer.Member, rc ring.Config, now time.Time, window time.Duration, exclude map[string]string) (*view, []*memberState, error) {
	names := make([]string, 0, len(ms))
	nv := &view{self: cur.self, members: make(map[string]*memberState, len(ms)), excluded: exclude,
		stamp: nextStamp(cur.stamp), stopped: cur.stopped}
	for _, m := range ms {
		if exclude[m.Name] == "" {
			names = append(names, m.Name)
		}
		mm := memberOf(m)
		st, ok := cur.members[m.Name]
		// A new StartedAt is a new process under the old name and addresses (a restart in
		// place): a new state, so that the old life's calls end and its breaker and
		// connection are dropped (see Node.rebuildLocked).
		if !ok || st.Member != mm || !st.started.Equal(m.Meta.StartedAt) {
			st = &memberState{Member: mm, started: m.Meta.StartedAt}
			st.gone, st.cancel = context.WithCancel(context.Background())
		}
		st.leaving.Store(m.Leaving)
		nv.members[m.Name] = st
		nv.list = append(nv.list, mm)
	}
	slices.SortFunc(nv.list, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	r, err := ring.New(names, rc)
	if err != nil {
		return nil, nil, err
	}
	nv.ring = r

	keep := func(t time.Time) bool { return window >= 0 && now.Sub(t) <= window }
	if r.Epoch() != cur.ring.Epoch() && cur.ring.Len() > 0 {
		nv.history = append(nv.history, pastRing{ring: cur.ring, until: now})
	}
	for _, h := range cur.history {
		if len(nv.history) < maxHistory && keep(h.until) {
			nv.history = append(nv.history, h)
		}
	}
	nv.departed = make(map[string]departedMember)
	for name, d := range cur.departed {
		if _, back := nv.members[name]; !back && keep(d.at) {
			nv.departed[name] = d
		}
	}
	var gone []*memberState
	for name, st := range cur.members {
		if nst, ok := nv.members[name]; !ok || nst != st {
			gone = append(gone, st)
			if !ok && name != cur.self {
				nv.departed[name] = departedMember{memberState: st, at: now}
			}
		}
	}

	nv.memberIPs = make(map[netip.Addr]bool, 2*len(nv.members))
	for _, st := range nv.members {
		nv.memberIPs[transport.HostAddr(st.PeerAddr)], nv.memberIPs[transport.HostAddr(st.GossipAddr)] = true, true
	}
	for _, d := range nv.departed {
		nv.memberIPs[transport.HostAddr(d.PeerAddr)], nv.memberIPs[transport.HostAddr(d.GossipAddr)] = true, true
	}
	delete(nv.memberIPs, netip.Addr{})

	nv.joined = cur.joined
	if self, ok := nv.members[nv.self]; ok && nv.joined.IsZero() {
		for _, st := range nv.members {
			// At or before: members started at one instant (a simulation's do, on a clock
			// that has not moved) each count as having joined the others.
			if st.Name != nv.self && !st.started.IsZero() && !st.started.After(self.started) {
				nv.joined = now
				break
			}
		}
	}
	return nv, gone, nil
}
