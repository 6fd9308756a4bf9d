package corral

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

var errNoMembers = errors.New("corral: no member to route to")

// onOwner runs an operation on key's owner: local when this node owns it, remote otherwise.
// When the owner cannot be reached (refused, reset, deadline, or it left the view while the
// call was in flight), the operation moves to the owner of the ring without that member —
// the successor every replica computes alike and agrees on once the failure is detected — so
// a crash costs one refill, not one per replica. With Config.LocalFallback it runs locally
// instead. It returns the name of the member that ran the operation.
func (n *Node) onOwner(ctx context.Context, key string, local func() error,
	remote func(context.Context, *memberState) error) (string, error) {
	v := n.view.Load()
	r := v.ring
	for {
		owner := r.Owner(key)
		if owner == "" {
			return "", errNoMembers
		}
		if owner == v.self {
			return owner, local()
		}
		st, ok := v.members[owner]
		if !ok {
			r = r.Without(owner)
			continue
		}
		err := callPeer(ctx, st, remote)
		if err == nil || !n.unreachable(ctx, st, err) {
			return owner, err
		}
		n.log.Warn("corral: owner unreachable, failing over", "owner", owner, "key", key, "err", err)
		if n.cfg.LocalFallback {
			return v.self, local()
		}
		r = r.Without(owner)
	}
}

// callPeer runs call under a context that also ends when the member leaves the view, so
// that a request to a member found dead fails over at once rather than at its deadline.
func callPeer(ctx context.Context, st *memberState, call func(context.Context, *memberState) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(st.gone, cancel)
	defer stop()
	return call(ctx, st)
}

func (n *Node) unreachable(ctx context.Context, st *memberState, err error) bool {
	if ctx.Err() != nil {
		return false // the caller gave up: not the owner's fault
	}
	return st.gone.Err() != nil || transport.IsUnreachable(err)
}

// header is the request header: this node, its ring epoch and the fill chain of ctx.
func (n *Node) header(ctx context.Context) *peerpb.Header {
	v := n.view.Load()
	return &peerpb.Header{Sender: v.self, Epoch: v.ring.Epoch(), Chain: fill.Chain(ctx)}
}

// fetch is the near cache's loader: one owner request for all concurrent Gets of a remote
// key on this node. Its ctx carries the near cache's own link in the fill chain, which is not
// a fill of the key (the owner's is), so it is dropped before the chain goes out.
func (g *Group[V]) fetch(ctx context.Context, key string) (V, error) {
	var val V
	n := g.node
	outer := fill.Outer(ctx)
	_, err := n.onOwner(ctx, key,
		func() error {
			// Acting owner after a failover (or the view changed under us): fill here; the
			// value lives in the local store, so keep no near copy.
			fill.SetExpiry(ctx, 0, 0)
			var err error
			val, err = g.local.Get(outer, key)
			return err
		},
		func(ctx context.Context, st *memberState) error {
			resp, err := n.client.Get(ctx, st.PeerAddr, &peerpb.GetRequest{
				Header: n.header(outer), Group: g.name, Key: key,
			})
			if err != nil {
				return err
			}
			e := resp.GetEntry()
			val, err = g.codec.Decode(e.GetValue())
			if err != nil {
				return fmt.Errorf("corral: value of %s/%q from %s: %w", g.name, key, st.Name, err)
			}
			fill.SetExpiry(ctx, g.nearLifetime(key, e), 0)
			return nil
		})
	if err != nil {
		return val, fromWire(err)
	}
	return val, nil
}

// peek asks the previous owner of key for an entry it still holds, without letting it fill.
func (g *Group[V]) peek(ctx context.Context, st *memberState, key string) (V, fill.Entry[V], bool) {
	var zero V
	ctx, cancel := context.WithTimeout(ctx, g.node.cfg.PeekTimeout)
	defer cancel()
	resp, err := g.node.client.Get(ctx, st.PeerAddr, &peerpb.GetRequest{
		Header: g.node.header(fill.Outer(ctx)), Group: g.name, Key: key, Peek: true,
	})
	if err != nil || !resp.GetFound() || resp.GetEntry().GetFreshForNanos() <= 0 {
		return zero, fill.Entry[V]{}, false
	}
	e, err := g.decodeEntry(resp.GetEntry())
	if err != nil {
		return zero, fill.Entry[V]{}, false
	}
	return e.Value, e, true
}

func (n *Node) remoteSet(ctx context.Context, st *memberState, group, key string, value []byte) (uint64, error) {
	resp, err := n.client.Set(ctx, st.PeerAddr, &peerpb.SetRequest{
		Header: n.header(ctx), Entry: &peerpb.Entry{Group: group, Key: key, Value: value},
	})
	if err != nil {
		return 0, err
	}
	return resp.GetVersion(), nil
}

func (n *Node) remoteRemove(ctx context.Context, st *memberState, group, key string) (uint64, error) {
	resp, err := n.client.Remove(ctx, st.PeerAddr, &peerpb.RemoveRequest{Header: n.header(ctx), Group: group, Key: key})
	if err != nil {
		return 0, err
	}
	return resp.GetVersion(), nil
}

// invalidate tells every live member but this one and skip to drop its near copy of key, in
// parallel, and names those it could not tell.
func (n *Node) invalidate(ctx context.Context, group, key string, version uint64, skip string) error {
	v := n.view.Load()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []string
		first  error
	)
	for name, st := range v.members {
		if name == v.self || name == skip {
			continue
		}
		wg.Go(func() {
			err := n.client.Invalidate(ctx, st.PeerAddr, &peerpb.InvalidateRequest{
				Header: n.header(ctx), Group: group, Key: key, Version: version,
			})
			if err != nil && !errors.Is(err, transport.ErrUnknownGroup) {
				mu.Lock()
				failed = append(failed, name)
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		sort.Strings(failed)
		return &UnreachedError{Members: failed, Err: first}
	}
	return nil
}

// fromWire turns the transport's errors into corral's: the owner's answers are marked
// remote, and ErrNotFound / ErrFillCycle become themselves again.
func fromWire(err error) error {
	var ffe *transport.FillFailedError
	switch {
	case errors.Is(err, transport.ErrNotFound):
		return &remoteError{err: ErrNotFound}
	case errors.Is(err, transport.ErrFillCycle):
		return &remoteError{err: ErrFillCycle}
	case errors.As(err, &ffe):
		return &remoteError{err: errors.New(ffe.Msg)}
	case errors.Is(err, transport.ErrUnknownGroup), errors.Is(err, transport.ErrInvalidArgument):
		return &remoteError{err: err}
	}
	return err
}

// toWire turns corral's errors into the transport's, on the serving side.
func toWire(err error) error {
	var fe *fill.FillError
	var le *LimitError
	var ke *fill.KeyError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fill.ErrFillCycle):
		return transport.ErrFillCycle
	case errors.Is(err, fill.ErrNotFound):
		return transport.ErrNotFound
	case errors.As(err, &le), errors.As(err, &ke):
		return fmt.Errorf("%w: %v", transport.ErrInvalidArgument, err)
	case errors.As(err, &fe):
		// A local fill that itself asked a remote owner reports the innermost cause.
		var re *remoteError
		if errors.As(fe.Err, &re) {
			if w := toWire(re.err); w != re.err {
				return w
			}
			return &transport.FillFailedError{Msg: re.err.Error()}
		}
		return &transport.FillFailedError{Msg: fe.Err.Error()}
	}
	return err
}

func (n *Node) checkValue(size int) error {
	if size > n.cfg.MaxValueBytes {
		return &LimitError{Limit: "value", Size: size, Max: n.cfg.MaxValueBytes}
	}
	return nil
}
