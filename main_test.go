package corral_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/corralcache/corral"
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
