package node

import (
	"context"
	"fmt"

	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

var _ transport.LeaseHandler = server{}

// Lease serves a peer's Lease, as acting owner. Once this node has left, it answers that it
// is leaving: the caller asks the key's next owner.
func (s server) Lease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	g, err := s.leaseGroup(ctx, req.GetHeader(), req.GetGroup())
	if err != nil {
		return nil, err
	}
	return g.ServeLease(ctx, req)
}

// FillSet serves a peer's FillSet, as acting owner.
func (s server) FillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error) {
	g, err := s.leaseGroup(ctx, req.GetHeader(), req.GetEntry().GetGroup())
	if err != nil {
		return nil, err
	}
	return g.ServeFillSet(ctx, req)
}

func (s server) leaseGroup(ctx context.Context, h *peerpb.Header, group string) (Group, error) {
	n := s.n
	if err := n.admit(ctx, h); err != nil {
		return nil, err
	}
	if n.draining.Load() {
		return nil, fmt.Errorf("%w: %s has left", transport.ErrLeaving, n.cfg.Name)
	}
	return n.handle(group)
}

// leasesMoved ends, in every group, the leases of keys whose owner changed in v.
func (n *Node) leasesMoved(v *view.View) {
	for _, g := range n.groupList() {
		g.LeasesMoved(v)
	}
}
