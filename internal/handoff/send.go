package handoff

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Group is what a hand-off needs of a group, whatever its value type.
type Group interface {
	// HandoffEntries yields every entry this node holds that may still be served — fresh,
	// stale within grace, or a remembered not-found — with the member that owns it on r.
	HandoffEntries(r *ring.Ring, self string, add func(owner string, e *peerpb.Entry))
	// StillCurrent reports whether no write newer than e is known here: an entry read for a
	// hand-off that a write has overtaken since is not sent.
	StillCurrent(e *peerpb.Entry) bool
}

// maxHandoffRounds bounds how often entries refused by a receiver (it is leaving too, or
// cannot be reached) are given to the next owner instead.
const maxHandoffRounds = 4

// Send pushes every entry this node holds that may still be served (fresh, stale within
// grace, or a remembered not-found) to the key's owner on the ring without
// this node and without the members that are leaving — the owner once they are all gone —
// one stream per owner, in parallel. Entries carry their remaining lifetime and version; a
// receiver keeps a newer version it already holds and refuses one older than a write it
// knows of. A receiver that turns out to be leaving too, or cannot be reached, is left out
// and its entries go to their next owner, for a few rounds.
func (m *Mover) Send(ctx context.Context, groups []Group) error {
	v := m.cfg.View.Load()
	excluded := map[string]bool{}
	r := v.HandoffRing(excluded)
	byName := map[string]Group{}
	pending := make(map[string][]*peerpb.Entry) // by owner
	for _, g := range groups {
		g.HandoffEntries(r, v.Self, func(owner string, e *peerpb.Entry) {
			byName[e.GetGroup()] = g
			pending[owner] = append(pending[owner], e)
		})
	}
	var errs []error
	for round := 0; round < maxHandoffRounds && len(pending) > 0; round++ {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			again []*peerpb.Entry // refused, for their next owner
		)
		for owner, entries := range pending {
			st, ok := m.cfg.View.Load().Members[owner]
			if !ok {
				excluded[owner] = true
				again = append(again, entries...)
				continue
			}
			wg.Go(func() {
				// An entry that a write overtook since it was read is not sent.
				fresh := entries[:0:0]
				for _, e := range entries {
					if g := byName[e.GetGroup()]; g != nil && g.StillCurrent(e) {
						fresh = append(fresh, e)
					}
				}
				resp, err := m.cfg.Client.Handoff(ctx, st.PeerAddr, fresh)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					m.cfg.Sent(int(resp.GetAccepted()))
					m.cfg.Log.Info("corral: handed off", "to", owner, "entries", len(fresh),
						"accepted", resp.GetAccepted(), "kept", resp.GetKept())
				case errors.Is(err, transport.ErrLeaving) || transport.IsUnreachable(err):
					m.cfg.Log.Info("corral: hand-off refused, giving the entries to the next owner", "to", owner, "err", err)
					excluded[owner] = true
					again = append(again, fresh...)
				default:
					errs = append(errs, fmt.Errorf("%s: %w", owner, err))
				}
			})
		}
		wg.Wait()
		r = m.cfg.View.Load().HandoffRing(excluded)
		pending = make(map[string][]*peerpb.Entry)
		for _, e := range again {
			if owner := r.Owner(string(e.GetKey())); owner != "" {
				pending[owner] = append(pending[owner], e)
			}
		}
	}
	return errors.Join(errs...)
}
