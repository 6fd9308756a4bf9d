package group

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/node"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Each limit answers with its error, counts in corral_limit_hits_total, and the node goes on
// serving: bad keys and values from callers here and from peers, a peer naming an invalid
// group, a fill over Config.MaxFills.
func TestLimits(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := testConfig("solo")
	cfg.MaxValueBytes = 1000
	cfg.MaxFills = 1
	cfg.Registerer = reg
	cfg.AllowNonMemberPeers = true // the peer requests below are made in-process, from no address
	n := newNode(t, cfg)
	release := make(chan struct{})
	g := groups(t, []*node.Node{n}, "g", func(_ context.Context, key string) (string, error) {
		if key == "slow" {
			<-release
		}
		return "v", nil
	}, Options[string]{})[0]
	ctx := context.Background()
	hits := func(name string) float64 { return clustertest.MetricWithLabel(t, reg, "corral_limit_hits_total", name) }
	var le *limit.Error
	if _, err := g.Get(ctx, ""); !errors.As(err, &le) || le.Limit != "key" {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := g.Get(ctx, strings.Repeat("k", 4097)); !errors.As(err, &le) || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("long key: %v", err)
	}
	if err := g.Set(ctx, "k", strings.Repeat("v", 1001)); !errors.As(err, &le) || le.Limit != "value" {
		t.Fatalf("big value: %v", err)
	}
	if err := g.Remove(ctx, ""); !errors.As(err, &le) {
		t.Fatalf("Remove empty key: %v", err)
	}
	if v, err := g.Get(ctx, "k"); err != nil || v != "v" {
		t.Fatalf("a good key after bad input: %q %v", v, err)
	}
	if k, v := hits("key"), hits("value"); k != 3 || v != 1 {
		t.Fatalf("limit hits: key %v, value %v; want 3 and 1", k, v)
	}

	// A peer's request with a bad key, and one naming an invalid group.
	if _, err := n.Handler().Get(ctx, &peerpb.GetRequest{Group: "g", Key: make([]byte, 5000)}); !errors.Is(err, transport.ErrInvalidArgument) {
		t.Fatalf("peer Get of a 5000-byte key: %v", err)
	}
	if _, err := n.Handler().Get(ctx, &peerpb.GetRequest{Group: "no such/group!", Key: []byte("k")}); !errors.Is(err, transport.ErrUnknownGroup) {
		t.Fatalf("peer Get of an invalid group: %v", err)
	}
	if k, gn := hits("key"), hits("group_name"); k != 4 || gn != 1 {
		t.Fatalf("limit hits: key %v, group_name %v; want 4 and 1", k, gn)
	}

	// A fill over MaxFills waits for the slot; it is counted, and served once the slot frees.
	slow := make(chan error, 1)
	go func() { _, err := g.Get(ctx, "slow"); slow <- err }()
	clustertest.Eventually(t, "the slow fill holds the slot", func() bool { return n.Fills().InUse() == 1 })
	waited := make(chan error, 1)
	go func() { _, err := g.Get(ctx, "waits"); waited <- err }()
	clustertest.Eventually(t, "a fill counted as waiting", func() bool { return hits("fills") == 1 })
	if v, err := g.Get(ctx, "k"); err != nil || v != "v" {
		t.Fatalf("a hit while the fill slot is taken: %q %v", v, err)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the fill that waited: %v", err)
	}
}
