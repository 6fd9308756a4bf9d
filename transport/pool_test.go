package transport

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

func TestOneConnectionPerAddress(t *testing.T) {
	lis := newCountingListener(t)
	addr := lis.Addr().String()
	serveOn(t, newFakeHandler(), ServerConfig{}, lis)
	c := newClient(t, ClientConfig{})

	const n = 100
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			_, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("k")})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
	}
	if got := lis.count(); got != 1 {
		t.Fatalf("server accepted %d connections, want 1", got)
	}
	if got := connCount(c); got != 1 {
		t.Fatalf("client holds %d connections, want 1", got)
	}
}

func TestForget(t *testing.T) {
	lis := newCountingListener(t)
	addr := lis.Addr().String()
	serveOn(t, newFakeHandler(), ServerConfig{}, lis)
	c := newClient(t, ClientConfig{})
	ctx := context.Background()
	req := &peerpb.GetRequest{Group: "g", Key: []byte("k")}

	if _, err := c.Get(ctx, addr, req); err != nil {
		t.Fatalf("Get: %v", err)
	}
	c.Forget(addr)
	waitClosed(t, lis, 1) // the server saw the connection go
	if got := connCount(c); got != 0 {
		t.Fatalf("client holds %d connections after Forget, want 0", got)
	}
	if _, err := c.Get(ctx, addr, req); err != nil {
		t.Fatalf("Get after Forget: %v", err)
	}
	if got := lis.count(); got != 2 {
		t.Fatalf("server accepted %d connections, want 2 (a redial)", got)
	}
	c.Forget("127.0.0.1:1") // unknown: nothing happens

	if _, err := c.Get(ctx, "", req); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Get with empty address: %v, want ErrInvalidArgument", err)
	}
}

func TestForgetDuringCall(t *testing.T) {
	h := newFakeHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	go func() {
		<-h.entered
		c.Forget(addr)
	}()
	_, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("hang")})
	if !IsUnreachable(err) {
		t.Fatalf("call cut by Forget: %v, want unreachable", err)
	}
}

func TestClientClose(t *testing.T) {
	h := newFakeHandler()
	addr, _ := serve(t, h, ServerConfig{})
	c, err := NewClient(ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("k")}); err != nil {
		t.Fatalf("Get: %v", err)
	}

	// A call in flight when Close comes fails with ErrClosed.
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("hang")})
		done <- err
	}()
	<-h.entered
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("call in flight: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("k")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Handoff(ctx, addr, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Handoff after Close: %v, want ErrClosed", err)
	}
	c.Forget(addr) // harmless after Close
}

func TestConnectTimeout(t *testing.T) {
	// A peer that accepts TCP and never speaks: with a long CallTimeout,
	// the connection attempt's own bound ends the call.
	addr := newSilentListener(t)
	c := newClient(t, ClientConfig{ConnectTimeout: 100 * time.Millisecond, CallTimeout: time.Minute})
	begin := time.Now()
	_, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("k")})
	if !IsUnreachable(err) {
		t.Fatalf("Get: %v, want unreachable", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Fatalf("Get took %v, want about ConnectTimeout", d)
	}
	t.Log(err)
}

func connCount(c *Client) int {
	n := 0
	c.conns.Range(func(any, any) bool { n++; return true })
	return n
}

// Prepare connects in the background, once however often it is called, and the calls after
// it use that connection; after Close it does nothing.
func TestPrepare(t *testing.T) {
	lis := newCountingListener(t)
	addr := lis.Addr().String()
	serveOn(t, newFakeHandler(), ServerConfig{}, lis)
	c := newClient(t, ClientConfig{})

	c.Prepare(addr)
	c.Prepare(addr)
	for deadline := time.Now().Add(5 * time.Second); lis.count() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Prepare made no connection within 5s")
		}
	}
	if _, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("k")}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := lis.count(); got != 1 {
		t.Fatalf("server accepted %d connections, want the prepared one", got)
	}

	other := newCountingListener(t)
	serveOn(t, newFakeHandler(), ServerConfig{}, other)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c.Prepare(other.Addr().String())
	c.Prepare("") // refused as a call would be: nothing happens
	if got := connCount(c); got != 0 {
		t.Fatalf("a closed client holds %d connections after Prepare", got)
	}
}
