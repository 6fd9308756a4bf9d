package group

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/lease"
)

// leaseTally counts the answers of many concurrent Lease calls.
type leaseTally struct {
	mu     sync.Mutex
	states map[lease.State]int
	tokens []string
	values map[string]int
}

func newLeaseTally() *leaseTally {
	return &leaseTally{states: map[lease.State]int{}, values: map[string]int{}}
}

func (t *leaseTally) add(l lease.Answer[string]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.states[l.State]++
	if l.Token != "" {
		t.tokens = append(t.tokens, l.Token)
	}
	if l.State == lease.Hit || l.State == lease.Stale {
		t.values[l.Entry.Value]++
	}
}

// Past its TTL but within its SWR, a value is served stale to everyone, and exactly one
// caller in the cluster gets a token to refresh it.
func TestStaleHandsOutOneRefreshToken(t *testing.T) {
	nodes := newCluster(t, 3)
	gs := groups(t, nodes, "g", noLoader, Options[string]{})
	ctx := context.Background()
	if err := gs[0].SetWithExpiry(ctx, "s", "old", lease.Expiry{TTL: 50 * time.Millisecond, SWR: time.Hour}); err != nil {
		t.Fatal(err)
	}
	owner := ownerGroup(t, gs, "s")
	clustertest.Eventually(t, "the value to go stale", func() bool {
		e, ok := owner.local.Peek("s")
		return ok && e.FreshFor <= 0
	})
	const K = 30
	tally := newLeaseTally()
	var wg sync.WaitGroup
	for _, g := range gs {
		for range K {
			wg.Go(func() {
				l, err := g.Lease(ctx, "s", time.Minute, time.Second)
				if err != nil {
					t.Errorf("Lease: %v", err)
					return
				}
				tally.add(l)
			})
		}
	}
	wg.Wait()
	if tally.states[lease.Stale] != 3*K || tally.values["old"] != 3*K || len(tally.tokens) != 1 {
		t.Fatalf("answers %v, values %v, %d tokens; want %d stale \"old\" and 1 token", tally.states, tally.values, len(tally.tokens), 3*K)
	}
	if ok, err := gs[2].FillSet(ctx, "s", "new", tally.tokens[0], lease.Expiry{TTL: time.Hour}); !ok || err != nil {
		t.Fatalf("refresh FillSet = %v, %v", ok, err)
	}
	if l, err := gs[1].Lease(ctx, "s", time.Minute, 0); l.State != lease.Hit || l.Entry.Value != "new" || err != nil {
		t.Fatalf("Lease after the refresh = %+v, %v", l, err)
	}
}

func ownerGroup(tb testing.TB, gs []*Group[string], key string) *Group[string] {
	tb.Helper()
	for _, g := range gs {
		if g.node.Owner(key).Name == g.node.Name() {
			return g
		}
	}
	tb.Fatal("no owner of", key)
	return nil
}
