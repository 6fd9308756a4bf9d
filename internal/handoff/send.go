package handoff

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
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

// Sent records the entries a hand-off delivered — each one's version and a checksum of its
// value — so that a later round sends only what changed since.
type Sent map[sentKey]sentAs

type sentKey struct{ group, key string }

type sentAs struct {
	version, sum uint64
	notFound     bool
}

func sentAsOf(e *peerpb.Entry) sentAs {
	h := fnv.New64a()
	h.Write(e.GetValue())
	return sentAs{version: e.GetVersion(), sum: h.Sum64(), notFound: e.GetNotFound()}
}

// delivered reports whether e, as it is, was delivered in the round that made s.
func (s Sent) delivered(e *peerpb.Entry) bool {
	as, ok := s[sentKey{e.GetGroup(), string(e.GetKey())}]
	return ok && as == sentAsOf(e)
}

// Send pushes every entry this node holds that may still be served (fresh, stale within
// grace, or a remembered not-found) to the key's owner on the ring without
// this node and without the members that are leaving — the owner once they are all gone —
// one stream per owner, in parallel. Entries carry their remaining lifetime and version; a
// receiver keeps a newer version it already holds and refuses one older than a write it
// knows of. A receiver that turns out to be leaving too, or cannot be reached, is left out
// and its entries go to their next owner, for a few rounds.
//
// Entries that before records as delivered, unchanged, are not sent again: a leaving node
// hands off while it still serves, then stops applying writes and sends what changed
// meanwhile (corral.Node.Close). Send returns the entries it delivered.
func (m *Mover) Send(ctx context.Context, groups []Group, before Sent) (Sent, error) {
	v := m.cfg.View.Load()
	excluded := map[string]bool{}
	r := v.HandoffRing(excluded)
	byName := map[string]Group{}
	pending := make(map[string][]*peerpb.Entry) // by owner
	for _, g := range groups {
		g.HandoffEntries(r, v.Self, func(owner string, e *peerpb.Entry) {
			if before.delivered(e) {
				return
			}
			byName[e.GetGroup()] = g
			pending[owner] = append(pending[owner], e)
		})
	}
	sent := make(Sent)
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
					for _, e := range fresh {
						sent[sentKey{e.GetGroup(), string(e.GetKey())}] = sentAsOf(e)
					}
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
	return sent, errors.Join(errs...)
}
