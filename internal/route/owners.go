package route

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
)

// Part is a part of the keys of an OnOwners: some of them, and the index of each among all
// (At[i] is Keys[i]'s), so that an answer is recorded by index, not looked up by key.
type Part struct {
	Keys []string
	At   []int
}

// OnOwners is OnOwner for many keys at once (a batch): it groups keys by their owner on this
// node's ring, sends each other owner its keys with remote, runs local with the keys this
// node owns, and then waits for each owner's answer in turn (Asked.Wait) — all
// on the caller's goroutine: every owner is asked before any answer is waited for, and on
// streams nobody else reads, the caller reads each answer itself, with no goroutine per owner
// and no hand-off to one and back. It fails over as OnOwner does, owner by owner: the keys of
// an owner that cannot be reached, or that answers it is leaving or does not serve the group
// yet, are grouped again on the ring without it and go to their next owners (or to local,
// with Config.LocalFallback). local and the waits record each key's answer themselves; fail
// is given the keys whose owner's call failed for good (or that have no owner), with the
// error. OnOwners returns once every call has ended.
func (r *Router) OnOwners(ctx context.Context, keys []string, local func(p Part),
	remote func(ctx context.Context, st *view.MemberState, p Part) Asked, fail func(p Part, err error)) {
	v := r.cfg.View.Load()
	b := &batchRoute{r: r, v: v, local: local, remote: remote, fail: fail, fallback: r.cfg.LocalFallback}
	rg := v.Ring
	if v.Stopped {
		// This node serves nothing itself any more: the keys' owners among the others.
		rg, b.fallback = rg.Without(v.Self), false
	}
	at := make([]int, len(keys))
	for i := range at {
		at[i] = i
	}
	b.route(ctx, rg, Part{Keys: keys, At: at})
}

// batchRoute is one OnOwners.
type batchRoute struct {
	r        *Router
	v        *view.View
	local    func(p Part)
	remote   func(ctx context.Context, st *view.MemberState, p Part) Asked
	fail     func(p Part, err error)
	fallback bool
}

// Asked is an owner's part of an OnOwners, sent to it (remote).
type Asked interface {
	// Later, called before Wait, says that other owners' answers are waited for first.
	Later()
	// Wait waits for the owner's answer and records it; its error is the request's (the
	// caller fails over on it).
	Wait() error
}

// sent is an owner's part of a batch, sent to it, whose answer is waited for.
type sent struct {
	owner string
	st    *view.MemberState
	p     Part
	asked Asked
}

// route sends the keys of p to their owners on rg, all before it waits for any: the keys of
// each other owner first, then this node's own to local, then each owner's answer.
func (b *batchRoute) route(ctx context.Context, rg *ring.Ring, p Part) {
	// Group the keys by owner (a few members: a list, looked through, is cheaper than a
	// map), each owner's in one run of the same two arrays.
	var owners []string
	var counts []int
	which := make([]int, len(p.Keys))
	for i, k := range p.Keys {
		o := rg.Owner(k)
		j := slices.Index(owners, o)
		if j < 0 {
			j = len(owners)
			owners, counts = append(owners, o), append(counts, 0)
		}
		which[i] = j
		counts[j]++
	}
	start := make([]int, len(owners))
	for j := 1; j < len(owners); j++ {
		start[j] = start[j-1] + counts[j-1]
	}
	keys, at := make([]string, len(p.Keys)), make([]int, len(p.Keys))
	next := slices.Clone(start)
	for i, j := range which {
		keys[next[j]], at[next[j]] = p.Keys[i], p.At[i]
		next[j]++
	}
	sends := make([]sent, 0, len(owners))
	var rest []func() // the parts not sent: run once the others are
	for j, owner := range owners {
		part := Part{Keys: keys[start[j] : start[j]+counts[j]], At: at[start[j] : start[j]+counts[j]]}
		if s, ok := b.send(ctx, rg, owner, part); ok {
			sends = append(sends, s)
		} else {
			rest = append(rest, func() { b.notSent(ctx, rg, owner, part) })
		}
	}
	for i := 1; i < len(sends); i++ {
		sends[i].asked.Later()
	}
	for _, run := range rest {
		run()
	}
	for _, s := range sends {
		b.answered(ctx, rg, s)
	}
}

// send sends the keys of p, which owner owns on rg, to owner, and reports true; or reports
// false when owner is not to be asked (notSent does what is done instead).
func (b *batchRoute) send(ctx context.Context, rg *ring.Ring, owner string, p Part) (sent, bool) {
	r, v := b.r, b.v
	if owner == "" || owner == v.Self {
		return sent{}, false
	}
	st, ok := v.Members[owner]
	if !ok || r.breakers.Skip(st.PeerAddr, time.Now()) {
		return sent{}, false
	}
	return sent{owner: owner, st: st, p: p, asked: b.remote(ctx, st, p)}, true
}

// notSent does for the keys of p, which owner owns on rg, what OnOwner does when it does not
// ask owner: fails them (no owner), runs local (this node's own), or fails over.
func (b *batchRoute) notSent(ctx context.Context, rg *ring.Ring, owner string, p Part) {
	r, v := b.r, b.v
	switch {
	case owner == "" && v.Stopped:
		b.fail(p, view.ErrClosed) // no other member to ask
		return
	case owner == "":
		b.fail(p, errNoMembers)
		return
	case owner == v.Self:
		b.local(p)
		return
	}
	if _, ok := v.Members[owner]; !ok {
		b.route(ctx, rg.Without(owner), p)
		return
	}
	r.cfg.Log.Debug("corral: owner unreachable a moment ago, asking its successor", "owner", owner, "keys", len(p.Keys))
	b.failover(ctx, rg, owner, p)
}

// answered waits for the answer of s, sent to its owner on rg, failing over as OnOwner does.
func (b *batchRoute) answered(ctx context.Context, rg *ring.Ring, s sent) {
	r, st := b.r, s.st
	err := s.asked.Wait()
	if err == nil || !r.failover(ctx, st, err) {
		if ctx.Err() == nil {
			r.breakers.Reset(st.PeerAddr) // it answered
		}
		if err != nil {
			b.fail(s.p, err)
		}
		return
	}
	if errors.Is(err, transport.ErrLeaving) || errors.Is(err, transport.ErrUnknownGroup) || errors.Is(err, transport.ErrNotMember) {
		r.cfg.Log.Debug("corral: owner does not serve the keys, asking its successor", "owner", s.owner, "keys", len(s.p.Keys), "err", err)
	} else {
		r.cfg.Log.Warn("corral: owner unreachable, failing over", "owner", s.owner, "keys", len(s.p.Keys), "err", err)
		r.peerDown(ctx, st)
	}
	b.failover(ctx, rg, s.owner, s.p)
}

// failover sends the keys of p, whose owner on rg could not take them, to local with
// LocalFallback, else to their owners on the ring without it.
func (b *batchRoute) failover(ctx context.Context, rg *ring.Ring, owner string, p Part) {
	if b.fallback {
		b.local(p)
		return
	}
	b.route(ctx, rg.Without(owner), p)
}
