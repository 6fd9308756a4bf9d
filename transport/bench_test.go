package transport

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
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

// BenchmarkGet is one remote Get through Client and Server: on a framed stream and on the
// gRPC stream (a peer without framing), plaintext and with mutual TLS; one process for both
// sides.
func BenchmarkGet(b *testing.B) {
	plainAddr, _ := serve(b, &benchHandler{}, ServerConfig{})
	serverTLS, clientTLS := newTestCA(b).mutualTLS(b)
	tlsAddr, _ := serve(b, &benchHandler{}, ServerConfig{TLS: serverTLS})
	for _, path := range []struct {
		name         string
		framing, tls bool
	}{{"framed", true, false}, {"grpc", false, false}, {"framed+tls", true, true}, {"grpc+tls", false, true}} {
		b.Run(path.name, func(b *testing.B) {
			addr, cfg := plainAddr, ClientConfig{}
			if path.tls {
				addr, cfg = tlsAddr, ClientConfig{TLS: clientTLS}
			}
			c := newClient(b, cfg)
			c.framing = path.framing
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
		})
	}
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

// sizedHandler answers every Get with a value of its size, as a hit (HitHandler).
type sizedHandler struct {
	fakeHandler
	resp *peerpb.GetResponse
}

func (h *sizedHandler) Get(context.Context, *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	return h.resp, nil
}

func (h *sizedHandler) GetHit(context.Context, *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	return h.resp, true
}

// BenchmarkGetValueSize compares a Get on the stream with a unary Get on the same connection,
// by value size, at GOMAXPROCS and 8×GOMAXPROCS callers: where a value is large enough that the unary call is no
// dearer (its per-call cost is small beside the copy) is where keeping large values off the
// shared stream could pay.
func BenchmarkGetValueSize(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 64 << 10, 1 << 20} {
		h := &sizedHandler{resp: &peerpb.GetResponse{Found: true, Source: peerpb.Source_HIT,
			Entry: &peerpb.Entry{Group: "g", Key: []byte("k"), Value: bytes.Repeat([]byte("v"), size), FreshForNanos: 60e9}}}
		addr, _ := serve(b, h, ServerConfig{})
		c := newClient(b, ClientConfig{})
		ctx := context.Background()
		p, err := c.conn(addr)
		if err != nil {
			b.Fatal(err)
		}
		calls := []struct {
			name string
			get  func() error
		}{
			{"stream", func() error { _, err := c.Get(ctx, addr, benchRequest()); return err }},
			{"unary", func() error { _, err := p.rpc.Get(ctx, benchRequest()); return err }},
		}
		for _, call := range calls {
			if err := call.get(); err != nil {
				b.Fatal(err)
			}
			for _, callers := range []int{1, 8} {
				b.Run(fmt.Sprintf("%s/size=%d/goroutines=%d", call.name, size, callers*runtime.GOMAXPROCS(0)), func(b *testing.B) {
					b.SetBytes(int64(size))
					b.SetParallelism(callers)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := call.get(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		}
	}
}

// keyedHandler answers "big" with big and anything else with small, as hits.
type keyedHandler struct {
	fakeHandler
	small, big *peerpb.GetResponse
}

func (h *keyedHandler) Get(_ context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	if string(req.GetKey()) == "big" {
		return h.big, nil
	}
	return h.small, nil
}

func (h *keyedHandler) GetHit(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, bool) {
	resp, _ := h.Get(ctx, req)
	return resp, true
}

// BenchmarkSmallBehindLarge prices head-of-line blocking: serial 100-byte Gets on the stream
// while another goroutine keeps fetching 1 MiB values from the same peer, on the stream
// (whose frames the small answers queue behind), as unary calls (HTTP/2 streams of their
// own, whose frames interleave with the stream's), or through Client.Get of values held by
// the peer, which it answers past MaxStreamAnswer by asking for a unary call ("redirected").
func BenchmarkSmallBehindLarge(b *testing.B) {
	entry := func(n int, src peerpb.Source) *peerpb.GetResponse {
		return &peerpb.GetResponse{Found: true, Source: src, Entry: &peerpb.Entry{Group: "g", Key: []byte("k"), Value: bytes.Repeat([]byte("v"), n)}}
	}
	for _, bigOn := range []string{"none", "stream", "unary", "redirected"} {
		b.Run("large-on-"+bigOn, func(b *testing.B) {
			big, via := entry(1<<20, peerpb.Source_FILL), bigOn // a fill's answer stays on the stream
			if bigOn == "redirected" {
				big, via = entry(1<<20, peerpb.Source_HIT), "stream"
			}
			addr, _ := serve(b, &keyedHandler{small: entry(100, peerpb.Source_HIT), big: big}, ServerConfig{})
			c := newClient(b, ClientConfig{})
			ctx, cancel := context.WithCancel(context.Background())
			p, err := c.conn(addr)
			if err != nil {
				b.Fatal(err)
			}
			bigReq := &peerpb.GetRequest{Group: "g", Key: []byte("big")}
			var wg sync.WaitGroup
			if via != "none" {
				wg.Go(func() {
					for ctx.Err() == nil {
						if via == "stream" {
							c.Get(ctx, addr, bigReq)
						} else {
							p.rpc.Get(ctx, bigReq)
						}
					}
				})
			}
			req := benchRequest()
			for b.Loop() {
				if _, err := c.Get(context.Background(), addr, req); err != nil {
					b.Fatal(err)
				}
			}
			cancel()
			wg.Wait()
		})
	}
}
