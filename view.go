package corral

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/ring"
)

// view is one node's picture of the cluster: the members and the ring over them. It is
// immutable; a membership change swaps in a new view, so the hot path reads it with one
// atomic load.
type view struct {
	self    string
	ring    *ring.Ring
	members map[string]*memberState // by name
	list    []Member                // sorted by name

	// prev is the ring before the last change of the member set, and changed when that
	// happened: for PeekWindow after a change, a new owner asks the previous owner of a key
	// before it loads.
	prev    *ring.Ring
	changed time.Time
	// joined is when this node first saw another member: for PeekWindow after it, keys this
	// node owns may have been owned, before it arrived, by their owner on the ring without it.
	joined time.Time
}

// memberState is one live member. gone is cancelled when it leaves the view, which aborts
// requests in flight to it so that they fail over at once instead of waiting out their
// deadline.
type memberState struct {
	Member
	gone   context.Context
	cancel context.CancelFunc
}

// owner returns the member this view routes key to.
func (v *view) owner(key string) string { return v.ring.Owner(key) }

// previousOwners returns the live members other than self that may hold key from before
// the last membership change, if that was within window: the key's owner on the previous
// ring (it held the key when another member left or joined), and, while this node has only
// just joined, its owner on the ring without this node (it held the key before this node
// arrived — this node's own earlier views, built while it was still joining, may not show
// that). At most two, without repeats; none for keys whose owner did not change.
func (v *view) previousOwners(key string, window time.Duration, now time.Time) []string {
	if v.prev == nil || window < 0 || now.Sub(v.changed) > window {
		return nil
	}
	candidates := [2]string{v.prev.Owner(key)}
	if !v.joined.IsZero() && now.Sub(v.joined) <= window {
		candidates[1] = v.ring.Without(v.self).Owner(key)
	}
	var out []string
	for _, p := range candidates {
		if p == "" || p == v.self || (len(out) > 0 && out[0] == p) {
			continue
		}
		if _, ok := v.members[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// nextView builds the view after a membership change. Members that stay keep their
// memberState; the ones that are gone are returned so the caller can cancel them.
func nextView(cur *view, ms []peer.Member, rc ring.Config, now time.Time) (*view, []*memberState, error) {
	names := make([]string, 0, len(ms))
	nv := &view{self: cur.self, members: make(map[string]*memberState, len(ms))}
	for _, m := range ms {
		names = append(names, m.Name)
		mm := memberOf(m)
		if old, ok := cur.members[m.Name]; ok && old.Member == mm {
			nv.members[m.Name] = old
		} else {
			st := &memberState{Member: mm}
			st.gone, st.cancel = context.WithCancel(context.Background())
			nv.members[m.Name] = st
		}
		nv.list = append(nv.list, mm)
	}
	slices.SortFunc(nv.list, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	r, err := ring.New(names, rc)
	if err != nil {
		return nil, nil, err
	}
	nv.ring = r
	if r.Epoch() == cur.ring.Epoch() {
		nv.prev, nv.changed = cur.prev, cur.changed
	} else {
		nv.prev, nv.changed = cur.ring, now
	}
	nv.joined = cur.joined
	if nv.joined.IsZero() && r.Len() > 1 {
		nv.joined = now
	}
	var gone []*memberState
	for name, st := range cur.members {
		if nst, ok := nv.members[name]; !ok || nst != st {
			gone = append(gone, st)
		}
	}
	return nv, gone, nil
}
