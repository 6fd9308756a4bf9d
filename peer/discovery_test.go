package peer_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

// fakeDiscoverer reports the addresses Set gave it last, as a watch on EndpointSlices would.
type fakeDiscoverer struct {
	wake    chan struct{} // one pending Set is enough: Run reports the latest addresses
	running atomic.Int32
	runs    atomic.Int32

	mu sync.Mutex
	// guards addrs
	addrs []string
}

var _ peer.Discoverer = (*fakeDiscoverer)(nil)

func newFakeDiscoverer(addrs ...string) *fakeDiscoverer {
	return &fakeDiscoverer{wake: make(chan struct{}, 1), addrs: addrs}
}

func (f *fakeDiscoverer) Set(addrs ...string) {
	f.mu.Lock()
	f.addrs = slices.Clone(addrs)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fakeDiscoverer) Run(ctx context.Context, _ *slog.Logger, update func([]string)) error {
	f.runs.Add(1)
	f.running.Add(1)
	defer f.running.Add(-1)
	for {
		f.mu.Lock()
		addrs := slices.Clone(f.addrs)
		f.mu.Unlock()
		update(addrs)
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		}
	}
}

// registerFake registers a scheme of the test's own whose every target is d, and returns the
// seed to use.
func registerFake(t *testing.T, d peer.Discoverer) string {
	t.Helper()
	scheme := "fake-" + strings.ToLower(t.Name())
	peer.RegisterScheme(scheme, func(target string) (peer.Discoverer, error) {
		if target != "svc" {
			return nil, errors.New("the only target is svc")
		}
		return d, nil
	})
	t.Cleanup(func() { peer.RegisterScheme(scheme, nil) })
	return scheme + "://svc"
}

// A member whose seed is a discovery scheme joins what the Discoverer reports, and when it
// reports a new address, joins it at once: with RejoinInterval an hour, only the wake-up from the
// discovery can make b see c within the test's deadline.
func TestDiscoverySeedJoinsNewAddressesPromptly(t *testing.T) {
	a := start(t, fastConfig(t, "a"))
	d := newFakeDiscoverer(a.GossipAddr())
	seed := registerFake(t, d)

	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{seed}
	cfgB.RejoinInterval = time.Hour
	b := start(t, cfgB)
	// New waited for the discovery's first answer and joined it.
	if got := names(b.Members()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("b sees %v right after New, want [a b]", got)
	}

	c := start(t, fastConfig(t, "c")) // no seeds: nobody would find c but through b's discovery
	d.Set(a.GossipAddr(), b.GossipAddr(), c.GossipAddr())
	for _, m := range []*peer.Membership{a, b, c} {
		waitFor(t, m.String()+" to see c", hasNames(m, "a", "b", "c"))
	}
	if n := d.runs.Load(); n != 1 {
		t.Errorf("the Discoverer ran %d times, want once for the Membership's life", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := d.running.Load(); n != 0 {
		t.Errorf("%d Run calls still running after Close", n)
	}
}

// A seed of an unregistered scheme, or a target its scheme refuses, makes New fail before
// anything starts; corral's own schemes name the package to import.
func TestDiscoverySeedErrors(t *testing.T) {
	seed := registerFake(t, newFakeDiscoverer())
	tests := []struct {
		seed, want string
	}{
		{"k8s://default/corral", `import _ "github.com/corralcache/corral/peer/k8s"`},
		{"nosuch://x", "no discovery is registered for nosuch://"},
		{strings.TrimSuffix(seed, "svc") + "other", "the only target is svc"},
	}
	for _, tt := range tests {
		cfg := fastConfig(t, "a")
		cfg.Seeds = []string{tt.seed}
		m, err := peer.New(cfg)
		if err == nil {
			m.Close()
			t.Errorf("New with seed %q succeeded", tt.seed)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New with seed %q: %v, want it to say %q", tt.seed, err, tt.want)
		}
	}
}

// Join runs the Discoverer of its seed only until it returns, and joins what it found.
func TestJoinWithDiscoverySeed(t *testing.T) {
	a := start(t, fastConfig(t, "a"))
	d := newFakeDiscoverer(a.GossipAddr())
	seed := registerFake(t, d)
	b := start(t, fastConfig(t, "b"))

	n, err := b.Join(context.Background(), []string{seed})
	if err != nil || n != 1 {
		t.Fatalf("Join = %d, %v; want 1, nil", n, err)
	}
	waitFor(t, "b to see a", hasNames(b, "a", "b"))
	waitFor(t, "the discovery to stop after Join", func() bool { return d.running.Load() == 0 })
}
