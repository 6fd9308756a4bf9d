package transport

import (
	"bytes"
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralcache/corral/transport/peerpb"
)

// benchResponse is what both benchmarks' servers answer: a 100-byte value.
// Shared, because it is only ever marshalled.
var benchResponse = &peerpb.GetResponse{
	Entry: &peerpb.Entry{
		Group: "g", Key: []byte("key-0001"), Value: bytes.Repeat([]byte("v"), 100),
		FreshForNanos: 60e9, Version: 1,
	},
	Source: peerpb.Source_HIT,
	Found:  true,
}

// benchHandler answers every Get with benchResponse.
type benchHandler struct{ fakeHandler }

var _ Handler = (*benchHandler)(nil)

func (*benchHandler) Get(context.Context, *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	return benchResponse, nil
}

// bareServer is the same answer without this package: the generated
// service registered directly on a default grpc.Server.
type bareServer struct{ peerpb.UnimplementedPeerServer }

var _ peerpb.PeerServer = (*bareServer)(nil)

func (*bareServer) Get(context.Context, *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	return benchResponse, nil
}

func benchRequest() *peerpb.GetRequest {
	return &peerpb.GetRequest{Header: &peerpb.Header{Sender: "node-a", Epoch: 3}, Group: "g", Key: []byte("key-0001")}
}

// BenchmarkGet is one remote Get through Client and Server.
func BenchmarkGet(b *testing.B) {
	addr, _ := serve(b, &benchHandler{}, ServerConfig{})
	c := newClient(b, ClientConfig{})
	ctx := context.Background()
	if _, err := c.Get(ctx, addr, benchRequest()); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		req := benchRequest()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Get(ctx, addr, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := benchRequest()
			for pb.Next() {
				if _, err := c.Get(ctx, addr, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkBareEcho is the same call with gRPC alone: default server and
// client options, the generated client, no deadline, no error mapping.
func BenchmarkBareEcho(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	peerpb.RegisterPeerServer(gs, &bareServer{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	b.Cleanup(func() {
		gs.Stop()
		<-served
	})
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	rpc := peerpb.NewPeerClient(cc)
	ctx := context.Background()
	if _, err := rpc.Get(ctx, benchRequest()); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		req := benchRequest()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rpc.Get(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := benchRequest()
			for pb.Next() {
				if _, err := rpc.Get(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkBareEchoDeadline is BenchmarkBareEcho/serial with a per-call
// deadline, as the Client applies one: it prices the deadline alone.
func BenchmarkBareEchoDeadline(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	peerpb.RegisterPeerServer(gs, &bareServer{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	b.Cleanup(func() {
		gs.Stop()
		<-served
	})
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	rpc := peerpb.NewPeerClient(cc)
	req := benchRequest()
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
		if _, err := rpc.Get(ctx, req); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
