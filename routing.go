package corral

import (
	"context"
	"errors"
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// fetch is the near cache's loader: one owner request for all concurrent Gets of a remote
// key on this node. Its ctx carries the near cache's own link in the fill chain, which is not
// a fill of the key (the owner's is), so it is dropped before the chain goes out.
func (g *Group[V]) fetch(ctx context.Context, key string) (V, error) {
	var val V
	n := g.node
	_, err := n.router.OnOwner(ctx, key, true,
		func() error {
			// Acting owner after a failover (or the view changed under us): fill here; the
			// value lives in the local store, so keep no near copy.
			fill.SetExpiry(ctx, 0, 0)
			var err error
			val, err = g.local.Get(fill.Outer(ctx), key)
			return err
		},
		func(ctx context.Context, st *view.MemberState) error {
			var err error
			val, err = g.askOwner(ctx, st, key)
			return err
		})
	if err != nil {
		return val, fromWire(err)
	}
	return val, nil
}

// askOwner asks st, the key's owner, for the value of key on the owner's stream. Under a
// near-cache fill's ctx it also says what the fill keeps: a near copy at the owner's version,
// for a hot key.
func (g *Group[V]) askOwner(ctx context.Context, st *view.MemberState, key string) (V, error) {
	var val V
	n := g.node
	resp, err := n.client.GetFrom(ctx, st.PeerAddr, st.Gone.Done(), &peerpb.GetRequest{
		Header: n.router.HeaderWith(fill.OuterChain(ctx)), Group: g.name, Key: []byte(key),
	})
	if err != nil {
		return val, err
	}
	e := resp.GetEntry()
	if err := version.Check(e.GetVersion()); err != nil {
		return val, fmt.Errorf("corral: value of %s/%q from %s: %w", g.name, key, st.Name, err)
	}
	n.versions.Observe(e.GetVersion())
	val, err = g.codec.Decode(e.GetValue())
	if err != nil {
		return val, fmt.Errorf("corral: value of %s/%q from %s: %w", g.name, key, st.Name, err)
	}
	// The copy is stored only if no write newer than it is known here by then.
	fill.SetVersion(ctx, e.GetVersion())
	fill.SetExpiry(ctx, g.nearLifetime(key, e), 0)
	return val, nil
}

func (n *Node) remoteSet(ctx context.Context, st *view.MemberState, group, key string, value []byte, version uint64) error {
	_, err := n.client.Set(ctx, st.PeerAddr, &peerpb.SetRequest{
		Header: n.router.Header(ctx), Entry: &peerpb.Entry{Group: group, Key: []byte(key), Value: value, Version: version},
	})
	return err
}

func (n *Node) remoteRemove(ctx context.Context, st *view.MemberState, group, key string, version uint64) error {
	_, err := n.client.Remove(ctx, st.PeerAddr, &peerpb.RemoveRequest{
		Header: n.router.Header(ctx), Group: group, Key: []byte(key), Version: version,
	})
	return err
}

// fromWire turns the transport's errors into corral's: the owner's answers are marked
// remote, and ErrNotFound / ErrFillCycle become themselves again.
func fromWire(err error) error {
	var ffe *transport.FillFailedError
	switch {
	case errors.Is(err, transport.ErrClosed):
		return ErrClosed // this node is closing; the owner said nothing
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
		n.metrics.limits.hit(limitValue)
		return &LimitError{Limit: "value", Size: size, Max: n.cfg.MaxValueBytes}
	}
	return nil
}
