package group

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/node"
)

// A member restarted in place — same name, same addresses, a new process — is asked for its
// keys as soon as this node's view has its new life: the breaker that requests to its old life
// tripped, and the connection to that address, belong to the old process.
func TestRestartInPlaceIsReachedAtOnce(t *testing.T) {
	nodes := newCluster(t, 2)
	loadOn := func(name string) func(context.Context, string) (string, error) {
		return func(ctx context.Context, key string) (string, error) { return name + ":" + key, nil }
	}
	g0 := groups(t, nodes[:1], "g", loadOn("n0"), Options[string]{})[0]
	groups(t, nodes[1:], "g", loadOn("n1"), Options[string]{})
	port := func(addr string) int {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(p)
		return n
	}
	cfg := testConfig("n1", nodes[0].GossipAddr())
	cfg.GossipPort, cfg.PeerPort = port(nodes[1].GossipAddr()), port(nodes[1].PeerAddr())
	peerAddr := nodes[1].PeerAddr()
	routedTo := func(owner, prefix string) string {
		for i := range 10000 {
			if k := prefix + strconv.Itoa(i); nodes[0].Owner(k).Name == owner {
				return k
			}
		}
		t.Fatalf("no key routed to %s", owner)
		return ""
	}
	before := routedTo("n1", "before")
	nodes[1].Kill()

	// Requests find the old life unreachable, again and again: its breaker is open for long.
	ctx := context.Background()
	if v, err := g0.Get(ctx, before); err != nil || v[:3] != "n0:" {
		t.Fatalf("Get while the owner is dead = %q, %v; want a fill on n0", v, err)
	}
	for range 3 {
		nodes[0].Router().Breakers().Trip(peerAddr, time.Now())
	}
	if !nodes[0].Router().Breakers().Skip(peerAddr, time.Now()) {
		t.Fatal("the dead member's breaker is not open")
	}

	oldStart := nodes[0].View().Members["n1"].Started
	n1 := newNode(t, cfg)
	groups(t, []*node.Node{n1}, "g", loadOn("n1"), Options[string]{})
	clustertest.Eventually(t, "n0 sees n1's new life", func() bool {
		st, ok := nodes[0].View().Members["n1"]
		return ok && !st.Started.Equal(oldStart)
	})
	key := routedTo("n1", "after")
	start := time.Now()
	v, err := g0.Get(ctx, key)
	if err != nil || v != "n1:"+key {
		t.Fatalf("Get of n1's key after its restart = %q, %v; want it filled on n1 (the old life's breaker or connection was kept)", v, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Get of n1's key after its restart took %v", d)
	}
}
