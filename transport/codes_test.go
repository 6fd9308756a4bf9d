package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralcache/corral/transport/peerpb"
)

// TestErrorMapping sends each kind of Handler error over a real connection
// and checks what the client gets: the mapping both ways at once.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name    string
		handler error // what the Handler's Get returns
		check   func(t *testing.T, err error)
	}{
		{"not found", ErrNotFound, func(t *testing.T, err error) {
			if err != ErrNotFound {
				t.Fatalf("got %v, want exactly ErrNotFound", err)
			}
		}},
		{"wrapped not found", fmt.Errorf("load: %w", ErrNotFound), func(t *testing.T, err error) {
			if err != ErrNotFound {
				t.Fatalf("got %v, want exactly ErrNotFound", err)
			}
		}},
		{"fill cycle", fmt.Errorf("%w: g/a -> g/b -> g/a", ErrFillCycle), func(t *testing.T, err error) {
			if err != ErrFillCycle {
				t.Fatalf("got %v, want exactly ErrFillCycle", err)
			}
		}},
		{"unknown group", fmt.Errorf(`%w "users"`, ErrUnknownGroup), func(t *testing.T, err error) {
			if !errors.Is(err, ErrUnknownGroup) || err.Error() != `transport: unknown group "users"` {
				t.Fatalf("got %v, want ErrUnknownGroup with the message", err)
			}
		}},
		{"invalid argument", fmt.Errorf("%w: key of 5000 bytes exceeds the 4096-byte limit", ErrInvalidArgument), func(t *testing.T, err error) {
			want := "transport: invalid argument: key of 5000 bytes exceeds the 4096-byte limit"
			if !errors.Is(err, ErrInvalidArgument) || err.Error() != want {
				t.Fatalf("got %v, want ErrInvalidArgument %q", err, want)
			}
		}},
		{"fill failed", &FillFailedError{Msg: "db: connection refused"}, func(t *testing.T, err error) {
			var ffe *FillFailedError
			if !errors.As(err, &ffe) || ffe.Msg != "db: connection refused" {
				t.Fatalf("got %v, want FillFailedError with the loader's message", err)
			}
		}},
		{"wrapped fill failed", fmt.Errorf("group g: %w", &FillFailedError{Msg: "boom"}), func(t *testing.T, err error) {
			var ffe *FillFailedError
			if !errors.As(err, &ffe) || ffe.Msg != "boom" {
				t.Fatalf("got %v, want FillFailedError boom", err)
			}
		}},
		{"other error", errors.New("disk on fire"), wantRemote("Internal", "disk on fire")},
		// A Handler that called another peer and failed must not look
		// unreachable itself.
		{"handler's own unreachable", &UnreachableError{Addr: "10.0.0.9:7947", Err: status.Error(codes.Unavailable, "refused")},
			wantRemote("Internal", "transport: peer 10.0.0.9:7947 unreachable: rpc error: code = Unavailable desc = refused")},
		{"handler's raw status", status.Error(codes.Unavailable, "x"), wantRemote("Internal", "rpc error: code = Unavailable desc = x")},
		// A fill timeout inside the Handler, while the request is live.
		{"handler's own deadline", fmt.Errorf("fill: %w", context.DeadlineExceeded), wantRemote("Internal", "fill: context deadline exceeded")},
	}
	h := newFakeHandler()
	for i, tt := range tests {
		h.errs[fmt.Sprint(i)] = tt.handler
	}
	addr, _ := serve(t, h, ServerConfig{})
	c := newClient(t, ClientConfig{})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte(fmt.Sprint(i))})
			if err == nil {
				t.Fatal("Get succeeded")
			}
			if IsUnreachable(err) {
				t.Fatalf("IsUnreachable(%v) = true for an answer", err)
			}
			tt.check(t, err)
		})
	}

	t.Run("panic", func(t *testing.T) {
		_, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("panic")})
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != "Internal" || IsUnreachable(err) {
			t.Fatalf("Get of panicking key: %v, want RemoteError Internal", err)
		}
		// The server still serves.
		if _, err := c.Get(context.Background(), addr, &peerpb.GetRequest{Group: "g", Key: []byte("ok")}); err != nil {
			t.Fatalf("Get after panic: %v", err)
		}
	})
	t.Run("unknown group on Invalidate", func(t *testing.T) {
		_, err := c.Invalidate(context.Background(), addr, &peerpb.InvalidateRequest{Group: "unknown", Key: []byte("k")})
		if !errors.Is(err, ErrUnknownGroup) || IsUnreachable(err) {
			t.Fatalf("Invalidate: %v, want ErrUnknownGroup", err)
		}
	})
}

func wantRemote(code, msg string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != code || re.Msg != msg {
			t.Fatalf("got %#v, want RemoteError{%s, %q}", err, code, msg)
		}
		for _, s := range []error{ErrNotFound, ErrFillCycle, ErrUnknownGroup, ErrInvalidArgument} {
			if errors.Is(err, s) {
				t.Fatalf("errors.Is(%v, %v) = true", err, s)
			}
		}
	}
}

// TestFromStatus checks the client side alone against statuses that gRPC,
// a proxy or an older peer could produce, which the server never sends.
func TestFromStatus(t *testing.T) {
	withDetail := func(c codes.Code, msg string, r peerpb.Reason) error {
		st, err := status.New(c, msg).WithDetails(&peerpb.ErrorDetail{Reason: r})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	const (
		unreachable = "unreachable"
		remote      = "remote"
	)
	tests := []struct {
		name string
		in   error
		want any // a sentinel, or unreachable / remote
	}{
		{"not found", status.Error(codes.NotFound, "x"), ErrNotFound},
		{"invalid", status.Error(codes.InvalidArgument, "x"), ErrInvalidArgument},
		{"too large", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (10 vs. 5)"), ErrInvalidArgument},
		{"fill cycle", withDetail(codes.Aborted, "x", peerpb.Reason_REASON_FILL_CYCLE), ErrFillCycle},
		{"aborted without detail", status.Error(codes.Aborted, "x"), remote},
		{"aborted with another detail", withDetail(codes.Aborted, "x", peerpb.Reason_REASON_FILL_FAILED), remote},
		{"unknown group", withDetail(codes.FailedPrecondition, "x", peerpb.Reason_REASON_UNKNOWN_GROUP), ErrUnknownGroup},
		{"failed precondition without detail", status.Error(codes.FailedPrecondition, "x"), remote},
		{"fill failed", withDetail(codes.Unknown, "x", peerpb.Reason_REASON_FILL_FAILED), &FillFailedError{}},
		{"unknown without detail", status.Error(codes.Unknown, "bad gateway"), remote},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), unreachable},
		{"deadline", status.Error(codes.DeadlineExceeded, "x"), unreachable},
		{"canceled by conn close", status.Error(codes.Canceled, "grpc: the client connection is closing"), unreachable},
		{"internal", status.Error(codes.Internal, "x"), remote},
		{"unimplemented", status.Error(codes.Unimplemented, "unknown method"), remote},
		{"unauthenticated", status.Error(codes.Unauthenticated, "x"), remote},
		{"permission denied", status.Error(codes.PermissionDenied, "x"), remote},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fromStatus(context.Background(), "peer:1", tt.in)
			switch want := tt.want.(type) {
			case string:
				if got := IsUnreachable(err); got != (want == unreachable) {
					t.Fatalf("IsUnreachable(%v) = %v", err, got)
				}
				var re *RemoteError
				if got := errors.As(err, &re) && re.kind == nil; got != (want == remote) {
					t.Fatalf("%v: plain RemoteError = %v, want %v", err, got, want == remote)
				}
			case *FillFailedError:
				var ffe *FillFailedError
				if !errors.As(err, &ffe) || ffe.Msg != "x" {
					t.Fatalf("got %v, want FillFailedError x", err)
				}
			case error:
				if !errors.Is(err, want) || IsUnreachable(err) {
					t.Fatalf("got %v, want %v", err, want)
				}
			}
		})
	}

	// A deadline the caller set is the caller's, even when the server
	// reports it a moment before ctx.Err() is set.
	dctx, dcancel := context.WithTimeout(context.Background(), time.Hour)
	defer dcancel()
	if err := fromStatus(dctx, "peer:1", status.Error(codes.DeadlineExceeded, "x")); err != context.DeadlineExceeded {
		t.Fatalf("caller's deadline: got %v, want context.DeadlineExceeded", err)
	}

	// The caller's own context wins over whatever gRPC said.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fromStatus(ctx, "peer:1", status.Error(codes.Canceled, "x")); err != context.Canceled {
		t.Fatalf("cancelled ctx: got %v, want context.Canceled", err)
	}
}

// TestToStatus checks the server side alone, including the context errors
// that depend on the request's context.
func TestToStatus(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		in     error
		code   codes.Code
		reason peerpb.Reason
	}{
		{"not found", live, ErrNotFound, codes.NotFound, 0},
		{"fill cycle", live, ErrFillCycle, codes.Aborted, peerpb.Reason_REASON_FILL_CYCLE},
		{"unknown group", live, ErrUnknownGroup, codes.FailedPrecondition, peerpb.Reason_REASON_UNKNOWN_GROUP},
		{"invalid", live, fmt.Errorf("%w: x", ErrInvalidArgument), codes.InvalidArgument, 0},
		{"fill failed", live, &FillFailedError{Msg: "m"}, codes.Unknown, peerpb.Reason_REASON_FILL_FAILED},
		{"ctx error, request live", live, context.Canceled, codes.Internal, 0},
		{"ctx error, request gone", gone, context.Canceled, codes.Canceled, 0},
		{"other", live, errors.New("x"), codes.Internal, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := status.Convert(toStatus(tt.ctx, tt.in))
			if st.Code() != tt.code || reason(st) != tt.reason {
				t.Fatalf("code %v reason %v, want %v %v", st.Code(), reason(st), tt.code, tt.reason)
			}
		})
	}
	if toStatus(live, nil) != nil {
		t.Fatal("toStatus(nil) != nil")
	}
}

// TestUnreachable checks IsUnreachable in both directions against real
// failures.
func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	get := func(c *Client, ctx context.Context, addr, key string) error {
		_, err := c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte(key)})
		return err
	}

	t.Run("refused", func(t *testing.T) {
		c := newClient(t, ClientConfig{})
		err := get(c, ctx, closedAddr(t), "k")
		if !IsUnreachable(err) {
			t.Fatalf("IsUnreachable(%v) = false", err)
		}
		t.Log(err)
	})

	t.Run("stopped server", func(t *testing.T) {
		addr, srv := serve(t, newFakeHandler(), ServerConfig{})
		c := newClient(t, ClientConfig{})
		if err := get(c, ctx, addr, "k"); err != nil {
			t.Fatalf("Get before Stop: %v", err)
		}
		srv.Stop(ctx)
		err := get(c, ctx, addr, "k")
		if !IsUnreachable(err) {
			t.Fatalf("IsUnreachable(%v) = false", err)
		}
		t.Log(err)
	})

	t.Run("handler hangs past CallTimeout", func(t *testing.T) {
		addr, _ := serve(t, newFakeHandler(), ServerConfig{})
		c := newClient(t, ClientConfig{CallTimeout: 100 * time.Millisecond})
		err := get(c, ctx, addr, "hang")
		if !IsUnreachable(err) {
			t.Fatalf("IsUnreachable(%v) = false", err)
		}
		t.Log(err)
	})

	t.Run("peer silent before HTTP/2", func(t *testing.T) {
		addr := newSilentListener(t)
		c := newClient(t, ClientConfig{CallTimeout: 100 * time.Millisecond})
		err := get(c, ctx, addr, "k")
		if !IsUnreachable(err) {
			t.Fatalf("IsUnreachable(%v) = false", err)
		}
		t.Log(err)
	})

	t.Run("caller cancels", func(t *testing.T) {
		h := newFakeHandler()
		addr, _ := serve(t, h, ServerConfig{})
		c := newClient(t, ClientConfig{})
		ctx, cancel := context.WithCancel(ctx)
		go func() {
			<-h.entered
			cancel()
		}()
		err := get(c, ctx, addr, "hang")
		if err != context.Canceled || IsUnreachable(err) {
			t.Fatalf("got %v, want exactly context.Canceled", err)
		}
	})

	t.Run("caller's own deadline", func(t *testing.T) {
		addr, _ := serve(t, newFakeHandler(), ServerConfig{})
		// CallTimeout is long: the ctx's own deadline is what ends the call.
		c := newClient(t, ClientConfig{CallTimeout: time.Minute})
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		err := get(c, ctx, addr, "hang")
		if err != context.DeadlineExceeded || IsUnreachable(err) {
			t.Fatalf("got %v, want exactly context.DeadlineExceeded", err)
		}
	})

	t.Run("caller cancelled before the call", func(t *testing.T) {
		c := newClient(t, ClientConfig{})
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		err := get(c, ctx, closedAddr(t), "k")
		if err != context.Canceled || IsUnreachable(err) {
			t.Fatalf("got %v, want exactly context.Canceled", err)
		}
	})

	t.Run("remote errors", func(t *testing.T) {
		h := newFakeHandler()
		h.errs["nf"] = ErrNotFound
		addr, _ := serve(t, h, ServerConfig{})
		c := newClient(t, ClientConfig{})
		if err := get(c, ctx, addr, "nf"); err == nil || IsUnreachable(err) {
			t.Fatalf("IsUnreachable(%v) = true for NotFound", err)
		}
	})

	t.Run("nil and plain errors", func(t *testing.T) {
		for _, err := range []error{nil, errors.New("x"), context.Canceled, context.DeadlineExceeded, ErrNotFound} {
			if IsUnreachable(err) {
				t.Fatalf("IsUnreachable(%v) = true", err)
			}
		}
	})
}

func TestOnCall(t *testing.T) {
	h := newFakeHandler()
	h.errs["nf"] = ErrNotFound
	addr, _ := serve(t, h, ServerConfig{})

	type call struct{ method, code string }
	var mu sync.Mutex // guards calls
	var calls []call
	c := newClient(t, ClientConfig{OnCall: func(method, code string, d time.Duration) {
		if d <= 0 {
			t.Errorf("OnCall(%s, %s) with duration %v", method, code, d)
		}
		mu.Lock()
		calls = append(calls, call{method, code})
		mu.Unlock()
	}})
	ctx := context.Background()
	_, _ = c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("k")})
	_, _ = c.Get(ctx, addr, &peerpb.GetRequest{Group: "g", Key: []byte("nf")})
	_, _ = c.Set(ctx, addr, &peerpb.SetRequest{Entry: &peerpb.Entry{Key: []byte("k")}})
	_, _ = c.Remove(ctx, addr, &peerpb.RemoveRequest{Key: []byte("k")})
	_, _ = c.Invalidate(ctx, addr, &peerpb.InvalidateRequest{Key: []byte("k")})
	_, _ = c.Handoff(ctx, addr, []*peerpb.Entry{{Key: []byte("k")}})
	_, _ = c.Get(ctx, closedAddr(t), &peerpb.GetRequest{Key: []byte("k")})

	want := []call{
		{"Get", "OK"}, {"Get", "NotFound"}, {"Set", "OK"}, {"Remove", "OK"},
		{"Invalidate", "OK"}, {"Handoff", "OK"}, {"Get", "Unavailable"},
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("OnCall saw %v, want %v", calls, want)
	}
}
