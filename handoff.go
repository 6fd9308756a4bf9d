package corral

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// maxHandoffRounds bounds how often entries refused by a receiver (it is leaving too, or
// cannot be reached) are given to the next owner instead.
const maxHandoffRounds = 4

// handoff pushes every entry this node holds that may still be served (fresh, stale within
// grace, or a remembered not-found) to the key's owner on the ring without
// this node and without the members that are leaving — the owner once they are all gone —
// one stream per owner, in parallel. Entries carry their remaining lifetime and version; a
// receiver keeps a newer version it already holds and refuses one older than a write it
// knows of. A receiver that turns out to be leaving too, or cannot be reached, is left out
// and its entries go to their next owner, for a few rounds.
func (n *Node) handoff(ctx context.Context) error {
	v := n.view.Load()
	excluded := map[string]bool{}
	r := v.HandoffRing(excluded)
	groups := map[string]groupHandle{}
	pending := make(map[string][]*peerpb.Entry) // by owner
	for _, g := range n.groupList() {
		g.handoffEntries(r, v.Self, func(owner string, e *peerpb.Entry) {
			groups[e.GetGroup()] = g
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
			st, ok := n.view.Load().Members[owner]
			if !ok {
				excluded[owner] = true
				again = append(again, entries...)
				continue
			}
			wg.Go(func() {
				// An entry that a write overtook since it was read is not sent.
				fresh := entries[:0:0]
				for _, e := range entries {
					if g := groups[e.GetGroup()]; g != nil && g.stillCurrent(e) {
						fresh = append(fresh, e)
					}
				}
				resp, err := n.client.Handoff(ctx, st.PeerAddr, fresh)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					n.metrics.handoff.WithLabelValues("sent").Add(float64(resp.GetAccepted()))
					n.log.Info("corral: handed off", "to", owner, "entries", len(fresh),
						"accepted", resp.GetAccepted(), "kept", resp.GetKept())
				case errors.Is(err, transport.ErrLeaving) || transport.IsUnreachable(err):
					n.log.Info("corral: hand-off refused, giving the entries to the next owner", "to", owner, "err", err)
					excluded[owner] = true
					again = append(again, fresh...)
				default:
					errs = append(errs, fmt.Errorf("%s: %w", owner, err))
				}
			})
		}
		wg.Wait()
		r = n.view.Load().HandoffRing(excluded)
		pending = make(map[string][]*peerpb.Entry)
		for _, e := range again {
			if owner := r.Owner(string(e.GetKey())); owner != "" {
				pending[owner] = append(pending[owner], e)
			}
		}
	}
	return errors.Join(errs...)
}
