package corral_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
)

func TestOneNodeCluster(t *testing.T) {
	n := newNode(t, testConfig("solo"))
	if ms := n.Members(); len(ms) != 1 || ms[0].Name != "solo" || ms[0].PeerAddr != n.PeerAddr() || ms[0].GossipAddr != n.GossipAddr() {
		t.Fatalf("Members = %+v", ms)
	}
	if !strings.HasPrefix(n.GossipAddr(), "127.0.0.1:") || strings.HasSuffix(n.GossipAddr(), ":0") {
		t.Fatalf("GossipAddr = %q", n.GossipAddr())
	}
	if o := n.Owner("any"); o.Name != "solo" {
		t.Fatalf("Owner = %+v", o)
	}
}

func TestBadConfig(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*corral.Config)
	}{
		{"bind not an IP", func(c *corral.Config) { c.BindAddr = "localhost" }},
		{"advertise not an IP", func(c *corral.Config) { c.AdvertiseAddr = "x" }},
		{"port out of range", func(c *corral.Config) { c.PeerPort = 70000 }},
		{"same ports", func(c *corral.Config) { c.PeerPort, c.GossipPort = 7000, 7000 }},
		{"key length", func(c *corral.Config) { c.SecretKey = []byte("short") }},
		{"negative timeout", func(c *corral.Config) { c.PeerTimeout = -1 }},
		{"bad seed", func(c *corral.Config) { c.Join = []string{"ftp://x"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("bad")
			tt.mod(&cfg)
			if n, err := corral.New(cfg); err == nil {
				n.Close(context.Background())
				t.Fatal("New accepted a bad config")
			}
		})
	}
}

func TestBadGroups(t *testing.T) {
	n := newNode(t, testConfig("solo"))
	load := func(context.Context, string) (string, error) { return "", nil }
	if _, err := corral.NewGroup(n, "ok", load); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		group string
		load  corral.LoadFunc[string]
		opts  []corral.GroupOption
	}{
		{"duplicate", "ok", load, nil},
		{"empty name", "", load, nil},
		{"slash", "a/b", load, nil},
		{"too long", strings.Repeat("a", 65), load, nil},
		{"nil loader", "x", nil, nil},
		{"negative ttl", "x", load, []corral.GroupOption{corral.WithTTL(-1)}},
		{"jitter 1", "x", load, []corral.GroupOption{corral.WithJitter(1)}},
		{"zero fill timeout", "x", load, []corral.GroupOption{corral.WithFillTimeout(0)}},
		{"codec of another type", "x", load, []corral.GroupOption{corral.WithCodec[int](corral.JSONCodec[int]{})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := corral.NewGroup(n, tt.group, tt.load, tt.opts...); err == nil {
				t.Fatal("NewGroup accepted it")
			}
		})
	}
	// The good group still works after all that.
	if _, ok := n.Stats()["ok"]; !ok {
		t.Fatal("the registered group is gone")
	}
}

// The falsifiable claim on one node, read from the Prometheus metrics: K
// concurrent Gets for an expired key add 1 to corral_fills_total and K−1 to
// corral_fill_coalesced_total.
func TestFalsifiableClaimOneNode(t *testing.T) {
	const K = 100
	reg := prometheus.NewRegistry()
	cfg := testConfig("solo")
	cfg.Registerer = reg
	n := newNode(t, cfg)
	release := make(chan struct{})
	var runs sync.WaitGroup
	g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
		<-release
		return "v", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fills := func() float64 { return clustertest.MetricValue(t, reg, "corral_fills_total") }
	coalesced := func() float64 { return clustertest.MetricValue(t, reg, "corral_fill_coalesced_total") }

	for range K {
		runs.Go(func() {
			if _, err := g.Get(context.Background(), "hot"); err != nil {
				t.Error(err)
			}
		})
	}
	clustertest.Eventually(t, "K-1 waiters", func() bool { return g.Stats().Coalesced == K-1 })
	close(release)
	runs.Wait()
	if f, c := fills(), coalesced(); f != 1 || c != K-1 {
		t.Fatalf("fills=%v coalesced=%v, want 1 and %d", f, c, K-1)
	}
	if gets := clustertest.MetricValue(t, reg, "corral_gets_total"); gets != K {
		t.Fatalf("gets=%v, want %d", gets, K)
	}
}

func TestLocalFillErrors(t *testing.T) {
	n := newNode(t, testConfig("solo"))
	boom := errors.New("db down")
	g, _ := corral.NewGroup(n, "g", func(_ context.Context, key string) (string, error) {
		switch key {
		case "missing":
			return "", corral.ErrNotFound
		case "panic":
			panic("kaboom")
		}
		return "", boom
	})
	ctx := context.Background()
	var fe *corral.FillError
	if _, err := g.Get(ctx, "k"); !errors.As(err, &fe) || !errors.Is(err, boom) || fe.Shared || fe.Remote || fe.Group != "g" {
		t.Fatalf("failing loader: %v (%+v)", err, fe)
	}
	if _, err := g.Get(ctx, "missing"); !errors.Is(err, corral.ErrNotFound) {
		t.Fatalf("not found: %v", err)
	}
	if _, err := g.Get(ctx, "panic"); !errors.As(err, &fe) || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("panic: %v", err)
	}
}

func TestCloseIsIdempotentAndRefusesCalls(t *testing.T) {
	n, err := corral.New(testConfig("solo"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := corral.NewGroup(n, "g", func(context.Context, string) (string, error) { return "v", nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := g.Get(ctx, "k"); !errors.Is(err, corral.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := corral.NewGroup(n, "h", func(context.Context, string) (string, error) { return "", nil }); !errors.Is(err, corral.ErrClosed) {
		t.Fatalf("NewGroup after Close: %v", err)
	}
}
