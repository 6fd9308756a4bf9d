package transport

import (
	"context"
	"fmt"

	"github.com/corralcache/corral/transport/peerpb"
)

// LeaseHandler answers the lease requests (peer.proto's Lease and FillSet). A Handler that
// implements it serves them; a Server whose Handler does not answers them Unimplemented.
// It is an interface of its own so that a Handler written before leases keeps compiling.
// Its methods may be called by many goroutines at once, and follow Handler's error rules.
type LeaseHandler interface {
	// Lease answers with the key's lease state, holding the request for up to
	// req.WaitNanos while another caller holds the lease. It must return soon after ctx
	// ends.
	Lease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error)

	// FillSet stores req.Entry on this node as owner: with req.Token only while that lease
	// is live (Stored false otherwise). The Server rejects a request without an entry with
	// ErrInvalidArgument before calling FillSet.
	FillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error)
}

// Lease asks the peer at addr for a key's lease (see LeaseHandler.Lease). The call may be
// held by the peer for req.WaitNanos: give ctx a deadline beyond it.
func (c *Client) Lease(ctx context.Context, addr string, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	return unary(c, ctx, addr, "Lease", req, peerpb.PeerClient.Lease)
}

// FillSet stores a value through the peer at addr (see LeaseHandler.FillSet).
func (c *Client) FillSet(ctx context.Context, addr string, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error) {
	return unary(c, ctx, addr, "FillSet", req, peerpb.PeerClient.FillSet)
}

func (p *peerService) Lease(ctx context.Context, req *peerpb.LeaseRequest) (resp *peerpb.LeaseResponse, err error) {
	defer p.recoverPanic("Lease", &err)
	lh, ok := p.h.(LeaseHandler)
	if !ok {
		return nil, unimplemented("transport: this peer serves no leases")
	}
	resp, err = lh.Lease(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.LeaseResponse{}
	}
	return resp, nil
}

func (p *peerService) FillSet(ctx context.Context, req *peerpb.FillSetRequest) (resp *peerpb.FillSetResponse, err error) {
	defer p.recoverPanic("FillSet", &err)
	lh, ok := p.h.(LeaseHandler)
	if !ok {
		return nil, unimplemented("transport: this peer serves no leases")
	}
	if req.GetEntry() == nil {
		return nil, toStatus(ctx, fmt.Errorf("%w: fill-set request without an entry", ErrInvalidArgument))
	}
	resp, err = lh.FillSet(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.FillSetResponse{}
	}
	return resp, nil
}
