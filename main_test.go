package corral

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testConfig is a node on loopback with free ports and fast gossip. Failure detection and
// the silent-peer probe keep room for a busy machine (a 2-core machine running other suites
// starves a process of the CPU for hundreds of milliseconds): a live member suspected under
// load has a second to refute it, and a request waits a second on an owner before probing
// it. Crashes are still seen within about two seconds.
func testConfig(name string, seeds ...string) Config {
	return Config{
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

func newNode(tb testing.TB, cfg Config) *Node {
	tb.Helper()
	var logs *syncBuffer
	if cfg.Logger == nil {
		// Warnings are printed when the test fails: they say why a request failed over.
		logs = &syncBuffer{}
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

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newCluster starts size nodes that join through the first, and waits until every node sees
// all of them.
func newCluster(tb testing.TB, size int) []*Node {
	tb.Helper()
	nodes := []*Node{newNode(tb, testConfig("n0"))}
	for i := 1; i < size; i++ {
		nodes = append(nodes, newNode(tb, testConfig(fmt.Sprintf("n%d", i), nodes[0].GossipAddr())))
	}
	waitMembers(tb, nodes, size)
	return nodes
}

func waitMembers(tb testing.TB, nodes []*Node, want int) {
	tb.Helper()
	eventually(tb, fmt.Sprintf("%d members everywhere", want), func() bool {
		for _, n := range nodes {
			if len(n.Members()) != want {
				return false
			}
		}
		return true
	})
}

func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// source is a backend shared by every node of an in-process cluster: it counts loads per key.
type source struct {
	mu    sync.Mutex
	loads map[string]int
	total atomic.Int64
	delay time.Duration
	gen   atomic.Int64 // bumps the value, so a refill is visible
}

func newSource(delay time.Duration) *source { return &source{loads: map[string]int{}, delay: delay} }

func (s *source) load(ctx context.Context, key string) (string, error) {
	s.total.Add(1)
	s.mu.Lock()
	s.loads[key]++
	s.mu.Unlock()
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return fmt.Sprintf("%s@%d", key, s.gen.Load()), nil
}

func (s *source) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[key]
}

// groups registers one group with src's loader on every node.
func groups(tb testing.TB, nodes []*Node, name string, load LoadFunc[string], opts ...GroupOption) []*Group[string] {
	tb.Helper()
	var gs []*Group[string]
	for _, n := range nodes {
		g, err := NewGroup(n, name, load, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}
