package corral

// Tests of how New composes a node's parts, which reach past the public API to a part: the
// owner's side, the router's breakers, the fill limiter. The cluster's behaviour through the
// public API is tested in package corral_test.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	grpcpeer "google.golang.org/grpc/peer"

	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// loopback is a node on loopback with free ports and the timings of package corral_test's
// testConfig, which hold on a busy machine.
func loopback(name string, seeds ...string) Config {
	return Config{
		Name: name, BindAddr: "127.0.0.1", Join: seeds,
		GossipInterval: 20 * time.Millisecond, ProbeInterval: 250 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond,
		SilentPeerTimeout: time.Second, PushPullInterval: time.Second, SuspicionMult: 4, RejoinInterval: time.Second,
		DrainTimeout: 50 * time.Millisecond, PeerTimeout: 2 * time.Second,
	}
}

// start starts a node as cfg says, and closes it when tb ends.
func start(tb testing.TB, cfg Config) *Node {
	tb.Helper()
	var logs *clustertest.SyncBuffer
	if cfg.Logger == nil {
		logs = &clustertest.SyncBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	n, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
		if logs != nil && tb.Failed() {
			tb.Logf("%s logged:\n%s", cfg.Name, logs.String())
		}
	})
	return n
}

// startTwo starts two nodes, n1 joining n0, and waits until both see both.
func startTwo(tb testing.TB) (n0, n1 *Node) {
	tb.Helper()
	n0 = start(tb, loopback("n0"))
	n1 = start(tb, loopback("n1", n0.GossipAddr()))
	clustertest.Eventually(tb, "2 members everywhere", func() bool {
		return len(n0.Members()) == 2 && len(n1.Members()) == 2
	})
	return n0, n1
}

// keyRoutedTo returns a key that n routes to the member called owner.
func keyRoutedTo(tb testing.TB, n *Node, owner, prefix string) string {
	tb.Helper()
	for i := range 10000 {
		if k := prefix + strconv.Itoa(i); n.Owner(k).Name == owner {
			return k
		}
	}
	tb.Fatalf("no key routed to %s", owner)
	return ""
}

func TestDefaultNameIsUnique(t *testing.T) {
	a, b := Config{BindAddr: "127.0.0.1"}, Config{BindAddr: "127.0.0.1"}
	a.validate()
	b.validate()
	if a.Name == "" || a.Name == b.Name {
		t.Fatalf("default names %q and %q", a.Name, b.Name)
	}
}

func TestNoRegistererRegistersNothing(t *testing.T) {
	n := start(t, loopback("solo"))
	if n.metrics.reg != nil {
		t.Fatal("metrics registered without a Registerer")
	}
	// Two nodes on one registry: the second is refused with a clear error.
	reg := prometheus.NewRegistry()
	a := loopback("a")
	a.Registerer = reg
	start(t, a)
	b := loopback("b")
	b.Registerer = reg
	if nb, err := New(b); err == nil {
		nb.Close(context.Background())
		t.Fatal("two nodes registered on one registry")
	}
}

// Each limit answers with its error, counts in corral_limit_hits_total, and the node goes on
// serving: bad keys and values from callers here and from peers, a peer naming an invalid
// group, a fill over Config.MaxFills.
func TestLimits(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := loopback("solo")
	cfg.MaxValueBytes = 1000
	cfg.MaxFills = 1
	cfg.Registerer = reg
	cfg.AllowNonMemberPeers = true // the peer requests below are made in-process, from no address
	n := start(t, cfg)
	release := make(chan struct{})
	g, err := NewGroup(n, "g", func(_ context.Context, key string) (string, error) {
		if key == "slow" {
			<-release
		}
		return "v", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hits := func(name string) float64 { return clustertest.MetricWithLabel(t, reg, "corral_limit_hits_total", name) }
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
	if _, err := n.owner.Get(ctx, &peerpb.GetRequest{Group: "g", Key: make([]byte, 5000)}); !errors.Is(err, transport.ErrInvalidArgument) {
		t.Fatalf("peer Get of a 5000-byte key: %v", err)
	}
	if _, err := n.owner.Get(ctx, &peerpb.GetRequest{Group: "no such/group!", Key: []byte("k")}); !errors.Is(err, transport.ErrUnknownGroup) {
		t.Fatalf("peer Get of an invalid group: %v", err)
	}
	if k, gn := hits("key"), hits("group_name"); k != 4 || gn != 1 {
		t.Fatalf("limit hits: key %v, group_name %v; want 4 and 1", k, gn)
	}

	// A fill over MaxFills waits for the slot; it is counted, and served once the slot frees.
	slow := make(chan error, 1)
	go func() { _, err := g.Get(ctx, "slow"); slow <- err }()
	clustertest.Eventually(t, "the slow fill holds the slot", func() bool { return n.fills.InUse() == 1 })
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

// A member restarted in place — same name, same addresses, a new process — is asked for its
// keys as soon as this node's view has its new life: the breaker that requests to its old life
// tripped, and the connection to that address, belong to the old process.
func TestRestartInPlaceIsReachedAtOnce(t *testing.T) {
	n0, n1 := startTwo(t)
	loadOn := func(name string) LoadFunc[string] {
		return func(ctx context.Context, key string) (string, error) { return name + ":" + key, nil }
	}
	g0, err := NewGroup(n0, "g", loadOn("n0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewGroup(n1, "g", loadOn("n1")); err != nil {
		t.Fatal(err)
	}
	port := func(addr string) int {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(p)
		return n
	}
	cfg := loopback("n1", n0.GossipAddr())
	cfg.GossipPort, cfg.PeerPort = port(n1.GossipAddr()), port(n1.PeerAddr())
	peerAddr := n1.PeerAddr()
	before := keyRoutedTo(t, n0, "n1", "before")
	n1.kill()

	// Requests find the old life unreachable, again and again: its breaker is open for long.
	ctx := context.Background()
	if v, err := g0.Get(ctx, before); err != nil || v[:3] != "n0:" {
		t.Fatalf("Get while the owner is dead = %q, %v; want a fill on n0", v, err)
	}
	for range 3 {
		n0.router.Breakers().Trip(peerAddr, time.Now())
	}
	if !n0.router.Breakers().Skip(peerAddr, time.Now()) {
		t.Fatal("the dead member's breaker is not open")
	}

	oldStart := n0.view.Load().Members["n1"].Started
	again := start(t, cfg)
	if _, err := NewGroup(again, "g", loadOn("n1")); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, "n0 sees n1's new life", func() bool {
		st, ok := n0.view.Load().Members["n1"]
		return ok && !st.Started.Equal(oldStart)
	})
	key := keyRoutedTo(t, n0, "n1", "after")
	begin := time.Now()
	v, err := g0.Get(ctx, key)
	if err != nil || v != "n1:"+key {
		t.Fatalf("Get of n1's key after its restart = %q, %v; want it filled on n1 (the old life's breaker or connection was kept)", v, err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("Get of n1's key after its restart took %v", d)
	}
}

// A write whose writer never heard of a newer write the owner holds — one made on the other
// side of a split of the views, or by a node whose clock runs an hour ahead — is not lost:
// the owner answers the newer version when told, and the writer writes again above it.
func TestWriteAboveAVersionTheWriterNeverSaw(t *testing.T) {
	n0, n1 := startTwo(t)
	src := clustertest.NewSource(0)
	var gs []*Group[string]
	for _, n := range []*Node{n0, n1} {
		g, err := NewGroup(n, "g", src.Load, WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	ctx := context.Background()
	// The write n1 never heard of: n0 applies it as owner, at a version from a clock an hour
	// ahead, and tells nobody — as n0's owner's side applies a peer's Set (from a member's
	// address).
	asPeer := grpcpeer.NewContext(ctx, &grpcpeer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}})
	unheard := func(key, v string) {
		at := version.New("elsewhere", func() time.Time { return time.Now().Add(time.Hour) }).Next()
		if _, err := n0.owner.Set(asPeer, &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte(key), Value: []byte(v), Version: at}}); err != nil {
			t.Fatalf("Set(%s) on n0 as owner: %v", key, err)
		}
	}
	getAll := func(key string) []string {
		var out []string
		for _, g := range gs {
			v, err := g.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get(%s): %v", key, err)
			}
			out = append(out, v)
		}
		return out
	}

	set := keyRoutedTo(t, n0, "n0", "s")
	unheard(set, "unheard")
	if err := gs[1].Set(ctx, set, "written"); err != nil {
		t.Fatal(err)
	}
	for i, v := range getAll(set) {
		if v != "written" {
			t.Fatalf("node %d serves %s = %q after Set returned nil", i, set, v)
		}
	}

	removed := keyRoutedTo(t, n0, "n0", "r")
	unheard(removed, "unheard")
	if err := gs[1].Remove(ctx, removed); err != nil {
		t.Fatal(err)
	}
	for i, v := range getAll(removed) {
		if want := fmt.Sprint(removed, "@0"); v != want {
			t.Fatalf("node %d serves %s = %q after Remove returned nil, want %q", i, removed, v, want)
		}
	}
}

// A write told to a node before its application registered the group is kept for the group:
// once registered, it refuses a copy older than the write — from a member that missed it,
// handing off as it leaves (make sim found a value served that old, seed 242).
func TestWritesToldBeforeTheGroupIsRegisteredAreKept(t *testing.T) {
	n0, n1 := startTwo(t)
	ctx := context.Background()
	load := func(ctx context.Context, key string) (string, error) { return "loaded", nil }
	g0, err := NewGroup(n0, "late", load)
	if err != nil {
		t.Fatal(err)
	}
	key := keyRoutedTo(t, n0, "n0", "k")
	older := n0.versions.Next() // the version of a copy made before the write
	if err := g0.Set(ctx, key, "written"); err != nil {
		t.Fatal(err) // n1 is told, and has no group "late" yet
	}
	if _, err := NewGroup(n1, "late", load); err != nil {
		t.Fatal(err)
	}
	asPeer := grpcpeer.NewContext(ctx, &grpcpeer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}})
	ok, err := n1.owner.Handoff(asPeer, &peerpb.Entry{Group: "late", Key: []byte(key), Value: []byte("old"), Version: older,
		FreshForNanos: int64(time.Hour), StaleForNanos: int64(time.Hour)})
	if err != nil || ok {
		t.Fatalf("hand-off of a copy older than a write told before the group was registered: taken %v, %v", ok, err)
	}
}
