package fill

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counting is a loader that counts its runs and can be held until released.
type counting struct {
	runs    atomic.Int64
	release chan struct{} // nil = return at once
	value   func(key string, run int64) (string, error)
}

func (l *counting) load(ctx context.Context, key string) (string, error) {
	n := l.runs.Add(1)
	if l.release != nil {
		select {
		case <-l.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if l.value != nil {
		return l.value(key, n)
	}
	return "v:" + key, nil
}

// newTest returns a cache on a fake clock, closed at cleanup: a Replica configured with rc[0]
// (none: one that shares nothing), so that the tests of its own methods use it too.
func newTest[V any](tb testing.TB, load LoadFunc[V], cfg Config[V], rc ...ReplicaConfig) (*Replica[V], *FakeClock) {
	tb.Helper()
	return newReplicaTest(tb, plain(load), cfg, append(rc, ReplicaConfig{})[0])
}

// plain is load as a ReplicaLoadFunc: it copies nothing.
func plain[V any](load LoadFunc[V]) ReplicaLoadFunc[V] {
	if load == nil {
		return nil
	}
	return func(ctx context.Context, key string) (V, *Copy, error) {
		v, err := load(ctx, key)
		return v, nil, err
	}
}

// newReplicaTest is newTest of a replica configured with rc.
func newReplicaTest[V any](tb testing.TB, load ReplicaLoadFunc[V], cfg Config[V], rc ReplicaConfig) (*Replica[V], *FakeClock) {
	tb.Helper()
	clk := &FakeClock{}
	if cfg.Clock == nil {
		cfg.Clock = clk
	}
	c, err := NewReplica(load, nil, cfg, rc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			tb.Error(err)
		}
	})
	return c, clk
}

// eventually polls cond until it holds or the deadline passes.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
