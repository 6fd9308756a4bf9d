package node

import (
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/transport"
)

func (n *Node) handle(group string) (Group, error) {
	g, ok := n.Group(group)
	if !ok && fill.CheckName(group) != nil {
		n.metrics.limits.hit(limit.GroupName)
	}
	if !ok && n.cfg.AutoGroup != nil && fill.CheckName(group) == nil && !n.leaving.Load() {
		if err := n.cfg.AutoGroup(group); err != nil {
			n.log.Warn("corral: AutoGroup failed", "group", group, "err", err)
		}
		g, ok = n.Group(group)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q on %s", transport.ErrUnknownGroup, group, n.cfg.Name)
	}
	return g, nil
}

// ownerLookup and ownerServe are the groups as the owner's side sees them
// (owner.Config.Lookup and Serve).
func (n *Node) ownerLookup(name string) (owner.Group, bool) {
	g, ok := n.Group(name)
	return g, ok
}

func (n *Node) ownerServe(name string) (owner.Group, error) {
	g, err := n.handle(name)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Handler is the node's side of the peer protocol, which its peer server serves: for a test
// that plays a peer in-process.
func (n *Node) Handler() *owner.Server { return n.owner }
