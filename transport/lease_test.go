package transport

import (
	"context"
	"errors"
	"testing"

	"github.com/corralcache/corral/transport/peerpb"
)

// leaseHandler is fakeHandler with leases: Lease grants "tok" for key "free" and answers
// busy otherwise; FillSet stores only with "tok", and fails with ErrInvalidArgument for key
// "bad".
type leaseHandler struct{ *fakeHandler }

var _ LeaseHandler = leaseHandler{}

func (leaseHandler) Lease(ctx context.Context, req *peerpb.LeaseRequest) (*peerpb.LeaseResponse, error) {
	if string(req.GetKey()) == "free" {
		return &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_FILL, Token: "tok"}, nil
	}
	return &peerpb.LeaseResponse{State: peerpb.LeaseState_LEASE_STATE_BUSY}, nil
}

func (leaseHandler) FillSet(ctx context.Context, req *peerpb.FillSetRequest) (*peerpb.FillSetResponse, error) {
	if string(req.GetEntry().GetKey()) == "bad" {
		return nil, errors.Join(ErrInvalidArgument, errors.New("bad key"))
	}
	if req.GetToken() != "tok" {
		return nil, nil // an empty answer: not stored
	}
	return &peerpb.FillSetResponse{Stored: true, Version: 7}, nil
}

func TestLeaseRoundTrip(t *testing.T) {
	addr, _ := serve(t, leaseHandler{newFakeHandler()}, ServerConfig{})
	c := newClient(t, ClientConfig{})
	ctx := context.Background()
	resp, err := c.Lease(ctx, addr, &peerpb.LeaseRequest{Group: "g", Key: []byte("free"), FillNanos: 1e9})
	if err != nil || resp.GetState() != peerpb.LeaseState_LEASE_STATE_FILL || resp.GetToken() != "tok" {
		t.Fatalf("Lease = %v, %v", resp, err)
	}
	entry := &peerpb.Entry{Group: "g", Key: []byte("k"), Value: []byte("v")}
	if r, err := c.FillSet(ctx, addr, &peerpb.FillSetRequest{Entry: entry, Token: "tok"}); err != nil || !r.GetStored() || r.GetVersion() != 7 {
		t.Fatalf("FillSet = %v, %v", r, err)
	}
	if r, err := c.FillSet(ctx, addr, &peerpb.FillSetRequest{Entry: entry, Token: "old"}); err != nil || r.GetStored() {
		t.Fatalf("FillSet with another token = %v, %v", r, err)
	}
	if _, err := c.FillSet(ctx, addr, &peerpb.FillSetRequest{Token: "tok"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("FillSet without an entry: %v", err)
	}
	bad := &peerpb.Entry{Group: "g", Key: []byte("bad")}
	if _, err := c.FillSet(ctx, addr, &peerpb.FillSetRequest{Entry: bad, Token: "tok"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("FillSet of a bad key: %v", err)
	}
}

// A Handler written before leases answers them Unimplemented: a *RemoteError, never
// unreachable (so a caller does not fail over for it).
func TestLeaseUnimplemented(t *testing.T) {
	addr, _ := serve(t, newFakeHandler(), ServerConfig{})
	c := newClient(t, ClientConfig{})
	_, err := c.Lease(context.Background(), addr, &peerpb.LeaseRequest{Group: "g", Key: []byte("k")})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != "Unimplemented" || IsUnreachable(err) {
		t.Fatalf("Lease on a Handler without leases: %v", err)
	}
}
