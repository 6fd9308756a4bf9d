package corral_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testConfig is a node on loopback with free ports and fast gossip. Failure detection and
// the silent-peer probe keep room for a busy machine (a 2-core machine running other suites
// starves a process of the CPU for hundreds of milliseconds): a live member suspected under
// load has a second to refute it, and a request waits a second on an owner before probing
// it. Crashes are still seen within about two seconds.
func testConfig(name string, seeds ...string) corral.Config {
	return corral.Config{
		Name:              name,
		BindAddr:          "127.0.0.1",
		Join:              seeds,
		GossipInterval:    20 * time.Millisecond,
		ProbeInterval:     250 * time.Millisecond,
		ProbeTimeout:      200 * time.Millisecond,
		SilentPeerTimeout: time.Second,
		PushPullInterval:  time.Second,
		SuspicionMult:     4,
		RejoinInterval:    time.Second,
		DrainTimeout:      50 * time.Millisecond,
		PeerTimeout:       2 * time.Second,
	}
}

func newNode(tb testing.TB, cfg corral.Config) *corral.Node {
	tb.Helper()
	var logs *clustertest.SyncBuffer
	if cfg.Logger == nil {
		// Warnings are printed when the test fails: they say why a request failed over.
		logs = &clustertest.SyncBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	n, err := corral.New(cfg)
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

// newCluster starts size nodes that join through the first, and waits until every node sees
// all of them.
func newCluster(tb testing.TB, size int) []*corral.Node {
	tb.Helper()
	nodes := []*corral.Node{newNode(tb, testConfig("n0"))}
	for i := 1; i < size; i++ {
		nodes = append(nodes, newNode(tb, testConfig(fmt.Sprintf("n%d", i), nodes[0].GossipAddr())))
	}
	waitMembers(tb, nodes, size)
	return nodes
}

// newVirtualCluster starts size nodes, n0 … n(size-1), over an in-memory network in virtual
// time (corraltest), and waits until every node's view holds all of them on the same ring; call
// it inside a synctest bubble. A test that counts loads runs on it: on loopback, views that
// agree at the start still split when a busy machine starves a node past its suspicion
// timeout — it is declared dead and back, its keys move mid-test and are loaded again on
// their successors, as the promises allow for a split of the views — while in virtual time
// no timer fires before the node it judges has had its turn. config, if set, returns a
// node's configuration (see corraltest.Config.Node); its warnings are printed if tb fails.
func newVirtualCluster(tb testing.TB, size int, config func(name string) corral.Config) []*corral.Node {
	tb.Helper()
	logs := map[string]*clustertest.SyncBuffer{} // New configures the nodes one after the other
	c, err := corraltest.New(corraltest.Config{Nodes: size, Node: func(name string) corral.Config {
		var cfg corral.Config
		if config != nil {
			cfg = config(name)
		}
		if cfg.Logger == nil {
			buf := &clustertest.SyncBuffer{}
			cfg.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			logs[name] = buf
		}
		return cfg
	}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close(context.Background())
		if tb.Failed() {
			for _, name := range slices.Sorted(maps.Keys(logs)) {
				tb.Logf("%s logged:\n%s", name, logs[name].String())
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // virtual
	defer cancel()
	if err := c.WaitConverged(ctx); err != nil {
		tb.Fatal(err)
	}
	return c.Nodes()
}

func waitMembers(tb testing.TB, nodes []*corral.Node, want int) {
	tb.Helper()
	clustertest.Eventually(tb, fmt.Sprintf("%d members everywhere", want), func() bool {
		for _, n := range nodes {
			if len(n.Members()) != want {
				return false
			}
		}
		return true
	})
}

// groups registers one group with src's loader on every node.
func groups(tb testing.TB, nodes []*corral.Node, name string, load corral.LoadFunc[string], opts ...corral.GroupOption) []*corral.Group[string] {
	tb.Helper()
	var gs []*corral.Group[string]
	for _, n := range nodes {
		g, err := corral.NewGroup(n, name, load, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}
