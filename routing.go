package corral

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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

// maxWidePeek bounds the members a warm pull asks at once when the key may be anywhere.
const maxWidePeek = 64

// warmPull looks for a copy of key that another member still holds from before a recent
// membership change, so that a join, a leave or a restart does not cost a wave of fills. It
// asks the likely holders first (see view.peekCandidates) and, if none has it, every member;
// each question is bounded by PeekTimeout and never makes the other side fill. A copy older
// than a write known here is not taken: the member that holds it may never have been told
// of the write (it has left, say).
func (g *Group[V]) warmPull(ctx context.Context, key string) (fill.Entry[V], bool) {
	n := g.node
	v := n.view.Load()
	cands, moved := v.PeekCandidates(key, n.cfg.PeekWindow, time.Now(), n.askedAt())
	if !moved {
		return fill.Entry[V]{}, false
	}
	if e, ok := g.peekAll(ctx, key, cands); ok {
		return e, true
	}
	rest := v.Others(cands)
	if len(rest) > maxWidePeek {
		rest = rest[:maxWidePeek]
	}
	return g.peekAll(ctx, key, rest)
}

// peekAll asks every member of sts at once for an entry of key it holds, and returns the
// first one that may still be served (fresh, stale within grace, or a remembered not-found)
// and is not older than a write known here. Members found unreachable a moment ago are not
// asked. Each question is bounded by PeekTimeout; but when none holds the key and some are
// filling it — acting owners of the key while its owner was down, as when a crashed owner
// comes back before its successor's fill ends — those are asked again to wait for their
// fill, within ctx (the fill's own bound), so that the key is loaded once, not twice.
func (g *Group[V]) peekAll(ctx context.Context, key string, sts []*view.MemberState) (fill.Entry[V], bool) {
	now := time.Now()
	sts = slices.DeleteFunc(slices.Clone(sts), func(st *view.MemberState) bool { return g.node.router.Breakers().Skip(st.PeerAddr, now) })
	if len(sts) == 0 {
		return fill.Entry[V]{}, false
	}
	pctx, cancel := context.WithTimeout(ctx, g.node.cfg.PeekTimeout)
	e, ok, filling := g.peekEach(pctx, key, sts, false)
	cancel()
	if ok || len(filling) == 0 {
		return e, ok
	}
	e, ok, _ = g.peekEach(ctx, key, filling, true)
	return e, ok
}

// peekEach asks the members of sts at once, as peekAll says, and returns the first entry
// found, or else the members that said they were filling the key.
func (g *Group[V]) peekEach(ctx context.Context, key string, sts []*view.MemberState, waitFill bool) (fill.Entry[V], bool, []*view.MemberState) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		e       fill.Entry[V]
		ok      bool
		filling *view.MemberState
	}
	answers := make(chan answer, len(sts)) // never blocks a sender
	var wg sync.WaitGroup
	for _, st := range sts {
		wg.Go(func() {
			e, ok, filling := g.peek(ctx, st, key, waitFill)
			a := answer{e: e, ok: ok}
			if filling {
				a.filling = st
			}
			answers <- a
		})
	}
	go func() { wg.Wait(); close(answers) }()
	floor := g.tombs.Floor(key)
	var filling []*view.MemberState
	for a := range answers {
		if a.ok && a.e.Version >= floor {
			g.node.log.Debug("corral: warm pull found a copy", "group", g.name, "key", key, "version", a.e.Version)
			cancel()
			for range answers { // let the other questions end, so none outlives the fill
			}
			return a.e, true, nil
		}
		if a.filling != nil {
			filling = append(filling, a.filling)
		}
	}
	return fill.Entry[V]{}, false, filling
}

// peek asks st for an entry of key it holds, without letting it fill; with waitFill, st
// first waits for a fill of key it runs. filling reports that st found none but runs a fill.
func (g *Group[V]) peek(ctx context.Context, st *view.MemberState, key string, waitFill bool) (e fill.Entry[V], ok, filling bool) {
	n := g.node
	resp, err := n.client.Get(ctx, st.PeerAddr, &peerpb.GetRequest{
		Header: n.router.HeaderWith(fill.OuterChain(ctx)), Group: g.name, Key: []byte(key), Peek: true, WaitFill: waitFill,
	})
	if err != nil {
		return e, false, false
	}
	if !resp.GetFound() || resp.GetEntry().GetStaleForNanos() <= 0 || version.Check(resp.GetEntry().GetVersion()) != nil {
		return e, false, resp.GetFilling()
	}
	n.versions.Observe(resp.GetEntry().GetVersion())
	e, err = g.decodeEntry(resp.GetEntry())
	return e, err == nil, false
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
