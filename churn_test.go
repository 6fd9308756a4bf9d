package corral_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/crash"
	"github.com/corralcache/corral/ring"
)

// The tests of this file hold corral to its guarantees under churn: a Remove or Set that
// returned nil is never undone by a join, a leave, a crash or a restart; joins and graceful
// leaves cost no refills, however many overlap; a crash costs at most one per key.

// keysMoving returns n keys that before's ring routes to from and after's ring to to.
func keysMoving(tb testing.TB, before, after []string, from, to, prefix string, n int) []string {
	tb.Helper()
	rb, err := ring.New(before, ring.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	ra, err := ring.New(after, ring.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	var keys []string
	for i := 0; len(keys) < n && i < 1_000_000; i++ {
		k := fmt.Sprint(prefix, i)
		if rb.Owner(k) == from && ra.Owner(k) == to {
			keys = append(keys, k)
		}
	}
	if len(keys) < n {
		tb.Fatalf("found %d keys moving from %s to %s, want %d", len(keys), from, to, n)
	}
	return keys
}

// namesUpTo returns n0 … n(k-1).
func namesUpTo(k int) []string {
	var out []string
	for i := range k {
		out = append(out, fmt.Sprint("n", i))
	}
	return out
}

// join starts node name, joined through seed, registers the group on it, and waits until
// all of nodes (the joiner included) see every member.
func join(tb testing.TB, nodes []*corral.Node, name string, load corral.LoadFunc[string], opts ...corral.GroupOption) ([]*corral.Node, *corral.Group[string]) {
	tb.Helper()
	n := newNode(tb, testConfig(name, nodes[0].GossipAddr()))
	g := groups(tb, []*corral.Node{n}, "g", load, opts...)[0]
	nodes = append(nodes, n)
	waitMembers(tb, nodes, len(nodes))
	return nodes, g
}

// Case 1: k is held by its owner n0; n2 joins and owns k; Remove(k) from n1 returns nil.
// No Get anywhere may return the removed value: n2's first miss must not bring back n0's copy.
func TestRemoveAfterJoinIsNotUndone(t *testing.T) {
	nodes := newCluster(t, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	keys := keysMoving(t, namesUpTo(2), namesUpTo(3), "n0", "n2", "r", 5)
	for _, k := range keys {
		clustertest.GetAll(t, gs, k)
	}
	nodes, g2 := join(t, nodes, "n2", src.Load, corral.WithTTL(time.Hour))
	gs = append(gs, g2)
	src.Gen.Add(1)
	for _, k := range keys {
		if err := gs[1].Remove(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		for i, v := range clustertest.GetAll(t, gs, k) {
			if v != k+"@1" {
				t.Fatalf("node %d serves %s = %q after Remove returned, want %q", i, k, v, k+"@1")
			}
		}
	}
}

// Case 2: Remove on the new owner, then that owner leaves gracefully: the old owner must not
// serve its old copy.
func TestRemoveOnNewOwnerThenItLeaves(t *testing.T) {
	nodes := newCluster(t, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	keys := keysMoving(t, namesUpTo(2), namesUpTo(3), "n0", "n2", "l", 5)
	for _, k := range keys {
		clustertest.GetAll(t, gs, k)
	}
	nodes, g2 := join(t, nodes, "n2", src.Load, corral.WithTTL(time.Hour))
	src.Gen.Add(1)
	for _, k := range keys {
		if err := g2.Remove(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[2].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, nodes[:2], 2)
	for _, k := range keys {
		for i, v := range clustertest.GetAll(t, gs, k) {
			if v != k+"@1" {
				t.Fatalf("node %d serves %s = %q after the remover left, want %q", i, k, v, k+"@1")
			}
		}
	}
}

// Case 3: Set on the new owner, then it crashes: the others must not serve the value from
// before the Set.
func TestSetOnNewOwnerThenItCrashes(t *testing.T) {
	nodes := newCluster(t, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	keys := keysMoving(t, namesUpTo(2), namesUpTo(3), "n0", "n2", "s", 5)
	for _, k := range keys {
		clustertest.GetAll(t, gs, k)
	}
	nodes, g2 := join(t, nodes, "n2", src.Load, corral.WithTTL(time.Hour))
	src.Gen.Add(1) // the source of truth changes with the Set
	for _, k := range keys {
		if err := g2.Set(context.Background(), k, k+"@set"); err != nil {
			t.Fatal(err)
		}
	}
	crash.Node(nodes[2])
	waitMembers(t, nodes[:2], 2)
	for _, k := range keys {
		for i, v := range clustertest.GetAll(t, gs, k) {
			if v == k+"@0" {
				t.Fatalf("node %d serves %s = %q, the value from before the Set", i, k, v)
			}
		}
	}
}

// Case 4: Removes of the leaving node's keys while it Closes all return nil; none of those
// keys may be brought back by the hand-off.
func TestRemoveDuringGracefulLeave(t *testing.T) {
	nodes := newCluster(t, 3)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	var keys []string
	for i := 0; len(keys) < 400; i++ {
		if k := fmt.Sprint("d", i); nodes[2].Owner(k).Name == "n2" {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if _, err := gs[0].Get(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	src.Gen.Add(1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := nodes[2].Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	removed := make(chan string, len(keys))
	wg.Go(func() {
		for i, k := range keys {
			var err error
			for try := 0; try < 3; try++ {
				// A write that could not tell every member says so; retry those.
				if err = gs[i%2].Remove(context.Background(), k); err == nil {
					break
				}
			}
			if err != nil {
				t.Errorf("Remove(%s): %v", k, err)
				continue
			}
			removed <- k
		}
		close(removed)
	})
	wg.Wait()
	waitMembers(t, nodes[:2], 2)
	stale := 0
	for k := range removed {
		for _, v := range clustertest.GetAll(t, gs[:2], k) {
			if v == k+"@0" {
				stale++
			}
		}
	}
	if stale > 0 {
		t.Fatalf("%d reads returned a removed value after the leave", stale)
	}
}

// Case 8: fill cycles entered from several keys at once fail with ErrFillCycle instead of
// waiting out the fill timeout: a → b → a on one node, and a → b → c → a over three nodes.
func TestFillCyclesEnteredAtOnce(t *testing.T) {
	for _, size := range []int{1, 3} {
		t.Run(fmt.Sprint(size, " nodes"), func(t *testing.T) {
			nodes := newCluster(t, size)
			// cycle[i] is the key node i owns; key i's loader asks for key i+1.
			var cycle []string
			for i, n := range nodes {
				cycle = append(cycle, keyOwnedBy(t, n, fmt.Sprint("c", i, "-")))
			}
			if size == 1 {
				cycle = append(cycle, cycle[0]+"b")
			}
			next := map[string]string{}
			for i, k := range cycle {
				next[k] = cycle[(i+1)%len(cycle)]
			}
			var gs []*corral.Group[string]
			entered := make(chan struct{})
			var enteredOnce sync.WaitGroup
			enteredOnce.Add(len(cycle))
			var runs atomic.Int32
			for i, n := range nodes {
				g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
					if runs.Add(1) <= int32(len(cycle)) {
						enteredOnce.Done()
					}
					<-entered // every fill of the cycle runs before any asks the next
					return gs[i].Get(ctx, next[key])
				}, corral.WithFillTimeout(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				gs = append(gs, g)
			}
			go func() { enteredOnce.Wait(); close(entered) }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for i, k := range cycle {
				g := gs[min(i, len(gs)-1)]
				wg.Go(func() {
					_, err := g.Get(ctx, k)
					if !errors.Is(err, corral.ErrFillCycle) {
						t.Errorf("Get(%s) = %v, want ErrFillCycle", k, err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// Case 9: keys are any bytes; a key that is not valid UTF-8 works from every node.
func TestNonUTF8Keys(t *testing.T) {
	nodes := newCluster(t, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	var key string
	for i := range 1000 {
		if k := fmt.Sprintf("\xff\xfe%d\x80", i); nodes[0].Owner(k).Name == "n0" {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("no key owned by n0")
	}
	if v, err := gs[1].Get(context.Background(), key); err != nil || v != key+"@0" {
		t.Fatalf("remote Get of a non-UTF-8 key: %q, %v", v, err)
	}
	src.Gen.Add(1)
	if err := gs[1].Remove(context.Background(), key); err != nil {
		t.Fatalf("remote Remove of a non-UTF-8 key: %v", err)
	}
	if err := gs[1].Set(context.Background(), key, "set"); err != nil {
		t.Fatalf("remote Set of a non-UTF-8 key: %v", err)
	}
	for i, v := range clustertest.GetAll(t, gs, key) {
		if v != "set" {
			t.Fatalf("node %d: %q", i, v)
		}
	}
}

// Case 10: every counter is monotonic, also while peers' requests are being served.
func TestCountersNeverGoDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := testConfig("n0")
	a.Registerer = reg
	owner := newNode(t, a)
	other := newNode(t, testConfig("n1", owner.GossipAddr()))
	waitMembers(t, []*corral.Node{owner, other}, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, []*corral.Node{owner, other}, "g", src.Load, corral.WithTTL(time.Hour))
	var keys []string
	for i := 0; len(keys) < 64; i++ {
		if k := fmt.Sprint("m", i); owner.Owner(k).Name == "n0" {
			keys = append(keys, k)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				gs[1].Get(context.Background(), keys[i%len(keys)]) // served for a peer
				gs[0].Get(context.Background(), keys[(i*7)%len(keys)])
			}
		})
	}
	prev := map[string]float64{}
	for range 3000 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if !strings.HasSuffix(mf.GetName(), "_total") {
				continue
			}
			for _, m := range mf.GetMetric() {
				id := mf.GetName() + fmt.Sprint(m.GetLabel())
				v := m.GetCounter().GetValue()
				if v < prev[id] {
					close(stop)
					wg.Wait()
					t.Fatalf("%s went down from %v to %v", id, prev[id], v)
				}
				prev[id] = v
			}
		}
	}
	close(stop)
	wg.Wait()
}

// warm fills every key once through gs, spreading the Gets over the nodes.
func warm(tb testing.TB, gs []*corral.Group[string], keys []string) {
	tb.Helper()
	for i, k := range keys {
		if _, err := gs[i%len(gs)].Get(context.Background(), k); err != nil {
			tb.Fatal(err)
		}
	}
}

func hotKeys(n int, prefix string) []string {
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprint(prefix, i))
	}
	return keys
}

// A member that joins before its application registered the group owns keys it cannot
// serve yet: peers ask the next owner instead of failing.
func TestJoinBeforeTheGroupIsRegistered(t *testing.T) {
	nodes := newCluster(t, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	late := newNode(t, testConfig("n2", nodes[0].GossipAddr()))
	waitMembers(t, append(nodes, late), 3)
	key := keyOwnedBy(t, late, "late")
	for _, g := range gs {
		if v, err := g.Get(context.Background(), key); err != nil || v != key+"@0" {
			t.Fatalf("Get of a key owned by a member without the group: %q, %v", v, err)
		}
	}
	if got := src.Count(key); got != 1 {
		t.Fatalf("loaded %d times, want 1", got)
	}
}

// A local hit skips the owner lookup only while the view it was found owned under stands
// (entries are stamped with the view): once a join moves a key away, Gets on its old owner
// ask the new one, even for keys it still holds and has hit many times.
func TestStampedHitsFollowOwnership(t *testing.T) {
	nodes := newCluster(t, 2)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour))
	keys := keysMoving(t, namesUpTo(2), namesUpTo(3), "n0", "n2", "m", 5)
	for _, k := range keys {
		for range 3 { // fill, then hits that stamp and hits that use the stamp
			if _, err := gs[0].Get(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	nodes, g2 := join(t, nodes, "n2", src.Load, corral.WithTTL(time.Hour))
	before := g2.Stats().PeerGets
	for _, k := range keys {
		if _, err := gs[0].Get(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	if served := g2.Stats().PeerGets - before; served < uint64(len(keys)) {
		t.Fatalf("the new owner served %d of n0's %d Gets of its keys: n0 answered the rest from its own store", served, len(keys))
	}
}
