package corral_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/crash"
)

// backedUp starts size nodes with a group of src's values kept by n backups, and reads keys
// from every node so that each is filled and held by its owner and backups.
func backedUp(t *testing.T, size, n int, keys []string) ([]*corral.Node, []*corral.Group[string], *clustertest.Source) {
	t.Helper()
	nodes := newCluster(t, size)
	src := clustertest.NewSource(0)
	gs := groups(t, nodes, "g", src.Load, corral.WithTTL(time.Hour), corral.WithBackups(n))
	for _, g := range gs {
		for _, k := range keys {
			if _, err := g.Get(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	return nodes, gs, src
}

// crashOwnerOf kills the owner of key and waits until the others' views have dropped it; it
// returns the survivors and their groups.
func crashOwnerOf(t *testing.T, nodes []*corral.Node, gs []*corral.Group[string], key string) ([]*corral.Node, []*corral.Group[string]) {
	t.Helper()
	owner := nodes[0].Owner(key).Name
	var alive []*corral.Node
	var ags []*corral.Group[string]
	for i, n := range nodes {
		if n.Name() == owner {
			crash.Node(n)
			continue
		}
		alive, ags = append(alive, n), append(ags, gs[i])
	}
	waitMembers(t, alive, len(alive))
	return alive, ags
}

// An owner that crashes costs no fill: its successor holds every entry it owned, and serves
// it — the hot keys read from every node at once, before and after the others have seen it
// die.
func TestBackupsCrashCostsNoRefill(t *testing.T) {
	keys := manyKeys("hot", 40)
	nodes, gs, src := backedUp(t, 5, 1, keys)
	before := src.Total.Load()
	victim := nodes[2].Name()
	var owned []string
	for _, k := range keys {
		if nodes[0].Owner(k).Name == victim {
			owned = append(owned, k)
		}
	}
	if len(owned) == 0 {
		t.Fatal("the victim owns no key")
	}
	crash.Node(nodes[2])
	alive := []*corral.Node{nodes[0], nodes[1], nodes[3], nodes[4]}
	ags := []*corral.Group[string]{gs[0], gs[1], gs[3], gs[4]}
	readAll := func() {
		for _, g := range ags {
			values, err := g.GetMany(context.Background(), keys)
			if err != nil || len(values) != len(keys) {
				t.Fatalf("%d values, %v", len(values), err)
			}
		}
	}
	readAll() // before failure detection: the owner's successor answers
	waitMembers(t, alive, 4)
	readAll()
	if n := src.Total.Load() - before; n != 0 {
		t.Fatalf("the crash of an owner of %d keys cost %d loads", len(owned), n)
	}
	var taken uint64
	for _, g := range ags {
		taken += g.Stats().BackupsTaken
	}
	if taken < uint64(len(owned)) {
		t.Fatalf("%d backups taken for the %d keys the crashed owner had", taken, len(owned))
	}
}

// Once a Set or Remove returned nil, the owner's crash does not bring the older value back:
// the backups were given the written value, and told of the Remove, before it returned.
func TestBackupsWritesSurviveTheOwnersCrash(t *testing.T) {
	keys := manyKeys("w", 20)
	nodes, gs, _ := backedUp(t, 4, 1, keys)
	ctx := context.Background()
	victim := nodes[1].Name()
	var written []string
	for i, k := range keys {
		if nodes[0].Owner(k).Name != victim {
			continue
		}
		written = append(written, k)
		var err error
		if i%2 == 0 {
			err = gs[0].Set(ctx, k, "set:"+k)
		} else {
			err = gs[0].Remove(ctx, k)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(written) == 0 {
		t.Fatal("the victim owns no key")
	}
	alive, ags := crashOwnerOf(t, nodes, gs, written[0])
	_ = alive
	for _, g := range ags {
		for _, k := range written {
			v, err := g.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if v == k+"@0" && keyIndex(keys, k)%2 == 0 {
				t.Fatalf("%s = %q after its Set returned and its owner crashed", k, v)
			}
			if keyIndex(keys, k)%2 == 0 && v != "set:"+k {
				t.Fatalf("%s = %q, want the Set's value", k, v)
			}
		}
	}
}

func keyIndex(keys []string, k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// A backup that crashes is replaced: the owners give its copies to the next members, so that
// the owner's crash after it costs no fill either.
func TestBackupsAreReplaced(t *testing.T) {
	keys := manyKeys("r", 30)
	nodes, gs, src := backedUp(t, 5, 1, keys)
	ctx := context.Background()
	// Crash a member, then wait until every key is kept by one backup again.
	crash.Node(nodes[4])
	alive, ags := nodes[:4], gs[:4]
	waitMembers(t, alive, 4)
	clustertest.Eventually(t, "a backup of every key again", func() bool {
		for _, k := range keys {
			for _, b := range ags[0].Backups(k) {
				for i, n := range alive {
					if n.Name() == b.Name && !ags[i].KeepsBackup(k) {
						return false
					}
				}
			}
		}
		return true
	})
	before := src.Total.Load()
	// Now crash the owner of a key: its successor has it.
	key := keys[0]
	owner := alive[0].Owner(key).Name
	var rest []*corral.Node
	var rgs []*corral.Group[string]
	for i, n := range alive {
		if n.Name() == owner {
			crash.Node(n)
			continue
		}
		rest, rgs = append(rest, n), append(rgs, ags[i])
	}
	waitMembers(t, rest, 3)
	for _, g := range rgs {
		if _, err := g.GetMany(ctx, keys); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.Total.Load() - before; n != 0 {
		t.Fatalf("%d loads after a backup and then an owner crashed, one at a time", n)
	}
}

// A join and a graceful leave with backups cost no fill, and the joiner keeps backups too.
func TestBackupsJoinAndLeave(t *testing.T) {
	keys := manyKeys("j", 30)
	nodes, gs, src := backedUp(t, 3, 2, keys)
	ctx := context.Background()
	before := src.Total.Load()
	n3 := newNode(t, testConfig("n3", nodes[0].GossipAddr()))
	g3, err := corral.NewGroup(n3, "g", src.Load, corral.WithTTL(time.Hour), corral.WithBackups(2))
	if err != nil {
		t.Fatal(err)
	}
	all := append(nodes, n3)
	waitMembers(t, all, 4)
	for _, g := range append(gs, g3) {
		if _, err := g.GetMany(ctx, keys); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := nodes[0].Close(cctx); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, all[1:], 3)
	for _, g := range []*corral.Group[string]{gs[1], gs[2], g3} {
		if _, err := g.GetMany(ctx, keys); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.Total.Load() - before; n != 0 {
		t.Fatalf("a join and a leave with backups cost %d loads", n)
	}
	clustertest.Eventually(t, "the joiner keeps backups", func() bool { return g3.Stats().BackupEntries > 0 })
	if b := gs[1].Backups(keys[0]); len(b) != 2 {
		t.Fatalf("Backups(%s) = %v; want 2 members", keys[0], b)
	}
}

// WithBackups takes 0 to 2.
func TestWithBackupsBounds(t *testing.T) {
	n := newNode(t, testConfig("solo"))
	for _, b := range []int{-1, 3} {
		if _, err := corral.NewGroup(n, fmt.Sprint("g", b+1), func(context.Context, string) (string, error) { return "", nil }, corral.WithBackups(b)); err == nil {
			t.Fatalf("WithBackups(%d) accepted", b)
		}
	}
}

// backedUpAgain waits until every key of keys is kept by its backups (in gs's views) on the
// members of nodes: the group is at n copies again after a change.
func backedUpAgain(t *testing.T, nodes []*corral.Node, gs []*corral.Group[string], keys []string) {
	t.Helper()
	clustertest.Eventually(t, "a backup of every key again", func() bool {
		for _, k := range keys {
			bs := gs[0].Backups(k)
			if len(bs) == 0 {
				return false
			}
			for _, b := range bs {
				for i, n := range nodes {
					if n.Name() == b.Name && !gs[i].KeepsBackup(k) {
						return false
					}
				}
			}
		}
		return true
	})
}

// A graceful leave hands the leaver's entries to their new owners, and those owners give them
// to their own backups: the crash of a new owner after the leave costs no fill either.
func TestBackupsLeaveThenCrash(t *testing.T) {
	keys := manyKeys("l", 60)
	nodes, gs, src := backedUp(t, 4, 1, keys)
	ctx := context.Background()
	leaver := nodes[3]
	var left []string // the keys the leaver owned
	for _, k := range keys {
		if nodes[0].Owner(k).Name == leaver.Name() {
			left = append(left, k)
		}
	}
	if len(left) == 0 {
		t.Fatal("the leaver owns no key")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := leaver.Close(cctx); err != nil {
		t.Fatal(err)
	}
	alive, ags := nodes[:3], gs[:3]
	waitMembers(t, alive, 3)
	backedUpAgain(t, alive, ags, keys)
	before := src.Total.Load()
	// Crash the member that took the most of the leaver's keys.
	took := map[string]int{}
	for _, k := range left {
		took[alive[0].Owner(k).Name]++
	}
	heir := ""
	for name, n := range took {
		if heir == "" || n > took[heir] {
			heir = name
		}
	}
	var rest []*corral.Node
	var rgs []*corral.Group[string]
	for i, n := range alive {
		if n.Name() == heir {
			crash.Node(n)
			continue
		}
		rest, rgs = append(rest, n), append(rgs, ags[i])
	}
	waitMembers(t, rest, 2)
	for _, g := range rgs {
		if _, err := g.GetMany(ctx, keys); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.Total.Load() - before; n != 0 {
		t.Fatalf("%d loads after a leave and then the crash of the member that took %d of the leaver's %d keys", n, took[heir], len(left))
	}
}
