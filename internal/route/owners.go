package route

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
)

// OnOwners is OnOwner for many keys at once (a batch): it groups keys by their owner on this
// node's ring and runs, all at once, local with the keys this node owns and remote with each
// other owner's keys, on the owner's stream. It fails over as OnOwner does, owner by owner:
// the keys of an owner that cannot be reached, or that answers it is leaving or does not
// serve the group yet, are grouped again on the ring without it and go to their next
// owners (or to local, with Config.LocalFallback). local and remote record each key's
// answer themselves, and must be safe to call from several goroutines at once. OnOwners
// returns the error of each key whose owner's call failed for good (or that has no owner);
// it returns once every call has ended.
func (r *Router) OnOwners(ctx context.Context, keys []string, local func(keys []string),
	remote func(ctx context.Context, st *view.MemberState, keys []string) error) map[string]error {
	v := r.cfg.View.Load()
	b := &batchRoute{r: r, v: v, local: local, remote: remote, fallback: r.cfg.LocalFallback}
	rg := v.Ring
	if v.Stopped {
		// This node serves nothing itself any more: the keys' owners among the others.
		rg, b.fallback = rg.Without(v.Self), false
	}
	b.route(ctx, rg, keys)
	b.wg.Wait()
	return b.errs
}

// batchRoute is one OnOwners.
type batchRoute struct {
	r        *Router
	v        *view.View
	local    func(keys []string)
	remote   func(ctx context.Context, st *view.MemberState, keys []string) error
	fallback bool
	wg       sync.WaitGroup

	mu sync.Mutex
	// guards errs
	errs map[string]error
}

// route sends keys to their owners on rg, all at once: each owner's keys on a goroutine of
// its own, but the last owner's, on this one.
func (b *batchRoute) route(ctx context.Context, rg *ring.Ring, keys []string) {
	type owned struct {
		owner string
		keys  []string
	}
	var byOwner []owned // a few members: a list, looked through, is cheaper than a map
	for _, k := range keys {
		o := rg.Owner(k)
		i := slices.IndexFunc(byOwner, func(x owned) bool { return x.owner == o })
		if i < 0 {
			i = len(byOwner)
			byOwner = append(byOwner, owned{owner: o})
		}
		byOwner[i].keys = append(byOwner[i].keys, k)
	}
	for i, x := range byOwner {
		if i == len(byOwner)-1 {
			b.toOwner(ctx, rg, x.owner, x.keys)
			break
		}
		b.wg.Go(func() { b.toOwner(ctx, rg, x.owner, x.keys) })
	}
}

// toOwner runs keys, which owner owns on rg, on owner, failing over as OnOwner does.
func (b *batchRoute) toOwner(ctx context.Context, rg *ring.Ring, owner string, keys []string) {
	r, v := b.r, b.v
	switch {
	case owner == "" && v.Stopped:
		b.fail(keys, view.ErrClosed) // no other member to ask
		return
	case owner == "":
		b.fail(keys, errNoMembers)
		return
	case owner == v.Self:
		b.local(keys)
		return
	}
	st, ok := v.Members[owner]
	if !ok {
		b.route(ctx, rg.Without(owner), keys)
		return
	}
	if r.breakers.Skip(st.PeerAddr, time.Now()) {
		r.cfg.Log.Debug("corral: owner unreachable a moment ago, asking its successor", "owner", owner, "keys", len(keys))
		b.failover(ctx, rg, owner, keys)
		return
	}
	err := r.callPeer(ctx, st, true, func(ctx context.Context, st *view.MemberState) error { return b.remote(ctx, st, keys) })
	if err == nil || !r.failover(ctx, st, err) {
		if ctx.Err() == nil {
			r.breakers.Reset(st.PeerAddr) // it answered
		}
		if err != nil {
			b.fail(keys, err)
		}
		return
	}
	if errors.Is(err, transport.ErrLeaving) || errors.Is(err, transport.ErrUnknownGroup) || errors.Is(err, transport.ErrNotMember) {
		r.cfg.Log.Debug("corral: owner does not serve the keys, asking its successor", "owner", owner, "keys", len(keys), "err", err)
	} else {
		r.cfg.Log.Warn("corral: owner unreachable, failing over", "owner", owner, "keys", len(keys), "err", err)
		r.peerDown(ctx, st)
	}
	b.failover(ctx, rg, owner, keys)
}

// failover sends keys, whose owner on rg could not take them, to local with LocalFallback,
// else to their owners on the ring without it.
func (b *batchRoute) failover(ctx context.Context, rg *ring.Ring, owner string, keys []string) {
	if b.fallback {
		b.local(keys)
		return
	}
	b.route(ctx, rg.Without(owner), keys)
}

// fail records err as the error of each of keys.
func (b *batchRoute) fail(keys []string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.errs == nil {
		b.errs = make(map[string]error, len(keys))
	}
	for _, k := range keys {
		b.errs[k] = err
	}
}
