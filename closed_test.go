package corral_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
)

// A node that is closing, closed or killed serves nothing a write no longer reaches.

// After Close, and after a crash, every call on the node returns ErrClosed: it serves
// neither the keys it owned nor its near copies, which no write reaches any more.
func TestClosedNodeServesNothing(t *testing.T) {
	for _, how := range []string{"close", "crash"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ec := newECluster(t, eclusterConfig{nodes: 3, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
				keys := keyList(30, "c")
				g2 := ec.g("n2")
				for range 3 { // often enough for near copies of the keys others own
					for _, k := range keys {
						if _, err := g2.Get(context.Background(), k); err != nil {
							t.Fatal(err)
						}
					}
				}
				if how == "close" {
					if err := ec.Leave(context.Background(), "n2"); err != nil {
						t.Fatal(err)
					}
				} else if err := ec.Crash("n2"); err != nil {
					t.Fatal(err)
				}
				ec.converge(t)
				for _, k := range keys {
					if err := ec.g("n0").Set(context.Background(), k, "new"); err != nil {
						t.Fatal(err)
					}
				}
				for _, k := range keys {
					v, err := g2.Get(context.Background(), k)
					if !errors.Is(err, corral.ErrClosed) {
						t.Fatalf("Get(%s) on the node after its %s = %q, %v; want ErrClosed", k, how, v, err)
					}
					if _, _, err := g2.GetWithSource(context.Background(), k); !errors.Is(err, corral.ErrClosed) {
						t.Fatalf("GetWithSource(%s) after %s: %v, want ErrClosed", k, how, err)
					}
					if _, err := g2.Lease(context.Background(), k, corral.LeaseOptions{Fill: time.Second}); !errors.Is(err, corral.ErrClosed) {
						t.Fatalf("Lease(%s) after %s: %v, want ErrClosed", k, how, err)
					}
				}
			})
		})
	}
}

// While a node drains — it has left, and answers its successors' warm pulls — its own
// application's Gets never return a value older than a write that returned before them.
func TestDrainingNodeServesNoOldValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 3, opts: []corral.GroupOption{corral.WithTTL(time.Hour)},
			node: func(string) corral.Config { return corral.Config{DrainTimeout: 5 * time.Second} }})
		keys := keyList(20, "d")
		g2 := ec.g("n2")
		for range 3 {
			for _, k := range keys {
				if _, err := g2.Get(context.Background(), k); err != nil {
					t.Fatal(err)
				}
			}
		}
		closed := make(chan error, 1)
		go func() { closed <- ec.Leave(context.Background(), "n2") }()
		written := map[string]int{}
		for gen := 1; ; gen++ {
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
			k := keys[gen%len(keys)]
			if err := ec.g("n0").Set(context.Background(), k, fmt.Sprint(gen)); err != nil {
				continue // not every member told while n2 leaves: not a completed write
			}
			written[k] = gen
			v, err := g2.Get(context.Background(), k)
			if errors.Is(err, corral.ErrClosed) {
				continue
			}
			if err != nil {
				t.Fatalf("Get(%s) on the draining node: %v", k, err)
			}
			if v != fmt.Sprint(gen) {
				t.Fatalf("Get(%s) on the draining node = %q after the write of %d returned", k, v, gen)
			}
		}
	})
}
