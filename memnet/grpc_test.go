package memnet_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/corralcache/corral/memnet"
)

// echoDesc is a hand-written gRPC service, so that the test needs no generated code: a unary
// Echo (which, for "block", waits for its ctx to end) and a bidirectional Stream that echoes
// each message.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "memnet.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if in.Value == "block" {
				<-ctx.Done()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return in, nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			for {
				in := new(wrapperspb.StringValue)
				if err := stream.RecvMsg(in); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				if err := stream.SendMsg(in); err != nil {
					return err
				}
			}
		},
	}},
}

// serveEcho starts a gRPC server with the echo service on h:7947 and returns its Stop.
func serveEcho(t *testing.T, h *memnet.Host) (stop func()) {
	t.Helper()
	ln, err := h.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	s.RegisterService(&echoDesc, struct{}{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		s.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			// Serve's error after a crash closed its listener.
			if !strings.Contains(err.Error(), "closed") {
				t.Errorf("Serve: %v", err)
			}
		}
	}
}

// dialEcho returns a client on from for the server at addr, dialled as corral's transport dials
// (passthrough, a context dialer), with a reconnect backoff of at most a second.
func dialEcho(t *testing.T, from *memnet.Host, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	bo := backoff.DefaultConfig
	bo.MaxDelay = time.Second
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(from.DialContext),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func echo(ctx context.Context, cc *grpc.ClientConn, s string) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, "/memnet.test.Echo/Echo", wrapperspb.String(s), out)
	return out.GetValue(), err
}

// echoWithin calls Echo with a timeout and returns the answer, the error and the virtual time
// the call took.
func echoWithin(cc *grpc.ClientConn, s string, timeout time.Duration) (string, error, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	v, err := echo(ctx, cc, s)
	return v, err, time.Since(start)
}

func TestGRPCUnaryAndStreaming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		srv, cli := n.NewHost(), n.NewHost()
		stop := serveEcho(t, srv)
		defer stop()
		cc := dialEcho(t, cli, srv.Addr(port))
		defer cc.Close()

		start := time.Now()
		if v, err := echo(t.Context(), cc, "hello"); v != "hello" || err != nil {
			t.Fatalf("Echo = %q, %v", v, err)
		}
		t.Logf("first call, with connection set-up: %v (virtual)", time.Since(start))
		start = time.Now()
		if v, err := echo(t.Context(), cc, "again"); v != "again" || err != nil {
			t.Fatalf("Echo = %q, %v", v, err)
		}
		if took := time.Since(start); took != 2*time.Millisecond {
			t.Errorf("a call on an open connection took %v, want one round trip (2ms)", took)
		}

		stream, err := cc.NewStream(t.Context(), &echoDesc.Streams[0], "/memnet.test.Echo/Stream")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"a", "b", "c"} {
			if err := stream.SendMsg(wrapperspb.String(s)); err != nil {
				t.Fatal(err)
			}
		}
		stream.CloseSend()
		var got []string
		for {
			in := new(wrapperspb.StringValue)
			if err := stream.RecvMsg(in); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				break
			}
			got = append(got, in.Value)
		}
		if strings.Join(got, "") != "abc" {
			t.Errorf("stream echoed %q, want abc", got)
		}
	})
}

func TestGRPCDeadlineFiresInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		srv, cli := n.NewHost(), n.NewHost()
		stop := serveEcho(t, srv)
		defer stop()
		cc := dialEcho(t, cli, srv.Addr(port))
		defer cc.Close()
		if _, err := echo(t.Context(), cc, "warm up"); err != nil {
			t.Fatal(err)
		}
		_, err, took := echoWithin(cc, "block", 1500*time.Millisecond)
		if status.Code(err) != codes.DeadlineExceeded || took != 1500*time.Millisecond {
			t.Errorf("a blocked call: %v after %v, want DeadlineExceeded after 1.5s", err, took)
		}
	})
}

// TestGRPCFaults checks how calls fail under each fault, as over a real network: a paused or
// partitioned server makes calls hang until their deadline, and once the fault is undone the
// same connection serves again.
func TestGRPCFaults(t *testing.T) {
	tests := []struct {
		name  string
		apply func(n *memnet.Network, srv, cli *memnet.Host)
		undo  func(n *memnet.Network, srv, cli *memnet.Host)
	}{
		{"pause server", func(_ *memnet.Network, srv, _ *memnet.Host) { srv.Pause() },
			func(_ *memnet.Network, srv, _ *memnet.Host) { srv.Resume() }},
		{"pause client", func(_ *memnet.Network, _, cli *memnet.Host) { cli.Pause() },
			func(_ *memnet.Network, _, cli *memnet.Host) { cli.Resume() }},
		{"partition", func(n *memnet.Network, srv, cli *memnet.Host) { n.Partition([]*memnet.Host{srv}, []*memnet.Host{cli}) },
			func(n *memnet.Network, _, _ *memnet.Host) { n.Heal() }},
		{"one-way cut", func(n *memnet.Network, srv, cli *memnet.Host) { n.Cut([]*memnet.Host{srv}, []*memnet.Host{cli}) },
			func(n *memnet.Network, _, _ *memnet.Host) { n.Heal() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
				srv, cli := n.NewHost(), n.NewHost()
				stop := serveEcho(t, srv)
				defer stop()
				cc := dialEcho(t, cli, srv.Addr(port))
				defer cc.Close()
				if _, err := echo(t.Context(), cc, "warm up"); err != nil {
					t.Fatal(err)
				}

				tt.apply(n, srv, cli)
				_, err, took := echoWithin(cc, "x", 2*time.Second)
				if status.Code(err) != codes.DeadlineExceeded || took != 2*time.Second {
					t.Errorf("call during the fault: %v after %v, want DeadlineExceeded after 2s", err, took)
				}
				tt.undo(n, srv, cli)
				if v, err, took := echoWithin(cc, "y", 2*time.Second); v != "y" || err != nil {
					t.Errorf("call after undo: %q, %v after %v", v, err, took)
				}
				if s := n.Stats(); s.Conns != 1 {
					t.Errorf("%d connections made, want 1 (the first one survives the fault)", s.Conns)
				}
			})
		})
	}
}

// TestGRPCServerCrashAndRestart checks that a crashed server fails calls in flight and new
// calls at once (Unavailable), as a reset and a refused connection do, and that the client
// reconnects to a server restarted at the same address.
func TestGRPCServerCrashAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		srv, cli := n.NewHost(), n.NewHost()
		stop := serveEcho(t, srv)
		cc := dialEcho(t, cli, srv.Addr(port))
		defer cc.Close()
		if _, err := echo(t.Context(), cc, "warm up"); err != nil {
			t.Fatal(err)
		}

		inFlight := make(chan error, 1)
		go func() {
			_, err, _ := echoWithin(cc, "block", 10*time.Second)
			inFlight <- err
		}()
		time.Sleep(10 * time.Millisecond)
		crashed := time.Now()
		srv.Crash()
		stop() // the crashed process's goroutines end with it
		if err := <-inFlight; status.Code(err) != codes.Unavailable || time.Since(crashed) != time.Millisecond {
			t.Errorf("call in flight: %v after %v, want Unavailable after the link delay (1ms)", err, time.Since(crashed))
		}
		_, err, took := echoWithin(cc, "x", 10*time.Second)
		if status.Code(err) != codes.Unavailable || took > 10*time.Millisecond {
			t.Errorf("call to a crashed server: %v after %v, want Unavailable within a few round trips", err, took)
		}

		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		stop = serveEcho(t, srv)
		defer stop()
		restarted := time.Now()
		for {
			// A call during the reconnect backoff fails at once; the client retries within
			// the backoff's MaxDelay (1s).
			v, err, _ := echoWithin(cc, "back", time.Second)
			if err == nil && v == "back" {
				break
			}
			if time.Since(restarted) > 5*time.Second {
				t.Fatalf("no answer %v after restart: %v", time.Since(restarted), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("answered again %v (virtual) after restart", time.Since(restarted))
	})
}

// TestGRPCKeepaliveDetectsPausedServer checks that gRPC's keepalive timers run on virtual time:
// a stream to a server that stops answering fails once a ping goes unanswered.
func TestGRPCKeepaliveDetectsPausedServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		srv, cli := n.NewHost(), n.NewHost()
		stop := serveEcho(t, srv)
		defer stop()
		ka := keepalive.ClientParameters{Time: 10 * time.Second, Timeout: time.Second, PermitWithoutStream: true}
		cc := dialEcho(t, cli, srv.Addr(port), grpc.WithKeepaliveParams(ka))
		defer cc.Close()
		stream, err := cc.NewStream(t.Context(), &echoDesc.Streams[0], "/memnet.test.Echo/Stream")
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.SendMsg(wrapperspb.String("hi")); err != nil {
			t.Fatal(err)
		}
		if err := stream.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatal(err)
		}
		paused := time.Now()
		srv.Pause()
		err = stream.RecvMsg(new(wrapperspb.StringValue))
		took := time.Since(paused)
		if status.Code(err) != codes.Unavailable || took < ka.Time || took > ka.Time+ka.Timeout+time.Second {
			t.Errorf("stream to a paused server: %v after %v, want Unavailable after about %v", err, took, ka.Time+ka.Timeout)
		}
		t.Logf("keepalive ended the stream %v (virtual) after the pause: %v", took, err)
		srv.Resume()
	})
}

var flagGRPCCalls = flag.Int("memnet.grpccalls", 0, "make this many unary gRPC calls over memnet in a bubble and report their cost (0 = skip)")

// TestMeasureGRPC reports the wall-clock and CPU cost of one unary call between two hosts in a
// bubble, links of 1ms, on one connection, -memnet.grpccalls calls from 8 goroutines. Both
// clocks are read outside the bubble (inside, time.Now is virtual), so they include the set-up
// of one server and one connection.
func TestMeasureGRPC(t *testing.T) {
	calls := *flagGRPCCalls
	if calls == 0 {
		t.Skip("-memnet.grpccalls not set")
	}
	startWall, startCPU := time.Now(), cpuTime()
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		srv, cli := n.NewHost(), n.NewHost()
		stop := serveEcho(t, srv)
		defer stop()
		cc := dialEcho(t, cli, srv.Addr(port))
		defer cc.Close()
		if _, err := echo(t.Context(), cc, "warm up"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < calls; i += 8 {
					if _, err := echo(t.Context(), cc, "x"); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	wall, cpu := time.Since(startWall), cpuTime()-startCPU
	t.Logf("GOMAXPROCS=%d, %d unary calls: wall %v (%v each), CPU %v (%v each)", runtime.GOMAXPROCS(0), calls,
		wall.Round(time.Millisecond), wall/time.Duration(calls), cpu.Round(time.Millisecond), cpu/time.Duration(calls))
}
