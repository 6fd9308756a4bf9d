package group

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Membership changes. A change moves keys: a join moves the joiner's share to it, and a
// leave or a crash moves the leaver's keys to their successors and, because the ring's loads
// are bounded, a few more between the members that stay. A new owner's first miss of a key
// that moved asks the members that may hold it (a warm pull, see package handoff), but
// until that miss the copy lives only on the key's former owner: a crash of the former
// owner, or a first read after PeekWindow, would cost the key a fill although it had
// moved away intact. So after each change every member also gives the entries it owned
// and no longer owns to their new owners at once (moveOn): a crash then costs only the keys
// the crashed member owned, and a key that moved is held by its new owner whenever it is
// first read. (e2e TestScaleUp measured it: a member killed 20 s after three joins cost 49
// fills of keys the joiners owned, each a copy the joiner had not yet pulled from it.)

// moveBatch bounds the entries of one Handoff stream that moveOn sends.
const moveBatch = 1024

// follow runs while the group lives: after each membership change (ViewChanged) it gives the
// entries this node owned and no longer owns to their new owners (moveOn) and, with backups,
// the entries it owns to the backups they need now (rebackupView); and it gives the entries
// other members handed to it to their backups (backUpHanded). Changes that come while it
// works are taken together, from the newest view.
func (g *Group[V]) follow(ctx context.Context, prev *view.View) {
	defer close(g.followDone)
	retry := time.NewTimer(owedRetry) // gives owed copies again (owe); runs only while some are
	retry.Stop()
	defer retry.Stop()
	retrying := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.followKick:
		case <-retry.C:
			retrying = false
			g.payOwed(ctx)
		}
		if !retrying && g.owing() {
			retry.Reset(owedRetry)
			retrying = true
		}
		v := g.env.View.Load()
		if v.Stopped {
			continue // this node serves nothing any more: its keys are handed off
		}
		if v != prev {
			g.moveOn(ctx, prev, v)
			if g.backups > 0 {
				g.rebackupView(ctx, prev, v)
			}
			prev = v
		}
		g.backUpHanded(ctx, v)
	}
}

// viewChanged asks follow to look at the newest view.
func (g *Group[V]) viewChanged() {
	select {
	case g.followKick <- struct{}{}:
	default: // one is pending: it reads the newest view
	}
}

// moveOn gives each entry this node owned under prev and another member owns under v to that
// member, in Handoff streams of at most moveBatch entries, one owner at a time per stream and
// all owners at once. The receiver takes it as it takes a leaver's hand-off (Accept): not
// over a copy as new, nor over a write it knows of; and an entry a write overtook here is
// not sent. A member that is leaving is given nothing (it hands off its own keys); one that
// cannot be reached is left to its warm pull. This node keeps its copy (a warm pull may
// still ask for it; writes reach it as they reach every copy).
func (g *Group[V]) moveOn(ctx context.Context, prev, v *view.View) {
	if prev == nil || prev.Ring.Epoch() == v.Ring.Epoch() {
		return
	}
	byOwner := map[*view.MemberState][]*peerpb.Entry{}
	for key, e := range g.local.All() {
		owner := v.Owner(key)
		if owner == "" || owner == v.Self || prev.Owner(key) != v.Self || e.Version < g.tombs.Floor(key) {
			continue
		}
		st, ok := v.Members[owner]
		if !ok || st.Leaving.Load() {
			continue
		}
		pe, err := g.encodeEntry(key, e)
		if err != nil {
			continue
		}
		byOwner[st] = append(byOwner[st], pe)
	}
	var wg sync.WaitGroup
	for st, entries := range byOwner {
		wg.Go(func() {
			for len(entries) > 0 && ctx.Err() == nil {
				n := min(moveBatch, len(entries))
				chunk := slices.DeleteFunc(entries[:n:n], func(pe *peerpb.Entry) bool { return !g.StillCurrent(pe) })
				entries = entries[n:]
				if len(chunk) == 0 {
					continue
				}
				resp, err := g.giveMoved(ctx, st, chunk)
				if err != nil {
					g.env.Log.Debug("corral: entries that moved were not given to their new owner; its warm pull asks for them",
						"group", g.name, "member", st.Name, "entries", len(chunk)+len(entries), "err", err)
					return
				}
				g.env.Sent(int(resp.GetAccepted()))
				g.env.Log.Debug("corral: gave entries that moved to their new owner", "group", g.name, "member", st.Name,
					"entries", len(chunk), "accepted", resp.GetAccepted(), "kept", resp.GetKept())
			}
		})
	}
	wg.Wait()
}

// A former owner refused as a stranger — the receiver has not heard of it yet: a joiner
// learns of the members it did not join through a moment after they learn of it — or for a
// group the receiver has not made yet — a joiner joins before its application makes its
// groups — asks again after moveRetry, doubling up to maxMoveRetry, for moveRetryFor in all.
const (
	moveRetry    = 10 * time.Millisecond
	maxMoveRetry = 640 * time.Millisecond
	moveRetryFor = 5 * time.Second
)

// giveMoved sends entries to st in one Handoff stream, each try bounded by PeerTimeout.
func (g *Group[V]) giveMoved(ctx context.Context, st *view.MemberState, entries []*peerpb.Entry) (*peerpb.HandoffResponse, error) {
	deadline := time.Now().Add(moveRetryFor)
	for wait := moveRetry; ; wait = min(2*wait, maxMoveRetry) {
		cctx, cancel := context.WithTimeout(ctx, g.env.PeerTimeout)
		resp, err := g.env.Client.Handoff(cctx, st.PeerAddr, entries)
		cancel()
		again := errors.Is(err, transport.ErrNotMember) || errors.Is(err, transport.ErrUnknownGroup)
		if !again || time.Now().Add(wait).After(deadline) {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-st.Gone.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// handed notes key, an entry another member handed to this node (a leaver's hand-off, or a
// former owner's moveOn), for backUpHanded.
func (g *Group[V]) handed(key string) {
	if g.backups == 0 {
		return
	}
	g.handedMu.Lock()
	if g.handedKeys == nil {
		g.handedKeys = make(map[string]bool)
	}
	g.handedKeys[key] = true
	g.handedMu.Unlock()
	g.viewChanged()
}

// backUpHanded gives the entries handed to this node that it owns under v to their backups,
// as a fill's are. One handed to it while their former owner still owns them (a leaver's
// hand-off) waits for the change that makes this node their owner (rebackupView).
func (g *Group[V]) backUpHanded(ctx context.Context, v *view.View) {
	g.handedMu.Lock()
	keys := g.handedKeys
	g.handedKeys = nil
	g.handedMu.Unlock()
	var mine []string
	for key := range keys {
		if v.Owner(key) == v.Self {
			mine = append(mine, key)
		}
	}
	for len(mine) > 0 && ctx.Err() == nil {
		n := min(moveBatch, len(mine))
		pctx, cancel := context.WithTimeout(ctx, g.env.PeerTimeout)
		g.pushBackups(pctx, mine[:n])
		cancel()
		mine = mine[n:]
	}
}

// startFollowing starts follow from the current view.
func (g *Group[V]) startFollowing() {
	ctx, cancel := context.WithCancel(context.Background())
	g.followStop = cancel
	g.followKick = make(chan struct{}, 1) // one pending look is enough: it reads the newest view
	g.followDone = make(chan struct{})
	go g.follow(ctx, g.env.View.Load())
}

// stopFollowing ends follow, waiting for it within ctx.
func (g *Group[V]) stopFollowing(ctx context.Context) {
	if g.followStop == nil {
		return
	}
	g.followStop()
	select {
	case <-g.followDone:
	case <-ctx.Done():
	}
}
