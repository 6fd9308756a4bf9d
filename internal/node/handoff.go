package node

import (
	"context"

	"github.com/corralcache/corral/internal/handoff"
)

// handoff pushes every entry this node holds that may still be served to the key's owner
// once this node is gone, but those before records as delivered unchanged (see
// handoff.Mover.Send), and returns the entries it delivered.
func (n *Node) handoff(ctx context.Context, before handoff.Sent) (handoff.Sent, error) {
	var groups []handoff.Group
	for _, g := range n.groupList() {
		groups = append(groups, g)
	}
	return n.mover.Send(ctx, groups, before)
}
