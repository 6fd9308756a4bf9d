package node

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// loopback is a one-node cluster on loopback with free ports.
func loopback(name string) Config { return Config{Name: name, BindAddr: "127.0.0.1", DrainTimeout: -1} }

// start starts a node as cfg says, and closes it when tb ends.
func start(tb testing.TB, cfg Config) *Node {
	tb.Helper()
	n := new(Node)
	if err := n.Start(cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
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
	var nb Node
	if err := nb.Start(b); err == nil {
		nb.Close(context.Background())
		t.Fatal("two nodes registered on one registry")
	}
}
