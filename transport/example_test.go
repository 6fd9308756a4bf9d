package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// ownerHandler is the smallest useful Handler: every key has the value
// "value of KEY", except "missing" (not found) and "broken" (the loader
// fails).
type ownerHandler struct{}

var _ transport.Handler = ownerHandler{}

func (ownerHandler) Get(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	switch string(req.GetKey()) {
	case "missing":
		return nil, transport.ErrNotFound
	case "broken":
		return nil, &transport.FillFailedError{Msg: "origin: 503 Service Unavailable"}
	}
	e := &peerpb.Entry{Group: req.GetGroup(), Key: req.GetKey(), Value: []byte("value of " + string(req.GetKey()))}
	return &peerpb.GetResponse{Entry: e, Source: peerpb.Source_FILL, Found: true}, nil
}

func (ownerHandler) Set(context.Context, *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	return &peerpb.SetResponse{Version: 1}, nil
}

func (ownerHandler) Remove(context.Context, *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	return &peerpb.RemoveResponse{Version: 2}, nil
}

func (ownerHandler) Invalidate(context.Context, *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error) {
	return nil, nil
}
func (ownerHandler) WaitsFor(context.Context, *peerpb.WaitsForRequest) (*peerpb.WaitsForResponse, error) {
	return nil, nil
}
func (ownerHandler) Reconcile(context.Context, *peerpb.ReconcileRequest) (*peerpb.ReconcileResponse, error) {
	return nil, nil
}

func (ownerHandler) Handoff(context.Context, *peerpb.Entry) (bool, error) { return true, nil }

// startOwner serves ownerHandler on a loopback port; stop stops it.
func startOwner() (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv, err := transport.NewServer(ownerHandler{}, transport.ServerConfig{})
	if err != nil {
		panic(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	return lis.Addr().String(), func() {
		srv.Stop(context.Background())
		if err := <-served; err != nil {
			fmt.Println("Serve:", err)
		}
	}
}

func Example() {
	addr, stop := startOwner()
	defer stop()

	client, err := transport.NewClient(transport.ClientConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	resp, err := client.Get(context.Background(), addr, &peerpb.GetRequest{
		Header: &peerpb.Header{Sender: "node-b", Epoch: 4},
		Group:  "users",
		Key:    []byte("42"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s (%v)\n", resp.GetEntry().GetValue(), resp.GetSource())

	_, err = client.Get(context.Background(), addr, &peerpb.GetRequest{Group: "users", Key: []byte("missing")})
	fmt.Println(err == transport.ErrNotFound)
	// Output:
	// value of 42 (FILL)
	// true
}

func ExampleFillFailedError() {
	addr, stop := startOwner()
	defer stop()
	client, err := transport.NewClient(transport.ClientConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	_, err = client.Get(context.Background(), addr, &peerpb.GetRequest{Group: "users", Key: []byte("broken")})
	var ffe *transport.FillFailedError
	if errors.As(err, &ffe) {
		fmt.Println("owner's loader failed:", ffe.Msg)
	}
	// Output:
	// owner's loader failed: origin: 503 Service Unavailable
}

func ExampleIsUnreachable() {
	// An address where nothing listens: the connection is refused.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	gone := lis.Addr().String()
	lis.Close()

	client, err := transport.NewClient(transport.ClientConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	_, err = client.Get(context.Background(), gone, &peerpb.GetRequest{Group: "users", Key: []byte("42")})
	fmt.Println("unreachable:", transport.IsUnreachable(err))

	// The caller's own cancellation is not the peer's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = client.Get(ctx, gone, &peerpb.GetRequest{Group: "users", Key: []byte("42")})
	fmt.Println("unreachable:", transport.IsUnreachable(err), err)
	// Output:
	// unreachable: true
	// unreachable: false context canceled
}

func ExampleClient_Handoff() {
	addr, stop := startOwner()
	defer stop()
	client, err := transport.NewClient(transport.ClientConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	// A leaving node pushes its fresh entries to their new owner, with the
	// time they have left.
	resp, err := client.Handoff(context.Background(), addr, []*peerpb.Entry{
		{Group: "users", Key: []byte("1"), Value: []byte("a"), FreshForNanos: 30e9, Version: 3},
		{Group: "users", Key: []byte("2"), Value: []byte("b"), FreshForNanos: 12e9, Version: 8},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("accepted", resp.GetAccepted(), "kept", resp.GetKept())
	// Output:
	// accepted 2 kept 0
}
