package transport

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

func TestServerStop(t *testing.T) {
	t.Run("graceful, twice, concurrently", func(t *testing.T) {
		addr, srv := serve(t, newFakeHandler(), ServerConfig{})
		c := newClient(t, ClientConfig{})
		if _, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("k")}); err != nil {
			t.Fatalf("Get: %v", err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { srv.Stop(context.Background()) })
		}
		wg.Wait()
		// serve's cleanup checks that Serve returned nil.
	})

	t.Run("bounded by ctx", func(t *testing.T) {
		h := newFakeHandler()
		addr, srv := serve(t, h, ServerConfig{})
		c := newClient(t, ClientConfig{CallTimeout: time.Minute})
		done := make(chan error, 1)
		go func() {
			_, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("hang")})
			done <- err
		}()
		<-h.entered
		// The handler only returns when its ctx ends: a graceful stop would
		// wait a minute. An expired ctx makes Stop cancel it.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		srv.Stop(ctx)
		if err := <-done; !IsUnreachable(err) {
			t.Fatalf("call cut by Stop: %v, want unreachable", err)
		}
	})

	t.Run("never served", func(t *testing.T) {
		// NewServer starts nothing: dropping it leaks nothing (goleak in
		// TestMain checks), and Stop is harmless.
		srv, err := NewServer(newFakeHandler(), ServerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop(context.Background())
		if _, err := NewServer(newFakeHandler(), ServerConfig{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("racing Serve", func(t *testing.T) {
		// A Serve on a second listener as Stop begins: either it serves until Stop ends
		// it, or it finds the Server stopped; every Serve returns nil, and no goroutine
		// outlives Stop (goleak). (The data race CI saw once — a first Serve's sniffing
		// listener counted in framedWG as Stop began to wait on it — has too narrow a
		// window to reproduce here; Server.listen closes it by construction.)
		for range 50 {
			srv, err := NewServer(newFakeHandler(), ServerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 2)
			listen := func() net.Listener {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				return lis
			}
			first, second := listen(), listen()
			go func() { served <- srv.Serve(first) }()
			// Serving: the first Serve has made the gRPC server, so Stop waits for its
			// goroutines.
			conn, err := net.Dial("tcp", first.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conn.Write([]byte(framePreface))
			io.ReadFull(conn, make([]byte, len(framePreface)))
			conn.Close()
			go func() { served <- srv.Serve(second) }()
			srv.Stop(context.Background())
			for range 2 {
				if err := <-served; err != nil {
					t.Fatalf("Serve: %v", err)
				}
			}
		}
	})

	t.Run("before Serve", func(t *testing.T) {
		srv, err := NewServer(newFakeHandler(), ServerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop(context.Background())
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Serve(lis); err != nil {
			t.Fatalf("Serve after Stop: %v, want nil", err)
		}
		// Serve closed the listener.
		if _, err := lis.Accept(); err == nil {
			t.Fatal("listener still open")
		}
	})
}
