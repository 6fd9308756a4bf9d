package group

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/leakcheck"
	"github.com/corralcache/corral/internal/node"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testConfig is a node on loopback with free ports and fast gossip, with the timings of
// package corral's tests (see its testConfig): they hold on a busy machine.
func testConfig(name string, seeds ...string) node.Config {
	return node.Config{
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

func newNode(tb testing.TB, cfg node.Config) *node.Node {
	tb.Helper()
	var logs *clustertest.SyncBuffer
	if cfg.Logger == nil {
		// Warnings are printed when the test fails: they say why a request failed over.
		logs = &clustertest.SyncBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	n := new(node.Node)
	if err := n.Start(cfg); err != nil {
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
func newCluster(tb testing.TB, size int) []*node.Node {
	tb.Helper()
	nodes := []*node.Node{newNode(tb, testConfig("n0"))}
	for i := 1; i < size; i++ {
		nodes = append(nodes, newNode(tb, testConfig(fmt.Sprintf("n%d", i), nodes[0].GossipAddr())))
	}
	waitMembers(tb, nodes, size)
	return nodes
}

func waitMembers(tb testing.TB, nodes []*node.Node, want int) {
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

// stringCodec is the codec of a group of strings: the bytes as they are.
type stringCodec struct{}

func (stringCodec) Encode(v string) ([]byte, error) { return []byte(v), nil }
func (stringCodec) Decode(b []byte) (string, error) { return string(b), nil }

// groups registers one group of strings loaded by load on every node, with o (its codec
// filled in).
func groups(tb testing.TB, nodes []*node.Node, name string, load func(context.Context, string) (string, error), o Options[string]) []*Group[string] {
	tb.Helper()
	o.Codec = stringCodec{}
	var gs []*Group[string]
	for _, n := range nodes {
		g, err := New(n, name, load, o)
		if err != nil {
			tb.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}

func keyOwnedBy(tb testing.TB, n *node.Node, prefix string) string {
	tb.Helper()
	for i := range 10000 {
		k := fmt.Sprint(prefix, i)
		if n.Owner(k).Name == n.Name() {
			return k
		}
	}
	tb.Fatal("no key owned by", n.Name())
	return ""
}

func noLoader(context.Context, string) (string, error) { return "", fill.ErrNotFound }
