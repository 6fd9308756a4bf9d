package corral_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
)

// Stopping every node of a cluster at once (helm uninstall, a scale to zero, SIGTERM to every
// process) is a normal end: each Close hands off what it can, leaves with nobody left to tell,
// and returns nil within its context.
func TestCloseEveryNodeAtOnce(t *testing.T) {
	const budget = 10 * time.Second
	nodes := newCluster(t, 3)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	for i := range 30 { // entries on every member, so each Close has something to hand off
		if _, err := gs[i%len(gs)].Get(context.Background(), fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}

	type result struct {
		name string
		err  error
		took time.Duration
	}
	results := make(chan result, len(nodes))
	var start sync.WaitGroup
	start.Add(1)
	for _, n := range nodes {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			start.Wait()
			began := time.Now()
			err := n.Close(ctx)
			results <- result{n.Name(), err, time.Since(began)}
		}()
	}
	start.Done()
	for range nodes {
		r := <-results
		t.Logf("%s: Close returned %v after %v", r.name, r.err, r.took.Round(time.Millisecond))
		if r.err != nil {
			t.Errorf("%s: Close = %v, want nil", r.name, r.err)
		}
		if r.took >= budget {
			t.Errorf("%s: Close took %v, its context's whole budget", r.name, r.took)
		}
	}
}
