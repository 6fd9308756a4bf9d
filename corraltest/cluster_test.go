package corraltest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// The one-fill guarantee on 10 nodes in virtual time: K concurrent Gets on every node for one
// key run the loader once in the cluster, however busy the machine running the test is.
func TestStampedeOnTenNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var loads atomic.Int32
		var mu sync.Mutex
		groups := map[string]*corral.Group[string]{}
		c, err := corraltest.New(corraltest.Config{
			Nodes: 10,
			Setup: func(n *corral.Node) error {
				g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
					loads.Add(1)
					time.Sleep(50 * time.Millisecond)
					return "v:" + key, nil
				}, corral.WithTTL(time.Hour))
				mu.Lock()
				groups[n.Name()] = g
				mu.Unlock()
				return err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, n := range c.Nodes() {
			for range 20 {
				wg.Go(func() {
					if v, err := groups[n.Name()].Get(ctx, "hot"); err != nil || v != "v:hot" {
						t.Errorf("Get on %s = %q, %v", n.Name(), v, err)
					}
				})
			}
		}
		wg.Wait()
		if got := loads.Load(); got != 1 {
			t.Fatalf("loader ran %d times for 10×20 Gets, want 1", got)
		}
	})
}

// A crash costs one refill, and the crashed node comes back under its name and address.
func TestCrashAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var loads atomic.Int32
		var mu sync.Mutex
		groups := map[string]*corral.Group[string]{}
		c, err := corraltest.New(corraltest.Config{
			Nodes: 4,
			Setup: func(n *corral.Node) error {
				g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
					loads.Add(1)
					return "v:" + key, nil
				}, corral.WithTTL(time.Hour))
				mu.Lock()
				groups[n.Name()] = g
				mu.Unlock()
				return err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		owner := c.Nodes()[0].Owner("k").Name
		var reader string
		for _, n := range c.Nodes() {
			if n.Name() != owner {
				reader = n.Name()
			}
		}
		get := func(name string) {
			mu.Lock()
			g := groups[name]
			mu.Unlock()
			if _, err := g.Get(ctx, "k"); err != nil {
				t.Fatalf("Get on %s: %v", name, err)
			}
		}
		get(reader)
		if err := c.Crash(owner); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes() {
			get(n.Name())
		}
		if got := loads.Load(); got != 2 {
			t.Fatalf("loads = %d, want 2 (one before the crash, one refill)", got)
		}
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Restart(owner); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(c.Nodes()[0].Members()); got != 4 {
			t.Fatalf("%d members after the restart", got)
		}
	})
}

// A node cut off from every peer keeps serving what the origin can answer: it learns from one
// request that no owner answers (a probe of every member) and fills its keys itself, one
// extra fill per isolated side, well under the fill timeout; the majority routes around it.
func TestIsolatedNodeServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var loads atomic.Int32
		var mu sync.Mutex
		groups := map[string]*corral.Group[string]{}
		c, err := corraltest.New(corraltest.Config{
			Nodes: 5,
			Setup: func(n *corral.Node) error {
				g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
					loads.Add(1)
					return "v:" + key, nil
				}, corral.WithTTL(time.Hour), corral.WithFillTimeout(10*time.Second))
				mu.Lock()
				groups[n.Name()] = g
				mu.Unlock()
				return err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		n0 := c.Node("n0")
		var remote []string // keys n0 does not own, one per other owner
		seen := map[string]bool{}
		for i := 0; len(remote) < 4 && i < 10000; i++ {
			k := fmt.Sprint("k", i)
			if o := n0.Owner(k).Name; o != "n0" && !seen[o] {
				seen[o] = true
				remote = append(remote, k)
			}
		}
		c.Partition([]string{"n0"}, []string{"n1", "n2", "n3", "n4"})
		var took []time.Duration
		for _, k := range remote {
			start := time.Now()
			if v, err := groups["n0"].Get(ctx, k); err != nil || v != "v:"+k {
				t.Fatalf("Get(%s) on the isolated node: %q, %v", k, v, err)
			}
			took = append(took, time.Since(start))
		}
		if took[0] > 2*time.Second {
			t.Fatalf("the first Get on the isolated node took %v", took[0])
		}
		for i, d := range took[1:] {
			if d > 100*time.Millisecond {
				t.Fatalf("Get %d took %v: the isolated node did not learn from the first that no peer answers", i+1, d)
			}
		}
		// The majority serves n0's keys through n0's successor.
		var own string
		for i := 0; own == "" && i < 10000; i++ {
			if k := fmt.Sprint("m", i); n0.Owner(k).Name == "n0" {
				own = k
			}
		}
		start := time.Now()
		if v, err := groups["n1"].Get(ctx, own); err != nil || v != "v:"+own {
			t.Fatalf("Get(%s) on the majority: %q, %v", own, v, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the majority took %v to route around the cut-off owner", d)
		}
		t.Logf("isolated node's Gets took %v; the majority's %v", took, time.Since(start))
		c.Heal()
	})
}

// When the owner answers probes but not the Get within the asker's fill timeout plus its peer
// timeout (the owner runs a longer fill timeout, say), the error says the time went to peers.
func TestPeerTimeoutIsBlamedOnPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		groups := map[string]*corral.Group[string]{}
		c, err := corraltest.New(corraltest.Config{
			Nodes: 2,
			Setup: func(n *corral.Node) error {
				timeout := time.Second // n1 asks with a short fill timeout …
				if n.Name() == "n0" {
					timeout = time.Minute // … of n0, whose loader takes 20 s
				}
				g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
					time.Sleep(20 * time.Second)
					return "v", nil
				}, corral.WithFillTimeout(timeout))
				mu.Lock()
				groups[n.Name()] = g
				mu.Unlock()
				return err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		var key string
		for i := 0; key == ""; i++ {
			if k := fmt.Sprint("k", i); c.Node("n0").Owner(k).Name == "n0" {
				key = k
			}
		}
		_, err = groups["n1"].Get(ctx, key)
		var fe *corral.FillError
		if !errors.Is(err, corral.ErrPeerTimeout) || !errors.As(err, &fe) || !strings.Contains(err.Error(), "n0") {
			t.Fatalf("Get = %v, want an ErrPeerTimeout naming n0", err)
		}
		t.Log(err)
	})
}

// A peer request from an address that is not a member's is refused: a port scan of the peer
// port reads nothing. Members are served as before.
func TestNonMembersAreRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		groups := map[string]*corral.Group[string]{}
		c, err := corraltest.New(corraltest.Config{
			Nodes: 2,
			Setup: func(n *corral.Node) error {
				g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) { return "secret", nil })
				mu.Lock()
				groups[n.Name()] = g
				mu.Unlock()
				return err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := groups["n1"].Get(ctx, "k"); err != nil || v != "secret" {
			t.Fatalf("a member's Get: %q, %v", v, err)
		}
		stranger := c.Network.NewHost()
		client, err := transport.NewClient(transport.ClientConfig{Dialer: stranger.DialContext})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		for _, n := range c.Nodes() {
			_, err := client.Get(ctx, n.PeerAddr(), &peerpb.GetRequest{Group: "g", Key: []byte("k")})
			if !errors.Is(err, transport.ErrNotMember) {
				t.Fatalf("a stranger's Get from %s: %v, want ErrNotMember", n.Name(), err)
			}
			_, err = client.Set(ctx, n.PeerAddr(), &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte("k"), Value: []byte("poison")}})
			if !errors.Is(err, transport.ErrNotMember) {
				t.Fatalf("a stranger's Set on %s: %v, want ErrNotMember", n.Name(), err)
			}
		}
		if v, err := groups["n0"].Get(ctx, "k"); err != nil || v != "secret" {
			t.Fatalf("after the stranger: %q, %v", v, err)
		}
	})
}
