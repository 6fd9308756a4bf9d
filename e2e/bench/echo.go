package main

import (
	"context"
	"encoding/json"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// The bare gRPC echo: corral's own Peer service and messages, on a default grpc-go server and
// client, answering every Get with a fixed entry. It is the floor under corral's remote hit:
// the same bytes on the same wire, with no cache, routing or single flight.

type echoServer struct {
	peerpb.UnimplementedPeerServer
	value []byte
}

// Get answers with an entry shaped like the one corral's owner sends back (Group, Key, Value
// and the lifetime fields), so both carry the same payload.
func (s echoServer) Get(_ context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	return &peerpb.GetResponse{
		Entry: &peerpb.Entry{
			Group: req.GetGroup(), Key: req.GetKey(), Value: s.value,
			FreshForNanos: int64(time.Hour), StaleForNanos: int64(time.Hour), Version: 1, FillNanos: 1000,
		},
		Found:  true,
		Source: peerpb.Source_HIT,
	}, nil
}

// echoRequest is the request corral's caller sends: a header with sender and epoch.
func echoRequest(group, key string) *peerpb.GetRequest {
	return &peerpb.GetRequest{Header: &peerpb.Header{Sender: "raw-c0", Epoch: 0x5eed}, Group: group, Key: []byte(key)}
}

func init() {
	ops["echo.start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		size, lis, err := listenSized(raw)
		if err != nil {
			return nil, err
		}
		srv := grpc.NewServer()
		peerpb.RegisterPeerServer(srv, echoServer{value: payload(size)})
		go srv.Serve(lis)
		w.put("echo.server", srv, srv.Stop)
		return lis.Addr().String(), nil
	}
	ops["echo.dial"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var addr string
		if err := json.Unmarshal(raw, &addr); err != nil {
			return nil, err
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		w.put("echo.client", peerpb.NewPeerClient(conn), func() { conn.Close() })
		return nil, nil
	}
}

// The stream echo: corral's own transport — a transport.Client's GetStream to a
// transport.Server — answering every Get with the same fixed entry on the server's receive
// loop (GetHit), as corral's owner answers a hit. It is the floor under corral's remote hit
// that corral's transport sets, with no cache, routing or single flight; the bare gRPC echo
// above is the floor of a unary call.
type streamEcho struct{ echoServer }

func (s streamEcho) GetHit(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	resp, _ := s.Get(ctx, req)
	return resp, true
}

func (streamEcho) Set(context.Context, *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	return nil, transport.ErrInvalidArgument
}

func (streamEcho) Remove(context.Context, *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	return nil, transport.ErrInvalidArgument
}

func (streamEcho) Invalidate(context.Context, *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error) {
	return nil, transport.ErrInvalidArgument
}

func (streamEcho) Handoff(context.Context, *peerpb.Entry) (bool, error) {
	return false, transport.ErrInvalidArgument
}

func (streamEcho) WaitsFor(context.Context, *peerpb.WaitsForRequest) (*peerpb.WaitsForResponse, error) {
	return &peerpb.WaitsForResponse{}, nil
}

func (streamEcho) Reconcile(context.Context, *peerpb.ReconcileRequest) (*peerpb.ReconcileResponse, error) {
	return nil, transport.ErrInvalidArgument
}

// streamClient is a transport.Client and the one address it asks.
type streamClient struct {
	c    *transport.Client
	addr string
}

func init() {
	ops["stream.start"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var size int
		if err := json.Unmarshal(raw, &size); err != nil {
			return nil, err
		}
		srv, err := transport.NewServer(streamEcho{echoServer{value: payload(size)}}, transport.ServerConfig{})
		if err != nil {
			return nil, err
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		go srv.Serve(lis)
		w.put("stream.server", srv, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Stop(ctx)
		})
		return lis.Addr().String(), nil
	}
	ops["stream.dial"] = func(_ context.Context, w *workerState, raw json.RawMessage) (any, error) {
		var addr string
		if err := json.Unmarshal(raw, &addr); err != nil {
			return nil, err
		}
		c, err := transport.NewClient(transport.ClientConfig{})
		if err != nil {
			return nil, err
		}
		w.put("stream.client", &streamClient{c: c, addr: addr}, func() { c.Close() })
		return nil, nil
	}
}
