package route

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
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
// node's ring and runs, all at once, local with the keys this node owns and remote with each
// other owner's keys, on the owner's stream. It fails over as OnOwner does, owner by owner:
// the keys of an owner that cannot be reached, or that answers it is leaving or does not
// serve the group yet, are grouped again on the ring without it and go to their next
// owners (or to local, with Config.LocalFallback). local and remote record each key's
// answer themselves; fail is given the keys whose owner's call failed for good (or that have
// no owner), with the error. Each may be called from several goroutines at once, for
// different keys: the last owner's on the caller's, the others' each run by spawn (nil: on
// a goroutine of its own). OnOwners returns once every call has ended.
func (r *Router) OnOwners(ctx context.Context, keys []string, local func(p Part),
	remote func(ctx context.Context, st *view.MemberState, p Part) error, fail func(p Part, err error),
	spawn func(func())) {
	v := r.cfg.View.Load()
	b := &batchRoute{r: r, v: v, local: local, remote: remote, fail: fail, spawn: spawn, fallback: r.cfg.LocalFallback}
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
	b.wg.Wait()
}

// batchRoute is one OnOwners.
type batchRoute struct {
	r        *Router
	v        *view.View
	local    func(p Part)
	remote   func(ctx context.Context, st *view.MemberState, p Part) error
	fail     func(p Part, err error)
	spawn    func(func()) // nil: go
	fallback bool
	wg       sync.WaitGroup
}

// route sends the keys of p to their owners on rg, all at once: each owner's keys on a
// goroutine of its own, but the last owner's, on this one.
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
	for j, owner := range owners {
		part := Part{Keys: keys[start[j] : start[j]+counts[j]], At: at[start[j] : start[j]+counts[j]]}
		if j == len(owners)-1 {
			b.toOwner(ctx, rg, owner, part)
			break
		}
		b.wg.Add(1)
		call := func() {
			defer b.wg.Done()
			b.toOwner(ctx, rg, owner, part)
		}
		if b.spawn != nil {
			b.spawn(call)
		} else {
			go call()
		}
	}
}

// toOwner runs the keys of p, which owner owns on rg, on owner, failing over as OnOwner does.
func (b *batchRoute) toOwner(ctx context.Context, rg *ring.Ring, owner string, p Part) {
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
	st, ok := v.Members[owner]
	if !ok {
		b.route(ctx, rg.Without(owner), p)
		return
	}
	if r.breakers.Skip(st.PeerAddr, time.Now()) {
		r.cfg.Log.Debug("corral: owner unreachable a moment ago, asking its successor", "owner", owner, "keys", keyCount(p.Keys))
		b.failover(ctx, rg, owner, p)
		return
	}
	err := r.callPeer(ctx, st, true, func(ctx context.Context, st *view.MemberState) error { return b.remote(ctx, st, p) })
	if err == nil || !r.failover(ctx, st, err) {
		if ctx.Err() == nil {
			r.breakers.Reset(st.PeerAddr) // it answered
		}
		if err != nil {
			b.fail(p, err)
		}
		return
	}
	if errors.Is(err, transport.ErrLeaving) || errors.Is(err, transport.ErrUnknownGroup) || errors.Is(err, transport.ErrNotMember) {
		r.cfg.Log.Debug("corral: owner does not serve the keys, asking its successor", "owner", owner, "keys", keyCount(p.Keys), "err", err)
	} else {
		r.cfg.Log.Warn("corral: owner unreachable, failing over", "owner", owner, "keys", keyCount(p.Keys), "err", err)
		r.peerDown(ctx, st)
	}
	b.failover(ctx, rg, owner, p)
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

// keyCount is a batch's keys in a log record: logged as their number, as slog resolves it,
// while a handler that asks for them (Keys) gets the keys themselves — the simulator counts a
// fail-over for each.
type keyCount []string

func (k keyCount) LogValue() slog.Value { return slog.IntValue(len(k)) }

// Keys returns the keys.
func (k keyCount) Keys() []string { return k }
