package fill

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Cycles entered from several keys at once — each fill started by its own caller, so no
// chain holds another — fail with ErrFillCycle instead of waiting out the fill timeout:
// within one cache (a → b → a) and across caches (x/1 → y/1 → z/1 → x/1).
func TestWaitGraphFindsCyclesEnteredAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		caches []string // cache of each key of the cycle
	}{
		{"one cache", []string{"a", "a"}},
		{"three caches", []string{"x", "y", "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			graph := NewWaitGraph(nil)
			caches := map[string]*Replica[string]{}
			n := len(tt.caches)
			var started sync.WaitGroup
			started.Add(n)
			allStarted := make(chan struct{})
			go func() { started.Wait(); close(allStarted) }()
			// Key i of the cycle is fmt.Sprint(i) in cache tt.caches[i]; its loader asks for
			// key i+1, once every fill of the cycle has started.
			for _, name := range tt.caches {
				if caches[name] != nil {
					continue
				}
				c, _ := newTest(t, func(ctx context.Context, key string) (string, error) {
					var i int
					fmt.Sscan(key, &i)
					started.Done()
					<-allStarted
					next := (i + 1) % n
					return caches[tt.caches[next]].Get(ctx, fmt.Sprint(next))
				}, Config[string]{Name: name, FillTimeout: time.Minute}, ReplicaConfig{Waits: graph.Hook(nil)})
				caches[name] = c
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for i, name := range tt.caches {
				wg.Go(func() {
					_, err := caches[name].Get(ctx, fmt.Sprint(i))
					if !errors.Is(err, ErrFillCycle) {
						t.Errorf("Get(%s/%d) = %v, want ErrFillCycle", name, i, err)
					}
				})
			}
			wg.Wait()
			for _, name := range tt.caches {
				if w := graph.WaitsOf(name, "0"); len(w) != 0 {
					t.Fatalf("waits left in the graph: %v", w)
				}
			}
		})
	}
}

// A loader that waits on a fill which waits on nothing in its chain is not a cycle: two
// fills sharing a third are left alone.
func TestWaitGraphLeavesSharedWaitsAlone(t *testing.T) {
	graph := NewWaitGraph(nil)
	release := make(chan struct{})
	var c *Replica[string]
	c, _ = newTest(t, func(ctx context.Context, key string) (string, error) {
		if key == "shared" {
			<-release
			return "s", nil
		}
		return c.Get(ctx, "shared")
	}, Config[string]{FillTimeout: time.Minute}, ReplicaConfig{Waits: graph.Hook(nil)})
	var wg sync.WaitGroup
	for _, k := range []string{"a", "b"} {
		wg.Go(func() {
			if v, err := c.Get(context.Background(), k); err != nil || v != "s" {
				t.Errorf("Get(%s) = %q, %v", k, v, err)
			}
		})
	}
	eventually(t, "both fills waiting on shared", func() bool { return len(graph.WaitsOf("default", "a"))+len(graph.WaitsOf("default", "b")) == 2 })
	close(release)
	wg.Wait()
}

// Waits on fills elsewhere are followed through resolve.
func TestWaitGraphFollowsRemoteWaits(t *testing.T) {
	// Elsewhere, the fill of r/remote waits on default/a here.
	graph := NewWaitGraph(func(ctx context.Context, t WaitTarget) ([]WaitTarget, error) {
		if t.Cache == "r" && t.Key == "remote" && t.Where == "peer" {
			return []WaitTarget{{Cache: "default", Key: "a"}}, nil
		}
		return nil, nil
	})
	hook := graph.Hook(func(string) string { return "peer" })
	var c *Replica[string]
	c, _ = newTest(t, func(ctx context.Context, key string) (string, error) {
		// The fill of a waits on r/remote, which it joined.
		_, err := hook.Wait(ctx, "r", "remote", true)
		return "", err
	}, Config[string]{}, ReplicaConfig{Waits: graph.Hook(nil)})
	if _, err := c.Get(context.Background(), "a"); !errors.Is(err, ErrFillCycle) {
		t.Fatalf("Get = %v, want ErrFillCycle", err)
	}
}
