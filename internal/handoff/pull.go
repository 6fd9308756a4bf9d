package handoff

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// A peek refused because its receiver does not know this node yet is asked again after
// notMemberRetry, doubling up to maxNotMemberRetry, within the peek's timeout.
const (
	notMemberRetry    = 10 * time.Millisecond
	maxNotMemberRetry = 80 * time.Millisecond
)

// maxWidePeek bounds the members a warm pull asks at once when the key may be anywhere.
const maxWidePeek = 64

// Pull looks for a copy of key of group that another member still holds from before a recent
// membership change, so that a join, a leave or a restart does not cost a wave of fills. It
// asks the likely holders first (see view.View.PeekCandidates) and, if none has it, every member;
// each question is bounded by PeekTimeout and never makes the other side fill. A copy older
// than a write known here is not taken: the member that holds it may never have been told
// of the write (it has left, say): floor returns the latest write of a key known here.
// decode turns a copy from the wire into an entry.
func Pull[V any](ctx context.Context, m *Mover, group, key string, floor func(key string) uint64,
	decode func(*peerpb.Entry) (fill.Entry[V], error)) (fill.Entry[V], bool) {
	v := m.cfg.View.Load()
	cands, moved := v.PeekCandidates(key, m.cfg.PeekWindow, time.Now(), m.cfg.AskedAt())
	if !moved {
		return fill.Entry[V]{}, false
	}
	p := &pull[V]{m: m, group: group, key: key, floor: floor, decode: decode}
	if e, ok := p.peekAll(ctx, cands); ok {
		return e, true
	}
	rest := v.Others(cands)
	if len(rest) > maxWidePeek {
		rest = rest[:maxWidePeek]
	}
	e, ok := p.peekAll(ctx, rest)
	if !ok {
		// Why a move cost a fill, for whoever reads debug logs: no member answered with a
		// copy within PeekTimeout (busy, gone, or never held it).
		m.cfg.Log.Debug("corral: warm pull found no copy", "group", group, "key", key,
			"likely_holders", len(cands), "others", len(rest), "peek_timeout", m.cfg.PeekTimeout)
	}
	return e, ok
}

// Await waits, within ctx, for the fill of key of group that the member called member runs,
// through its own warm pull, and returns the value it holds after, if it may be taken as
// Pull takes a copy: for a fill that asked member nothing, or was told nothing, and learnt
// that member was looking for the key too (fill.LoadingUnlessAsked). False when member is not
// in the view, or holds nothing it may take (its fill failed, say).
func Await[V any](ctx context.Context, m *Mover, group, key, member string, floor func(key string) uint64,
	decode func(*peerpb.Entry) (fill.Entry[V], error)) (fill.Entry[V], bool) {
	st := m.cfg.View.Load().Members[member]
	if st == nil {
		return fill.Entry[V]{}, false
	}
	p := &pull[V]{m: m, group: group, key: key, floor: floor, decode: decode}
	e, ok, _ := p.peek(ctx, st, true)
	return e, ok && e.Version >= floor(key)
}

// pull is one warm pull of a key.
type pull[V any] struct {
	m          *Mover
	group, key string
	floor      func(key string) uint64
	decode     func(*peerpb.Entry) (fill.Entry[V], error)
}

// peekAll asks every member of sts at once for an entry of key it holds, and returns the
// first one that may still be served (fresh, stale within grace, or a remembered not-found)
// and is not older than a write known here. Members found unreachable a moment ago are not
// asked. Each question is bounded by PeekTimeout; but when none holds the key and some are
// filling it — acting owners of the key while its owner was down, as when a crashed owner
// comes back before its successor's fill ends — those are asked again to wait for their
// fill, within ctx (the fill's own bound), so that the key is loaded once, not twice.
func (p *pull[V]) peekAll(ctx context.Context, sts []*view.MemberState) (fill.Entry[V], bool) {
	now := time.Now()
	sts = slices.DeleteFunc(slices.Clone(sts), func(st *view.MemberState) bool { return p.m.cfg.Router.Breakers().Skip(st.PeerAddr, now) })
	if len(sts) == 0 {
		return fill.Entry[V]{}, false
	}
	pctx, cancel := context.WithTimeout(ctx, p.m.cfg.PeekTimeout)
	e, ok, filling := p.peekEach(pctx, sts, false)
	cancel()
	if ok || len(filling) == 0 {
		return e, ok
	}
	e, ok, _ = p.peekEach(ctx, filling, true)
	return e, ok
}

// peekEach asks the members of sts at once, as peekAll says, and returns the first entry
// found, or else the members that said they were filling the key.
func (p *pull[V]) peekEach(ctx context.Context, sts []*view.MemberState, waitFill bool) (fill.Entry[V], bool, []*view.MemberState) {
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
			e, ok, filling := p.peek(ctx, st, waitFill)
			a := answer{e: e, ok: ok}
			if filling {
				a.filling = st
			}
			answers <- a
		})
	}
	go func() { wg.Wait(); close(answers) }()
	floor := p.floor(p.key)
	var filling []*view.MemberState
	for a := range answers {
		if a.ok && a.e.Version >= floor {
			p.m.cfg.Log.Debug("corral: warm pull found a copy", "group", p.group, "key", p.key, "version", a.e.Version)
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
func (p *pull[V]) peek(ctx context.Context, st *view.MemberState, waitFill bool) (e fill.Entry[V], ok, filling bool) {
	m := p.m
	req := &peerpb.GetRequest{
		Header: m.cfg.Router.HeaderWith(fill.OuterChain(ctx)), Group: p.group, Key: []byte(p.key), Peek: true, WaitFill: waitFill,
	}
	resp, err := m.cfg.Client.Get(ctx, st.PeerAddr, req)
	for wait := notMemberRetry; errors.Is(err, transport.ErrNotMember); wait = min(2*wait, maxNotMemberRetry) {
		// st has not heard of this node yet — it has just joined, and gossip reaches the
		// members it did not join through a moment later — so it refuses it as a stranger:
		// ask again until the peek's time is up.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return e, false, false
		case <-t.C:
		}
		resp, err = m.cfg.Client.Get(ctx, st.PeerAddr, req)
	}
	if err != nil {
		if cur := m.cfg.View.Load().Members[st.Name]; cur != nil && cur != st && ctx.Err() == nil {
			// The view took in a new life of st while it was asked — one back in place after
			// it was declared dead, whose first view here ends the connection to its address
			// (viewkeeper's connectNewLocked): ask the new life, which may be filling the key.
			return p.peek(ctx, cur, waitFill)
		}
		return e, false, false
	}
	if !resp.GetFound() || resp.GetEntry().GetStaleForNanos() <= 0 || version.Check(resp.GetEntry().GetVersion()) != nil {
		return e, false, resp.GetFilling()
	}
	m.cfg.Clock.Observe(resp.GetEntry().GetVersion())
	if m.cfg.Tags.Purged(resp.GetEntry().GetTags(), resp.GetEntry().GetBorn()) {
		// Made before a purge of one of its tags known here, by a member that was not told of
		// it (one that has left, say): gone, as a copy older than a write is.
		return e, false, false
	}
	e, err = p.decode(resp.GetEntry())
	return e, err == nil, false
}
