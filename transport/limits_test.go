package transport

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

func TestMaxMessageSize(t *testing.T) {
	const limit = 64 << 10
	big := &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte("big"), Value: bytes.Repeat([]byte("x"), limit+1)}}
	small := &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte("small"), Value: []byte("x")}}
	ctx := context.Background()

	check := func(t *testing.T, err error, side string) {
		t.Helper()
		if !errors.Is(err, ErrInvalidArgument) || IsUnreachable(err) {
			t.Fatalf("oversized Set: %v, want ErrInvalidArgument", err)
		}
		if !strings.Contains(err.Error(), "MaxMessageSize") || !strings.Contains(err.Error(), side) {
			t.Fatalf("error %q does not name the limit and the side", err)
		}
		t.Log(err)
	}

	t.Run("refused by the client", func(t *testing.T) {
		addr, _ := serve(t, newFakeHandler(), ServerConfig{})
		c := newClient(t, ClientConfig{MaxMessageSize: limit})
		_, err := c.Set(ctx, addr, big)
		check(t, err, "trying to send")
		if _, err := c.Set(ctx, addr, small); err != nil {
			t.Fatalf("small Set after the big one: %v", err)
		}
	})

	t.Run("refused by the server", func(t *testing.T) {
		addr, _ := serve(t, newFakeHandler(), ServerConfig{MaxMessageSize: limit})
		c := newClient(t, ClientConfig{})
		other := newClient(t, ClientConfig{})
		_, err := c.Set(ctx, addr, big)
		check(t, err, "received")
		// The same connection and another one are still served.
		if _, err := c.Set(ctx, addr, small); err != nil {
			t.Fatalf("small Set on the same client: %v", err)
		}
		if _, err := other.Set(ctx, addr, small); err != nil {
			t.Fatalf("small Set on another client: %v", err)
		}
	})

	t.Run("answer refused by the client", func(t *testing.T) {
		// A value held by the server, larger than it sends on a stream (MaxStreamAnswer):
		// the caller asks with a unary call, whose answer gRPC refuses.
		h := newFakeHandler()
		addr, _ := serve(t, h, ServerConfig{})
		writer := newClient(t, ClientConfig{})
		if _, err := writer.Set(ctx, addr, big); err != nil {
			t.Fatalf("Set under the default limit: %v", err)
		}
		reader := newClient(t, ClientConfig{MaxMessageSize: limit})
		_, err := reader.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("big")})
		check(t, err, "received")
	})

	t.Run("answer on the stream refused by the client", func(t *testing.T) {
		h := newFakeHandler()
		addr, _ := serve(t, h, ServerConfig{MaxStreamAnswer: -1})
		writer := newClient(t, ClientConfig{})
		if _, err := writer.Set(ctx, addr, big); err != nil {
			t.Fatalf("Set under the default limit: %v", err)
		}
		reader := newClient(t, ClientConfig{MaxMessageSize: limit})
		// Gets travel on a stream that a message over the limit would end: the server
		// answers the one call with the caller's limit instead, and the stream goes on.
		_, err := reader.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("big")})
		check(t, err, "the caller's")
		if _, err := writer.Set(ctx, addr, small); err != nil {
			t.Fatalf("Set small: %v", err)
		}
		if _, err := reader.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("small")}); err != nil {
			t.Fatalf("small Get after the big one: %v", err)
		}
	})

	t.Run("default limit takes an 8 MiB value", func(t *testing.T) {
		addr, _ := serve(t, newFakeHandler(), ServerConfig{})
		// 8 MiB through -race on a busy machine takes seconds: this is about the limit.
		c := newClient(t, ClientConfig{CallTimeout: time.Minute})
		v := bytes.Repeat([]byte("y"), 8<<20)
		if _, err := c.Set(ctx, addr, &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte(strings.Repeat("k", 4096)), Value: v}}); err != nil {
			t.Fatalf("Set of 8 MiB value with a 4 KiB key: %v", err)
		}
		resp, err := c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte(strings.Repeat("k", 4096)), Peek: true})
		if err != nil || !bytes.Equal(resp.GetEntry().GetValue(), v) {
			t.Fatalf("Get of 8 MiB value: %v", err)
		}
	})
}
