package corral_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/crash"
)

// K concurrent Gets on each of N nodes for one expired key run the loader once in the
// cluster, and the fills metric summed over nodes grows by exactly 1.
func TestStampedeOneFillClusterWide(t *testing.T) {
	// 3 nodes on real sockets; the 10-node stampede runs in virtual time
	// (corraltest.TestStampedeOnTenNodes), where a busy machine cannot slow its gossip.
	for _, size := range []int{3} {
		t.Run(fmt.Sprint(size, " nodes"), func(t *testing.T) {
			nodes := newCluster(t, size)
			src := clustertest.NewSource(50 * time.Millisecond)
			gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
			const K = 50
			var wg sync.WaitGroup
			for _, g := range gs {
				for range K {
					wg.Go(func() {
						v, err := g.Get(context.Background(), "hot")
						if err != nil || v != "hot@0" {
							t.Errorf("Get = %q, %v", v, err)
						}
					})
				}
			}
			wg.Wait()
			if got := src.Count("hot"); got != 1 {
				t.Fatalf("loader ran %d times for %d×%d Gets, want 1", got, size, K)
			}
			var fills uint64
			for _, g := range gs {
				fills += g.Stats().Fills
			}
			if fills != 1 {
				t.Fatalf("sum of fills = %d", fills)
			}
		})
	}
}

func TestMembersAgreeOnOwners(t *testing.T) {
	nodes := newCluster(t, 4)
	for i := range 1000 {
		key := fmt.Sprint("key-", i)
		want := nodes[0].Owner(key)
		for _, n := range nodes[1:] {
			if got := n.Owner(key); got != want {
				t.Fatalf("%s: %s says %s, %s says %s", key, nodes[0].Name(), want.Name, n.Name(), got.Name)
			}
		}
	}
	// Every member owns a share.
	for name, share := range nodes[0].Shares() {
		if share < 0.1 {
			t.Errorf("%s owns %.2f of the ring", name, share)
		}
	}
}

// keyOwnedBy finds a key that n owns.
func keyOwnedBy(tb testing.TB, n *corral.Node, prefix string) string {
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

func TestRemoteErrors(t *testing.T) {
	nodes := newCluster(t, 2)
	boom := errors.New("db down")
	gs := groups(t, nodes, "g", func(_ context.Context, key string) (string, error) {
		if key[0] == 'm' {
			return "", corral.ErrNotFound
		}
		return "", boom
	})
	ctx := context.Background()
	remote := gs[1] // asks nodes[0], the owner
	bad := keyOwnedBy(t, nodes[0], "b")
	var fe *corral.FillError
	_, err := remote.Get(ctx, bad)
	if !errors.As(err, &fe) || !fe.Remote || !errors.Is(err, fe.Err) || fe.Err.Error() != boom.Error() {
		t.Fatalf("remote failure: %v (%+v)", err, fe)
	}
	if _, err := remote.Get(ctx, keyOwnedBy(t, nodes[0], "m")); !errors.Is(err, corral.ErrNotFound) {
		t.Fatalf("remote not found: %v", err)
	}
}

func TestRemoveIsSeenOnEveryNode(t *testing.T) {
	nodes := newCluster(t, 3)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	ctx := context.Background()
	key := keyOwnedBy(t, nodes[0], "r")
	// Read it enough on every node for the non-owners to keep near copies.
	for range 3 {
		for _, g := range gs {
			if _, err := g.Get(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if gs[1].Stats().NearHits == 0 {
		t.Fatal("no near copy was promoted")
	}
	src.Gen.Add(1)
	if err := gs[2].Remove(ctx, key); err != nil {
		t.Fatal(err)
	}
	for i, g := range gs {
		if v, err := g.Get(ctx, key); err != nil || v != key+"@1" {
			t.Fatalf("node %d after Remove: %q %v", i, v, err)
		}
	}
	if got := src.Count(key); got != 2 {
		t.Fatalf("loads = %d, want 2 (one before, one after Remove)", got)
	}
}

func TestSetWritesThroughTheOwner(t *testing.T) {
	nodes := newCluster(t, 3)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	ctx := context.Background()
	key := keyOwnedBy(t, nodes[1], "s")
	for range 3 {
		gs[0].Get(ctx, key) // a near copy on node 0
	}
	if err := gs[2].Set(ctx, key, "written"); err != nil {
		t.Fatal(err)
	}
	for i, g := range gs {
		if v, err := g.Get(ctx, key); err != nil || v != "written" {
			t.Fatalf("node %d after Set: %q %v", i, v, err)
		}
	}
}

// A loader on A asks for a key whose loader on B asks for A's key: ErrFillCycle, fast.
func TestFillCycleAcrossNodes(t *testing.T) {
	nodes := newCluster(t, 2)
	var gs []*corral.Group[string]
	ka := keyOwnedBy(t, nodes[0], "a")
	kb := keyOwnedBy(t, nodes[1], "b")
	load := func(i int) corral.LoadFunc[string] {
		return func(ctx context.Context, key string) (string, error) {
			other := ka
			if key == ka {
				other = kb
			}
			return gs[i].Get(ctx, other)
		}
	}
	for i, n := range nodes {
		g, err := corral.NewGroup(n, "g", load(i), corral.WithFillTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	start := time.Now()
	_, err := gs[0].Get(context.Background(), ka)
	if !errors.Is(err, corral.ErrFillCycle) {
		t.Fatalf("err = %v, want ErrFillCycle", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cycle took %v to fail", d)
	}
}

// A restarted member with the same name and a new address is admitted.
func TestRestartWithSameName(t *testing.T) {
	nodes := newCluster(t, 2)
	restarted := testConfig("n1", nodes[0].GossipAddr())
	restarted.DeadNodeReclaimTime = 10 * time.Millisecond
	crash.Node(nodes[1])
	waitMembers(t, nodes[:1], 1)
	n1 := newNode(t, restarted)
	waitMembers(t, []*corral.Node{nodes[0], n1}, 2)
}

// With AutoGroup, a node registers a group the first time a peer asks for it.
func TestAutoGroup(t *testing.T) {
	src := clustertest.NewSource(0)
	auto := func(n *corral.Node, name string) error {
		_, err := corral.NewGroup(n, name, src.Load)
		return err
	}
	a := testConfig("a")
	a.AutoGroup = auto
	na := newNode(t, a)
	b := testConfig("b", na.GossipAddr())
	b.AutoGroup = auto
	nb := newNode(t, b)
	waitMembers(t, []*corral.Node{na, nb}, 2)
	gb, err := corral.NewGroup(nb, "lazy", src.Load)
	if err != nil {
		t.Fatal(err)
	}
	key := keyOwnedBy(t, na, "k")
	if v, err := gb.Get(context.Background(), key); err != nil || v != key+"@0" {
		t.Fatalf("Get through an auto-registered group: %q %v", v, err)
	}
	if _, ok := na.Stats()["lazy"]; !ok {
		t.Fatal("the owner did not register the group")
	}
}
