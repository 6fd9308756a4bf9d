package node

import (
	"context"

	"github.com/corralcache/corral/internal/handoff"
)

// handoff pushes every entry this node holds that may still be served to the key's owner
// once this node is gone (see handoff.Mover.Send).
func (n *Node) handoff(ctx context.Context) error {
	var groups []handoff.Group
	for _, g := range n.groupList() {
		groups = append(groups, g)
	}
	return n.mover.Send(ctx, groups)
}
