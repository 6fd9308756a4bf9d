package corral_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/corraltest"
)

// The refill guarantees — a join or a graceful leave costs no refill, however many overlap; a
// crash costs at most one per key — checked on clusters of real nodes in virtual time
// (corraltest): their failure detectors never misfire because the machine running the test
// is busy, which on real sockets would turn a slow node into a "crash" and a refill.

// vcluster is a corraltest cluster whose nodes all run group "g" over a counting loader.
type vcluster struct {
	*corraltest.Cluster
	mu     sync.Mutex
	groups map[string]*corral.Group[string]
	loads  map[string]int
	total  atomic.Int64
	delay  time.Duration
}

func newVCluster(t *testing.T, nodes int, delay time.Duration) *vcluster {
	t.Helper()
	vc := &vcluster{groups: map[string]*corral.Group[string]{}, loads: map[string]int{}, delay: delay}
	c, err := corraltest.New(corraltest.Config{Nodes: nodes, Setup: vc.setup})
	if err != nil {
		t.Fatal(err)
	}
	vc.Cluster = c
	t.Cleanup(func() { c.Close(context.Background()) })
	vc.converge(t)
	return vc
}

func (vc *vcluster) setup(n *corral.Node) error {
	g, err := corral.NewGroup(n, "g", func(ctx context.Context, key string) (string, error) {
		vc.total.Add(1)
		vc.mu.Lock()
		vc.loads[key]++
		vc.mu.Unlock()
		if vc.delay > 0 {
			time.Sleep(vc.delay)
		}
		return "v:" + key, nil
	}, corral.WithTTL(time.Hour))
	vc.mu.Lock()
	vc.groups[n.Name()] = g
	vc.mu.Unlock()
	return err
}

func (vc *vcluster) converge(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := vc.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
}

// g returns the group of the node called name.
func (vc *vcluster) g(name string) *corral.Group[string] {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return vc.groups[name]
}

// live returns the groups of the live nodes.
func (vc *vcluster) live() []*corral.Group[string] {
	var out []*corral.Group[string]
	for _, n := range vc.Nodes() {
		out = append(out, vc.g(n.Name()))
	}
	return out
}

func (vc *vcluster) count(key string) int {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return vc.loads[key]
}

// readAll reads every key on every live node.
func (vc *vcluster) readAll(t *testing.T, keys []string) {
	t.Helper()
	for _, g := range vc.live() {
		for _, k := range keys {
			if _, err := g.Get(context.Background(), k); err != nil {
				t.Fatalf("Get(%s): %v", k, err)
			}
		}
	}
}

func keyList(n int, prefix string) []string {
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprint(prefix, i))
	}
	return keys
}

// ownedBy returns up to n keys of keys that node owns.
func ownedBy(n *corral.Node, keys []string, max int) []string {
	var out []string
	for _, k := range keys {
		if n.Owner(k).Name == n.Name() && len(out) < max {
			out = append(out, k)
		}
	}
	return out
}

// reading runs readers of keys on the live nodes until stop returns; each reads a key a
// millisecond (a reader that never waits would keep virtual time from moving).
func (vc *vcluster) reading(t *testing.T, keys []string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			for i := r; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
				live := vc.live()
				if len(live) == 0 {
					continue
				}
				if _, err := live[i%len(live)].Get(context.Background(), keys[i%len(keys)]); err != nil && err != corral.ErrClosed {
					t.Errorf("Get during the change: %v", err)
					return
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// A join moves keys to the new member; its first miss asks the previous owner, so no key is
// loaded again.
func TestJoinCostsNoRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 3, 0)
		keys := keyList(200, "j")
		vc.readAll(t, keys)
		before := vc.total.Load()
		joiner, err := vc.Add()
		if err != nil {
			t.Fatal(err)
		}
		vc.converge(t)
		if len(ownedBy(joiner, keys, 1)) == 0 {
			t.Fatal("no key moved to the joiner")
		}
		vc.readAll(t, keys)
		if refills := vc.total.Load() - before; refills != 0 {
			t.Fatalf("%d refills after a join, want 0", refills)
		}
	})
}

// Two nodes joining at once, and two joining one after the other, cost no refill.
func TestOverlappingJoinsCostNoRefills(t *testing.T) {
	for _, together := range []bool{true, false} {
		t.Run(map[bool]string{true: "at once", false: "one after the other"}[together], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				vc := newVCluster(t, 3, 0)
				keys := keyList(300, "j")
				vc.readAll(t, keys)
				before := vc.total.Load()
				if together {
					var wg sync.WaitGroup
					for range 2 {
						wg.Go(func() {
							if _, err := vc.Add(); err != nil {
								t.Error(err)
							}
						})
					}
					wg.Wait()
				} else {
					for range 2 {
						if _, err := vc.Add(); err != nil {
							t.Fatal(err)
						}
						vc.converge(t)
					}
				}
				vc.converge(t)
				vc.readAll(t, keys)
				if refills := vc.total.Load() - before; refills != 0 {
					t.Fatalf("%d of %d keys refilled after two joins", refills, len(keys))
				}
			})
		})
	}
}

// Close hands fresh entries to their new owners: reading them afterwards costs no fill.
func TestGracefulLeaveCostsNoRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 3, 0)
		leaver := vc.Node("n2")
		keys := ownedBy(leaver, keyList(400, "h"), 50)
		vc.readAll(t, keys)
		before := vc.total.Load()
		if err := vc.Leave(context.Background(), "n2"); err != nil {
			t.Fatal(err)
		}
		vc.converge(t)
		vc.readAll(t, keys)
		if refills := vc.total.Load() - before; refills != 0 {
			t.Fatalf("%d refills after a graceful leave, want 0", refills)
		}
	})
}

// A graceful leave under concurrent reads costs no refill: the leaver hands off while peers
// still route to it, and answers the new owners' warm pulls while it drains.
func TestGracefulLeaveUnderReadsCostsNoRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 3, 0)
		keys := ownedBy(vc.Node("n2"), keyList(600, "u"), 100)
		vc.readAll(t, keys)
		before := vc.total.Load()
		stop := vc.reading(t, keys)
		if err := vc.Leave(context.Background(), "n2"); err != nil {
			t.Fatal(err)
		}
		vc.converge(t)
		stop()
		vc.readAll(t, keys)
		if refills := vc.total.Load() - before; refills != 0 {
			t.Fatalf("%d of %d keys refilled by a graceful leave under reads", refills, len(keys))
		}
	})
}

// Two members leaving gracefully at once cost no refill: each hands its keys to the owners
// on the ring without either of them.
func TestOverlappingLeavesCostNoRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 5, 0)
		keys := keyList(300, "o")
		vc.readAll(t, keys)
		before := vc.total.Load()
		var wg sync.WaitGroup
		for _, name := range []string{"n3", "n4"} {
			wg.Go(func() {
				if err := vc.Leave(context.Background(), name); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		vc.converge(t)
		vc.readAll(t, keys)
		if refills := vc.total.Load() - before; refills != 0 {
			t.Fatalf("%d of %d keys refilled after two overlapping leaves", refills, len(keys))
		}
	})
}

// A rolling restart — each member in turn leaves and a new one joins, under reads — costs no
// refill.
func TestRollingRestartCostsNoRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 3, 0)
		keys := keyList(200, "r")
		vc.readAll(t, keys)
		before := vc.total.Load()
		stop := vc.reading(t, keys)
		for _, name := range []string{"n0", "n1", "n2"} {
			if _, err := vc.Add(); err != nil {
				t.Fatal(err)
			}
			vc.converge(t)
			if err := vc.Leave(context.Background(), name); err != nil {
				t.Fatal(err)
			}
			vc.converge(t)
		}
		stop()
		vc.readAll(t, keys)
		if refills := vc.total.Load() - before; refills != 0 {
			t.Fatalf("%d of %d keys refilled by a rolling restart of 3 members", refills, len(keys))
		}
	})
}

// A node that stops without leaving (a crash) costs one refill per hot key, not one per
// surviving replica: everyone routes to the same successor, before and after the failure is
// detected.
func TestCrashCostsOneRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 4, 20*time.Millisecond)
		keys := ownedBy(vc.Node("n3"), keyList(400, "c"), 5)
		vc.readAll(t, keys)
		if err := vc.Crash("n3"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, g := range vc.live() {
			for _, k := range keys {
				for range 20 {
					wg.Go(func() {
						if _, err := g.Get(context.Background(), k); err != nil {
							t.Errorf("Get(%s) after the crash: %v", k, err)
						}
					})
				}
			}
		}
		wg.Wait()
		vc.converge(t)
		vc.readAll(t, keys)
		for _, k := range keys {
			if got := vc.count(k); got != 2 {
				t.Errorf("%s loaded %d times, want 2 (one before the crash, one refill)", k, got)
			}
		}
	})
}

// After a join, the members that lost keys to the joiner give them to it at once, not only
// when it is first asked: so a key that moved is held by its new owner though no one has read
// it since, and the crash of its former owner then costs one refill per key that member owns,
// none of the keys that moved away from it. (Before, a moved key stayed on its former owner
// alone until the joiner's first miss: e2e TestScaleUp measured 49 such refills of other
// members' keys.)
func TestCrashAfterJoinRefillsOnlyTheCrashedMembersKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 3, 0)
		keys := keyList(300, "m")
		ownerBefore := map[string]string{}
		for _, k := range keys { // once each, through one node: the owner holds it, no near copies
			if _, err := vc.g("n0").Get(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			ownerBefore[k] = vc.Node("n0").Owner(k).Name
		}
		joiner, err := vc.Add()
		if err != nil {
			t.Fatal(err)
		}
		vc.converge(t)
		lost := map[string]int{} // keys each member lost to the joiner
		var mine []string
		for _, k := range keys {
			if joiner.Owner(k).Name == joiner.Name() {
				mine = append(mine, k)
				lost[ownerBefore[k]]++
			}
		}
		deadline := time.Now().Add(time.Minute)
		for vc.g(joiner.Name()).Stats().Entries < len(mine) {
			if time.Now().After(deadline) {
				t.Fatalf("the joiner holds %d of the %d keys it owns a minute after it joined, unread", vc.g(joiner.Name()).Stats().Entries, len(mine))
			}
			time.Sleep(10 * time.Millisecond)
		}
		victim := ""
		for name, n := range lost {
			if victim == "" || n > lost[victim] {
				victim = name
			}
		}
		owned := map[string]bool{}
		for _, k := range ownedBy(vc.Node(victim), keys, len(keys)) {
			owned[k] = true
		}
		if err := vc.Crash(victim); err != nil {
			t.Fatal(err)
		}
		vc.converge(t)
		live := vc.live()
		for i, k := range keys {
			if _, err := live[i%len(live)].Get(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
		var refilled, others []string
		for _, k := range keys {
			if vc.count(k) > 1 {
				refilled = append(refilled, k)
				if !owned[k] {
					others = append(others, k)
				}
			}
		}
		if len(others) > 0 || len(refilled) > len(owned) {
			t.Errorf("the crash of %s, which owned %d keys after the join and had lost %d to the joiner, refilled %d keys, %d of them other members' (%v)",
				victim, len(owned), lost[victim], len(refilled), len(others), others)
		}
		t.Logf("the crash of %s, which owned %d keys after the join and had lost %d to the joiner, refilled %d keys", victim, len(owned), lost[victim], len(refilled))
	})
}

// Two members crashing at once cost at most one refill per key.
func TestOverlappingCrashesCostOneRefillPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t, 5, 20*time.Millisecond)
		all := keyList(800, "x")
		keys := append(ownedBy(vc.Node("n3"), all, 20), ownedBy(vc.Node("n4"), all, 20)...)
		vc.readAll(t, keys)
		vc.Crash("n3")
		vc.Crash("n4")
		var wg sync.WaitGroup
		for _, g := range vc.live() {
			for _, k := range keys {
				for range 5 {
					wg.Go(func() {
						if _, err := g.Get(context.Background(), k); err != nil {
							t.Errorf("Get(%s) after the crashes: %v", k, err)
						}
					})
				}
			}
		}
		wg.Wait()
		vc.converge(t)
		vc.readAll(t, keys)
		for _, k := range keys {
			if got := vc.count(k); got > 2 {
				t.Errorf("%s loaded %d times, want at most 2 (one before the crashes, one refill)", k, got)
			}
		}
		if !slices.Equal(names(vc.Nodes()), []string{"n0", "n1", "n2"}) {
			t.Fatalf("live nodes %v", names(vc.Nodes()))
		}
	})
}

func names(ns []*corral.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name())
	}
	return out
}

// A member killed (no leave) and started again under its name at a new address — a pod
// rescheduled onto another IP — costs what a crash costs, and its return what a join costs:
// at most one refill of each hot key it owned, none of the other members' keys, and none
// once it is back, while every hot key is read on every live node throughout.
func TestCrashAndRejoinAtNewAddressCostNoExtraFills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logMu sync.Mutex
		logs := map[string]*bytes.Buffer{}
		vc := &vcluster{groups: map[string]*corral.Group[string]{}, loads: map[string]int{}}
		c, err := corraltest.New(corraltest.Config{Nodes: 5, Setup: vc.setup, Node: func(name string) corral.Config {
			logMu.Lock()
			defer logMu.Unlock()
			buf := &bytes.Buffer{}
			logs[fmt.Sprint(name, "#", len(logs))] = buf
			w := writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return buf.Write(p) })
			return corral.Config{Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		}})
		if err != nil {
			t.Fatal(err)
		}
		vc.Cluster = c
		t.Cleanup(func() { c.Close(context.Background()) })
		vc.converge(t)

		hot := keyList(300, "h")
		vc.readAll(t, hot)
		owned := map[string]bool{}
		for _, k := range hot {
			owned[k] = vc.Node("n0").Owner(k).Name == "n2"
		}
		extra := func() (ofDead, ofOthers int, example string) {
			for _, k := range hot {
				n := vc.count(k) - 1
				if owned[k] {
					n-- // the crash's one refill
				}
				if n > 0 {
					example = k
					if owned[k] {
						ofDead += n
					} else {
						ofOthers += n
					}
				}
			}
			return ofDead, ofOthers, example
		}

		stop := vc.reading(t, hot)
		start := time.Now()
		if err := vc.Crash("n2"); err != nil {
			t.Fatal(err)
		}
		vc.converge(t)
		time.Sleep(2 * time.Second)
		crashDead, crashOthers, crashExample := extra()
		if _, err := vc.Move("n2"); err != nil {
			t.Fatal(err)
		}
		vc.converge(t)
		back := time.Since(start)
		time.Sleep(3 * time.Second)
		stop()
		vc.readAll(t, hot)
		allDead, allOthers, example := extra()
		if crashDead+crashOthers > 0 {
			t.Errorf("while the member was dead: %d refills of its keys beyond one each, %d of other members' keys (e.g. %s); a crash costs at most one refill per key of its own",
				crashDead, crashOthers, crashExample)
		}
		if d, o := allDead-crashDead, allOthers-crashOthers; d+o > 0 {
			t.Errorf("once it was back at a new address (%v after the kill): %d refills of its keys, %d of others' (e.g. %s); a join costs none",
				back, d, o, example)
		}
		if t.Failed() {
			if dir := os.Getenv("CORRAL_TEST_LOGS"); dir != "" {
				logMu.Lock()
				for name, buf := range logs {
					os.WriteFile(filepath.Join(dir, name+".log"), buf.Bytes(), 0o644)
				}
				logMu.Unlock()
			}
		}
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
