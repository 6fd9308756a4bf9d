package corral

import (
	"context"

	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/ring"
	"github.com/corralcache/corral/transport/peerpb"
)

// handoff pushes every entry this node holds that may still be served to the key's owner
// once this node is gone (see handoff.Mover.Send).
func (n *Node) handoff(ctx context.Context) error {
	var groups []handoff.Group
	for _, g := range n.groupList() {
		groups = append(groups, handoffOf{g})
	}
	return n.mover.Send(ctx, groups)
}

// handoffOf is a group as a hand-off sees it.
type handoffOf struct{ g groupHandle }

func (h handoffOf) HandoffEntries(r *ring.Ring, self string, add func(owner string, e *peerpb.Entry)) {
	h.g.handoffEntries(r, self, add)
}

func (h handoffOf) StillCurrent(e *peerpb.Entry) bool { return h.g.stillCurrent(e) }

var _ handoff.Group = handoffOf{}
