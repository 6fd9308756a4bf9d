package corraltest_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
	"github.com/corralcache/corral/memnet"
)

// The owner of a hot key is cut off from the cluster for 15 s — partitioned, cut one way in
// either direction, or paused — while a reader on each side does, every 250 ms, a Get of the
// hot key and a Get of a key nobody has read yet, whose owner may be on either side. No Get
// fails, and none waits longer than twice SilentPeerTimeout and a fill: a request finds its
// owner silent within the bound once, and the acting owner it goes to answers within it; a
// node cut off fills the keys of the members it cannot reach itself, having found them all
// silent at once; and no request waits on a member found silent again while it still is.
// (Before, each time a breaker's window ended, a request waited on its silent member once
// more, and the isolated side's first reads took up to 0.9 s.) A paused owner's own side
// is its Gets' callers only (nothing it sends leaves): it reads nothing. Virtual time.
func TestFaultedOwnerFirstReads(t *testing.T) {
	faults := []struct {
		name     string
		apply    func(c *corraltest.Cluster, owner string, rest []string)
		readsOwn bool // a reader on the owner's side
	}{
		{"partition", func(c *corraltest.Cluster, owner string, rest []string) {
			c.Partition([]string{owner}, rest)
		}, true},
		{"cut from the owner", func(c *corraltest.Cluster, owner string, rest []string) {
			c.Network.Cut(hosts(c, owner), hosts(c, rest...))
		}, true},
		{"cut to the owner", func(c *corraltest.Cluster, owner string, rest []string) {
			c.Network.Cut(hosts(c, rest...), hosts(c, owner))
		}, true},
		{"pause", func(c *corraltest.Cluster, owner string, rest []string) { c.Pause(owner) }, false},
	}
	for _, f := range faults {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed %d", f.name, seed+1), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testFaultedOwnerFirstReads(t, seed+1, f.apply, f.readsOwn) })
			})
		}
	}
}

// fillTime is how long the loader of TestFaultedOwnerFirstReads takes.
const fillTime = 5 * time.Millisecond

func testFaultedOwnerFirstReads(t *testing.T, seed uint64, fault func(c *corraltest.Cluster, owner string, rest []string), readsOwn bool) {
	var mu sync.Mutex
	groups := map[string]*corral.Group[string]{}
	c, err := corraltest.New(corraltest.Config{
		Nodes: 5, Seed: seed, Link: memnet.Link{Delay: time.Millisecond, Jitter: time.Millisecond},
		Setup: func(n *corral.Node) error {
			g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
				time.Sleep(fillTime)
				return "v:" + key, nil
			}, corral.WithTTL(10*time.Minute), corral.WithFillTimeout(5*time.Second))
			mu.Lock()
			groups[n.Name()] = g
			mu.Unlock()
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	const hot = "hot"
	owner := c.Node("n0").Owner(hot).Name
	var rest []string
	for _, n := range c.Nodes() {
		if n.Name() != owner {
			rest = append(rest, n.Name())
		}
		if _, err := groups[n.Name()].Get(ctx, hot); err != nil { // warm, everywhere
			t.Fatal(err)
		}
	}

	fault(c, owner, rest)
	stop := time.Now().Add(15 * time.Second)
	type read struct {
		node, key string
		took      time.Duration
		err       error
	}
	var sides [2][]read
	var wg sync.WaitGroup
	for side := range 2 {
		if side == 0 && !readsOwn {
			continue
		}
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				node := owner
				if side == 1 {
					node = rest[i%len(rest)]
				}
				for _, k := range []string{hot, fmt.Sprintf("first-%d-%d", side, i)} {
					start := time.Now()
					v, err := groups[node].Get(ctx, k)
					if err == nil && v != "v:"+k {
						err = fmt.Errorf("value %q", v)
					}
					sides[side] = append(sides[side], read{node, k, time.Since(start), err})
				}
				time.Sleep(250 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	c.Heal()
	c.Resume(owner)

	// A member found silent within the bound, once, and an acting owner's answer within it
	// (its warm pull's question to the silent owner), then the fill; each message on the way
	// takes a millisecond or two.
	bound := 2*corral.DefaultConfig().SilentPeerTimeout + fillTime + 10*time.Millisecond
	for side, reads := range sides {
		if len(reads) == 0 {
			continue
		}
		name := map[int]string{0: "the owner's side", 1: "the others' side"}[side]
		var took []time.Duration
		for _, r := range reads {
			took = append(took, r.took)
			if r.err != nil {
				t.Errorf("%s: Get(%s) on %s: %v", name, r.key, r.node, r.err)
			} else if r.took > bound {
				t.Errorf("%s: Get(%s) on %s took %v, past %v", name, r.key, r.node, r.took, bound)
			}
		}
		t.Logf("%s: %d Gets, the slowest %v", name, len(reads), slices.Max(took))
	}
}

func hosts(c *corraltest.Cluster, names ...string) []*memnet.Host {
	var out []*memnet.Host
	for _, n := range names {
		out = append(out, c.Host(n))
	}
	return out
}
