package view

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
)

// ErrClosed is the error of a call on a node, or its groups, that the node cannot serve any
// more: it is closing, or closed (package corral's ErrClosed).
var ErrClosed = errors.New("corral: node closed")

// View is one node's picture of the cluster: the members and the ring over them.
type View struct {
	Self    string
	Ring    *ring.Ring
	Members map[string]*MemberState // live members, by name
	List    []Member                // sorted by name
	// Excluded names the live members kept out of the ring, with the reason.
	Excluded map[string]string
	// MemberIPs holds the IPs of the members and of the ones that departed within
	// PeekWindow, as transport.CallerAddr gives them: peer requests are served for them.
	MemberIPs map[netip.Addr]bool

	// history holds the rings this node routed by before Ring, newest first, each with the
	// time it was replaced, for PeekWindow: a key's owners on them may still hold it.
	history []pastRing
	// Departed holds the members that left the view within PeekWindow, with the time they
	// left: a member that left gracefully answers warm pulls while it drains.
	Departed map[string]Departed
	// Stamp marks the entries of the local store this view was found to own (fill's
	// GetStamping): while this view stands, a Get of a stamped key skips the owner lookup.
	// Every view has a stamp of its own, so a new view unstamps every entry at once.
	Stamp uint32

	// Stopped is set once this node serves nothing from its stores (see Stop): its own
	// requests go to the other members.
	Stopped bool

	// joined is when this node first saw a cluster that was there before it (a member that
	// started no later than this one): for PeekWindow after it, keys this node owns may be
	// held by their owner on the ring without it. Zero for the founding member.
	joined time.Time
}

// The reasons a live member is kept out of the ring (View.Excluded), as
// corral_members_excluded says them.
const (
	ExcludedReconciling = "reconciling"              // back from the dead: exchanging the writes it missed
	ExcludedPeerTLS     = "peer TLS differs"         // one of the two runs without peer TLS
	ExcludedTLSPending  = "peer TLS not checked yet" // a new member, checked at once
	ExcludedTLSFailed   = "peer TLS failed"          // no mutual TLS handshake completes with it
)

// Alone returns the first view of the member called self, whose peer port is at peerAddr:
// a cluster of one.
func Alone(self, peerAddr string, rc ring.Config) *View {
	st := newState(Member{Name: self, PeerAddr: peerAddr}, time.Time{})
	r, _ := ring.New([]string{self}, rc)
	return &View{Self: self, Ring: r, Stamp: 1, Members: map[string]*MemberState{self: st}, List: []Member{st.Member}}
}

// Stop returns v as it is once this node serves nothing from its stores, stamped anew, so
// that the hit path sees it at once.
func (v *View) Stop() *View {
	s := *v
	s.Stopped, s.Stamp = true, nextStamp(v.Stamp)
	return &s
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

// maxHistory bounds the rings kept: past it, a key whose owner changed more often within
// the window is looked for among every member instead (see PeekCandidates).
const maxHistory = 8

// Owner returns the member this view routes key to.
func (v *View) Owner(key string) string { return v.Ring.Owner(key) }

// Lookup returns the live or recently departed member called name, or nil.
func (v *View) Lookup(name string) *MemberState {
	if st, ok := v.Members[name]; ok {
		return st
	}
	if d, ok := v.Departed[name]; ok {
		return d.MemberState
	}
	return nil
}

// PeekCandidates returns the members that may hold key from before a recent membership
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
func (v *View) PeekCandidates(key string, window time.Duration, now, asked time.Time) (cands []*MemberState, moved bool) {
	if window < 0 {
		return nil, false
	}
	seen := map[string]bool{v.Self: true}
	add := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		moved = true
		if st := v.Lookup(name); st != nil {
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
		add(v.Ring.Without(v.Self).Owner(key))
	}
	return cands, moved
}

// Others returns the live members other than this node and the ones in skip.
func (v *View) Others(skip []*MemberState) []*MemberState {
	var out []*MemberState
	for _, m := range v.List {
		st := v.Members[m.Name]
		if m.Name == v.Self || slices.Contains(skip, st) {
			continue
		}
		out = append(out, st)
	}
	return out
}

// HandoffRing returns the ring without this node, the members in excluded, and every member
// that is leaving: the ring that will route this node's keys once it is gone.
func (v *View) HandoffRing(excluded map[string]bool) *ring.Ring {
	r := v.Ring.Without(v.Self)
	for _, m := range v.List {
		if excluded[m.Name] || v.Members[m.Name].Leaving.Load() {
			r = r.Without(m.Name)
		}
	}
	return r
}

// Next builds the view after a membership change. Members that stay keep their MemberState;
// the ones that are gone are returned so the caller can cancel them. window is
// PeekWindow: how long replaced rings and departed members are remembered. The members in
// exclude are live but kept out of the ring, each for the reason given (being reconciled; a
// peer port this node cannot speak to).
func Next(cur *View, ms []peer.Member, rc ring.Config, now time.Time, window time.Duration, exclude map[string]string) (*View, []*MemberState, error) {
	names := make([]string, 0, len(ms))
	nv := &View{Self: cur.Self, Members: make(map[string]*MemberState, len(ms)), Excluded: exclude,
		Stamp: nextStamp(cur.Stamp), Stopped: cur.Stopped}
	for _, m := range ms {
		if exclude[m.Name] == "" {
			names = append(names, m.Name)
		}
		mm := Of(m)
		st, ok := cur.Members[m.Name]
		// A new StartedAt is a new process under the old name and addresses (a restart in
		// place): a new state, so that the old life's calls end and its breaker and
		// connection are dropped (the node forgets what it learnt of the old life).
		if !ok || st.Member != mm || !st.Started.Equal(m.Meta.StartedAt) {
			st = newState(mm, m.Meta.StartedAt)
		}
		st.Leaving.Store(m.Leaving)
		nv.Members[m.Name] = st
		nv.List = append(nv.List, mm)
	}
	slices.SortFunc(nv.List, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	r, err := ring.New(names, rc)
	if err != nil {
		return nil, nil, err
	}
	nv.Ring = r

	keep := func(t time.Time) bool { return window >= 0 && now.Sub(t) <= window }
	if r.Epoch() != cur.Ring.Epoch() && cur.Ring.Len() > 0 {
		nv.history = append(nv.history, pastRing{ring: cur.Ring, until: now})
	}
	for _, h := range cur.history {
		if len(nv.history) < maxHistory && keep(h.until) {
			nv.history = append(nv.history, h)
		}
	}
	nv.Departed = make(map[string]Departed)
	for name, d := range cur.Departed {
		if _, back := nv.Members[name]; !back && keep(d.At) {
			nv.Departed[name] = d
		}
	}
	var gone []*MemberState
	for name, st := range cur.Members {
		if nst, ok := nv.Members[name]; !ok || nst != st {
			gone = append(gone, st)
			if !ok && name != cur.Self {
				nv.Departed[name] = Departed{MemberState: st, At: now}
			}
		}
	}

	nv.MemberIPs = make(map[netip.Addr]bool, 2*len(nv.Members))
	for _, st := range nv.Members {
		nv.MemberIPs[transport.HostAddr(st.PeerAddr)], nv.MemberIPs[transport.HostAddr(st.GossipAddr)] = true, true
	}
	for _, d := range nv.Departed {
		nv.MemberIPs[transport.HostAddr(d.PeerAddr)], nv.MemberIPs[transport.HostAddr(d.GossipAddr)] = true, true
	}
	delete(nv.MemberIPs, netip.Addr{})

	nv.joined = cur.joined
	if self, ok := nv.Members[nv.Self]; ok && nv.joined.IsZero() {
		for _, st := range nv.Members {
			// At or before: members started at one instant (a simulation's do, on a clock
			// that has not moved) each count as having joined the others.
			if st.Name != nv.Self && !st.Started.IsZero() && !st.Started.After(self.Started) {
				nv.joined = now
				break
			}
		}
	}
	return nv, gone, nil
}
