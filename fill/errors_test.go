package fill

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFailedFillPoisonsNothing(t *testing.T) {
	boom := errors.New("db down")
	l := &counting{release: make(chan struct{}), value: func(_ string, run int64) (string, error) {
		if run == 1 {
			return "", boom
		}
		return "ok", nil
	}}
	c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute})

	errs := make(chan error, 3)
	go func() { _, err := c.Get(context.Background(), "k"); errs <- err }()
	eventually(t, "fill started", func() bool { return l.runs.Load() == 1 })
	for range 2 {
		go func() { _, err := c.Get(context.Background(), "k"); errs <- err }()
	}
	eventually(t, "waiters joined", func() bool { return c.Stats().Coalesced == 2 })
	close(l.release)

	var leaders, shared int
	for range 3 {
		err := <-errs
		var fe *FillError
		if !errors.As(err, &fe) || !errors.Is(err, boom) || fe.Key != "k" {
			t.Fatalf("err = %v, want a FillError wrapping %v", err, boom)
		}
		if fe.Shared {
			shared++
		} else {
			leaders++
		}
	}
	if leaders != 1 || shared != 2 {
		t.Fatalf("leaders=%d shared=%d, want 1 and 2", leaders, shared)
	}
	if _, ok := c.Peek("k"); ok {
		t.Fatal("a failed fill stored something")
	}
	if s := c.Stats(); s.FillErrors != 1 {
		t.Fatalf("FillErrors = %d", s.FillErrors)
	}
	// The next Get fills again.
	if v, err := c.Get(context.Background(), "k"); err != nil || v != "ok" {
		t.Fatalf("Get after failure = %q, %v", v, err)
	}
}

func TestLoaderPanicIsRecoveredAndLogged(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	c, _ := newTest(t, func(context.Context, string) (string, error) {
		panic("kaboom")
	}, Config[string]{Logger: logger})

	_, err := c.Get(context.Background(), "k")
	var fe *FillError
	var pe *PanicError
	if !errors.As(err, &fe) || !errors.As(err, &pe) || pe.Value != "kaboom" {
		t.Fatalf("err = %v, want FillError with PanicError", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "kaboom") || !strings.Contains(logs.String(), "goroutine") {
		t.Fatalf("panic not logged with its stack: %s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestNotFound(t *testing.T) {
	tests := []struct {
		name     string
		negTTL   time.Duration
		wantRuns int64
	}{
		{"not remembered", 0, 3},
		{"remembered", time.Minute, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &counting{value: func(string, int64) (string, error) { return "", ErrNotFound }}
			c, _ := newTest(t, l.load, Config[string]{NegativeTTL: tt.negTTL})
			for range 3 {
				if _, err := c.Get(context.Background(), "missing"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get = %v, want ErrNotFound", err)
				}
			}
			if got := l.runs.Load(); got != tt.wantRuns {
				t.Fatalf("loader ran %d times, want %d", got, tt.wantRuns)
			}
			if s := c.Stats(); s.FillErrors != 0 {
				t.Fatalf("ErrNotFound counted as a fill error: %+v", s)
			}
		})
	}
}

func TestNegativeEntryExpires(t *testing.T) {
	found := false
	var mu sync.Mutex
	l := &counting{value: func(string, int64) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if !found {
			return "", ErrNotFound
		}
		return "here", nil
	}}
	c, clk := newTest(t, l.load, Config[string]{NegativeTTL: time.Second, TTL: time.Minute})
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	mu.Lock()
	found = true
	mu.Unlock()
	if _, err := c.Get(context.Background(), "k"); !errors.Is(err, ErrNotFound) {
		t.Fatal("negative entry not remembered:", err)
	}
	clk.Advance(2 * time.Second)
	if v, err := c.Get(context.Background(), "k"); err != nil || v != "here" {
		t.Fatalf("after NegativeTTL: %q, %v", v, err)
	}
}

func TestFillCycleOnOneCache(t *testing.T) {
	var c *Replica[string]
	c, _ = newTest(t, func(ctx context.Context, key string) (string, error) {
		if key == "self" {
			return c.Get(ctx, "self")
		}
		if key == "a" {
			return c.Get(ctx, "b") // a → b → a
		}
		return c.Get(ctx, "a")
	}, Config[string]{FillTimeout: time.Minute})

	for _, key := range []string{"self", "a"} {
		done := make(chan error, 1)
		go func() { _, err := c.Get(context.Background(), key); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrFillCycle) {
				t.Fatalf("Get(%s) = %v, want ErrFillCycle", key, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Get(%s) deadlocked", key)
		}
	}
}

func TestFillCycleAcrossCaches(t *testing.T) {
	var users, orders *Replica[string]
	users, _ = newTest(t, func(ctx context.Context, key string) (string, error) {
		return orders.Get(ctx, key)
	}, Config[string]{Name: "users"})
	orders, _ = newTest(t, func(ctx context.Context, key string) (string, error) {
		return users.Get(ctx, key)
	}, Config[string]{Name: "orders"})
	if _, err := users.Get(context.Background(), "1"); !errors.Is(err, ErrFillCycle) {
		t.Fatalf("err = %v, want ErrFillCycle", err)
	}
	// Same key, different caches is not a cycle by itself.
	orders2, _ := newTest(t, func(ctx context.Context, key string) (string, error) { return "o" + key, nil },
		Config[string]{Name: "orders2"})
	users2, _ := newTest(t, func(ctx context.Context, key string) (string, error) { return orders2.Get(ctx, key) },
		Config[string]{Name: "users2"})
	if v, err := users2.Get(context.Background(), "1"); err != nil || v != "o1" {
		t.Fatalf("nested fill = %q, %v", v, err)
	}
}

func TestChainCrossesAsStrings(t *testing.T) {
	ctx := WithChain(context.Background(), []string{"users/1", "orders/a/b", "malformed"})
	if got := Chain(ctx); len(got) != 2 || got[0] != "users/1" || got[1] != "orders/a/b" {
		t.Fatalf("Chain = %q", got)
	}
	if !InChain(ctx, "orders", "a/b") || InChain(ctx, "orders", "a") {
		t.Fatal("InChain disagrees with the chain")
	}
	if got, want := OuterChain(ctx), Chain(Outer(ctx)); len(got) != 1 || got[0] != "users/1" || len(want) != 1 || want[0] != got[0] {
		t.Fatalf("OuterChain = %q, Chain(Outer) = %q, want [users/1]", got, want)
	}
	if got := OuterChain(context.Background()); got != nil {
		t.Fatalf("OuterChain of no chain = %q", got)
	}
	c, _ := newTest(t, (&counting{}).load, Config[string]{Name: "orders"})
	if _, err := c.Get(ctx, "a/b"); !errors.Is(err, ErrFillCycle) {
		t.Fatalf("Get under a chain holding the key = %v", err)
	}
}

func TestFillTimeoutBoundsALoaderThatIgnoresItsContext(t *testing.T) {
	stuck := make(chan struct{})
	c, _ := newTest(t, func(context.Context, string) (string, error) {
		<-stuck // ignores ctx
		return "late", nil
	}, Config[string]{FillTimeout: 20 * time.Millisecond})
	defer close(stuck)
	_, err := c.Get(context.Background(), "k")
	var fe *FillError
	if !errors.As(err, &fe) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a FillError wrapping DeadlineExceeded", err)
	}
}
