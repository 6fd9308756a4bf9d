package node

import "github.com/corralcache/corral/internal/view"

// leasesMoved ends, in every group, the leases of keys whose owner changed in v.
func (n *Node) leasesMoved(v *view.View) {
	for _, g := range n.groupList() {
		g.LeasesMoved(v)
	}
}
