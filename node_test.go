package corral

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
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

func TestDefaultNameIsUnique(t *testing.T) {
	a, b := Config{BindAddr: "127.0.0.1"}, Config{BindAddr: "127.0.0.1"}
	a.validate()
	b.validate()
	if a.Name == "" || a.Name == b.Name {
		t.Fatalf("default names %q and %q", a.Name, b.Name)
	}
}

func TestBadConfig(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"bind not an IP", func(c *Config) { c.BindAddr = "localhost" }},
		{"advertise not an IP", func(c *Config) { c.AdvertiseAddr = "x" }},
		{"port out of range", func(c *Config) { c.PeerPort = 70000 }},
		{"same ports", func(c *Config) { c.PeerPort, c.GossipPort = 7000, 7000 }},
		{"key length", func(c *Config) { c.SecretKey = []byte("short") }},
		{"negative timeout", func(c *Config) { c.PeerTimeout = -1 }},
		{"bad seed", func(c *Config) { c.Join = []string{"ftp://x"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("bad")
			tt.mod(&cfg)
			if n, err := New(cfg); err == nil {
				n.Close(context.Background())
				t.Fatal("New accepted a bad config")
			}
		})
	}
}

func TestBadGroups(t *testing.T) {
	n := newNode(t, testConfig("solo"))
	load := func(context.Context, string) (string, error) { return "", nil }
	if _, err := NewGroup(n, "ok", load); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		group string
		load  LoadFunc[string]
		opts  []GroupOption
	}{
		{"duplicate", "ok", load, nil},
		{"empty name", "", load, nil},
		{"slash", "a/b", load, nil},
		{"too long", strings.Repeat("a", 65), load, nil},
		{"nil loader", "x", nil, nil},
		{"negative ttl", "x", load, []GroupOption{WithTTL(-1)}},
		{"jitter 1", "x", load, []GroupOption{WithJitter(1)}},
		{"zero fill timeout", "x", load, []GroupOption{WithFillTimeout(0)}},
		{"codec of another type", "x", load, []GroupOption{WithCodec[int](JSONCodec[int]{})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewGroup(n, tt.group, tt.load, tt.opts...); err == nil {
				t.Fatal("NewGroup accepted it")
			}
		})
	}
	// The good group still works after all that.
	g, _ := n.group("ok")
	if g == nil {
		t.Fatal("the registered group is gone")
	}
}

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
	g, _ := NewGroup(n, "g", func(_ context.Context, key string) (string, error) {
		if key == "slow" {
			<-release
		}
		return "v", nil
	})
	ctx := context.Background()
	hits := func(limit string) float64 { return metricWithLabel(t, reg, "corral_limit_hits_total", limit) }
	var le *LimitError
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
	if _, err := (server{n}).Get(ctx, &peerpb.GetRequest{Group: "g", Key: make([]byte, 5000)}); !errors.Is(err, transport.ErrInvalidArgument) {
		t.Fatalf("peer Get of a 5000-byte key: %v", err)
	}
	if _, err := (server{n}).Get(ctx, &peerpb.GetRequest{Group: "no such/group!", Key: []byte("k")}); !errors.Is(err, transport.ErrUnknownGroup) {
		t.Fatalf("peer Get of an invalid group: %v", err)
	}
	if k, gn := hits("key"), hits("group_name"); k != 4 || gn != 1 {
		t.Fatalf("limit hits: key %v, group_name %v; want 4 and 1", k, gn)
	}

	// A fill over MaxFills waits for the slot; it is counted, and served once the slot frees.
	slow := make(chan error, 1)
	go func() { _, err := g.Get(ctx, "slow"); slow <- err }()
	eventually(t, "the slow fill holds the slot", func() bool { return n.fills.InUse() == 1 })
	waited := make(chan error, 1)
	go func() { _, err := g.Get(ctx, "waits"); waited <- err }()
	eventually(t, "a fill counted as waiting", func() bool { return hits("fills") == 1 })
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

// The falsifiable claim of DESIGN.md on one node, read from the Prometheus metrics: K
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
	g, err := NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
		<-release
		return "v", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fills := func() float64 { return metricValue(t, reg, "corral_fills_total") }
	coalesced := func() float64 { return metricValue(t, reg, "corral_fill_coalesced_total") }

	for range K {
		runs.Go(func() {
			if _, err := g.Get(context.Background(), "hot"); err != nil {
				t.Error(err)
			}
		})
	}
	eventually(t, "K-1 waiters", func() bool { return g.Stats().Coalesced == K-1 })
	close(release)
	runs.Wait()
	if f, c := fills(), coalesced(); f != 1 || c != K-1 {
		t.Fatalf("fills=%v coalesced=%v, want 1 and %d", f, c, K-1)
	}
	if gets := metricValue(t, reg, "corral_gets_total"); gets != K {
		t.Fatalf("gets=%v, want %d", gets, K)
	}
}

// metricValue sums every series of one metric family gathered from reg.
func metricValue(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
			return sum
		}
	}
	tb.Fatalf("metric %s not registered", name)
	return 0
}

func TestNoRegistererRegistersNothing(t *testing.T) {
	n := newNode(t, testConfig("solo"))
	if n.metrics.reg != nil {
		t.Fatal("metrics registered without a Registerer")
	}
	// Two nodes on one registry: the second is refused with a clear error.
	reg := prometheus.NewRegistry()
	a := testConfig("a")
	a.Registerer = reg
	newNode(t, a)
	b := testConfig("b")
	b.Registerer = reg
	if nb, err := New(b); err == nil {
		nb.Close(context.Background())
		t.Fatal("two nodes registered on one registry")
	}
}

func TestLocalFillErrors(t *testing.T) {
	n := newNode(t, testConfig("solo"))
	boom := errors.New("db down")
	g, _ := NewGroup(n, "g", func(_ context.Context, key string) (string, error) {
		switch key {
		case "missing":
			return "", ErrNotFound
		case "panic":
			panic("kaboom")
		}
		return "", boom
	})
	ctx := context.Background()
	var fe *FillError
	if _, err := g.Get(ctx, "k"); !errors.As(err, &fe) || !errors.Is(err, boom) || fe.Shared || fe.Remote || fe.Group != "g" {
		t.Fatalf("failing loader: %v (%+v)", err, fe)
	}
	if _, err := g.Get(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("not found: %v", err)
	}
	if _, err := g.Get(ctx, "panic"); !errors.As(err, &fe) || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("panic: %v", err)
	}
}

func TestCloseIsIdempotentAndRefusesCalls(t *testing.T) {
	n, err := New(testConfig("solo"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewGroup(n, "g", func(context.Context, string) (string, error) { return "v", nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := g.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := NewGroup(n, "h", func(context.Context, string) (string, error) { return "", nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewGroup after Close: %v", err)
	}
}
