package corral

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/corralcache/corral/transport/peerpb"
)

// handoff pushes every fresh entry this node holds to the key's owner on the ring without
// this node, one stream per new owner, in parallel. Entries carry their remaining lifetime
// and version; a receiver keeps a newer version it already holds.
func (n *Node) handoff(ctx context.Context) error {
	v := n.view.Load()
	r := v.ring.Without(v.self)
	batches := make(map[string][]*peerpb.Entry)
	for _, g := range n.groupList() {
		g.handoffEntries(r, v.self, func(owner string, e *peerpb.Entry) {
			batches[owner] = append(batches[owner], e)
		})
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for owner, entries := range batches {
		st, ok := v.members[owner]
		if !ok {
			continue
		}
		wg.Go(func() {
			resp, err := n.client.Handoff(ctx, st.PeerAddr, entries)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", owner, err))
				return
			}
			n.metrics.handoff.WithLabelValues("sent").Add(float64(resp.GetAccepted()))
			n.log.Info("corral: handed off", "to", owner, "entries", len(entries),
				"accepted", resp.GetAccepted(), "kept", resp.GetKept())
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
