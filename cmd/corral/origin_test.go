package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOriginRetriesAConnectionNotMade loads from an origin address where nothing listens at
// first and a server starts while the load waits to try again: the load succeeds, from one
// request. An origin that never listens fails after dialAttempts tries, and the error says so.
func TestOriginRetriesAConnectionNotMade(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	var served atomic.Int64
	started := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "v:"+r.URL.Path)
	})}
	t.Cleanup(func() { srv.Close() })

	o, err := newOrigin("http://"+addr+"/{key}", 5*time.Second, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The first dial is refused: start the server then, before the next try.
	o.client.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, a)
		if err != nil {
			select {
			case <-started:
			default:
				l, lerr := net.Listen("tcp", addr)
				if lerr != nil {
					t.Errorf("listen again on %s: %v", addr, lerr)
				} else {
					go srv.Serve(l)
				}
				close(started)
			}
		}
		return c, err
	}
	v, err := o.load("g")(context.Background(), "k")
	if err != nil {
		t.Fatalf("load after one refused dial: %v", err)
	}
	if string(v.Body) != "v:/k" || served.Load() != 1 {
		t.Errorf("got %q from %d origin requests, want %q from 1", v.Body, served.Load(), "v:/k")
	}

	never, err := newOrigin("http://"+freeAddr(t)+"/{key}", 5*time.Second, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	never.client.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}
	_, err = never.load("g")(context.Background(), "k")
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "(3 attempts)") {
		t.Errorf("load from an origin that never listens: %v, want connection refused after 3 attempts", err)
	}
	if dials.Load() != dialAttempts {
		t.Errorf("%d dials, want %d", dials.Load(), dialAttempts)
	}
}

// freeAddr returns a loopback address where nothing listens.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
