package transport

import (
	"context"
	"fmt"

	"github.com/corralcache/corral/transport/peerpb"
)

// BackupHandler keeps the copies a key's owner gives the members that would own the key if
// it were gone (peer.proto's Backup). A Handler that implements it serves them; a Server
// whose Handler does not answers them Unimplemented. It is an interface of its own, as
// LeaseHandler is. Its method may be called by many goroutines at once, and follows
// Handler's error rules.
type BackupHandler interface {
	// Backup keeps each entry of req, unless a write newer than it is known here, and
	// answers which it kept, in order.
	Backup(ctx context.Context, req *peerpb.BackupRequest) (*peerpb.BackupResponse, error)
}

// Backup gives the peer at addr copies of entries this node owns (see BackupHandler).
func (c *Client) Backup(ctx context.Context, addr string, req *peerpb.BackupRequest) (*peerpb.BackupResponse, error) {
	return unary(c, ctx, addr, "Backup", req, peerpb.PeerClient.Backup)
}

func (p *peerService) Backup(ctx context.Context, req *peerpb.BackupRequest) (resp *peerpb.BackupResponse, err error) {
	defer p.recoverPanic("Backup", &err)
	bh, ok := p.h.(BackupHandler)
	if !ok {
		return nil, unimplemented("transport: this peer keeps no backups")
	}
	for i, e := range req.GetEntries() {
		if e == nil {
			return nil, toStatus(ctx, fmt.Errorf("%w: backup entry %d is nil", ErrInvalidArgument, i))
		}
	}
	resp, err = bh.Backup(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.BackupResponse{}
	}
	return resp, nil
}
