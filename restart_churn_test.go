package corral_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/memnet"
)

// A member that crashes and comes back in place while its successor is filling its keys
// costs one refill per key, not two: the restarted owner's first miss asks the successor,
// which waits for the fill it is running and hands its result over.
func TestCrashAndFastRestartCostOneRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 4, delay: 2 * time.Second, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		keys := ownedBy(ec.Node("n3"), keyList(400, "f"), 10)
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Go(func() {
				if _, err := ec.g("n0").Get(context.Background(), k); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := ec.Crash("n3"); err != nil {
			t.Fatal(err)
		}
		var reads sync.WaitGroup
		for _, name := range []string{"n0", "n1", "n2"} {
			for _, k := range keys {
				reads.Go(func() {
					if _, err := ec.g(name).Get(context.Background(), k); err != nil {
						t.Errorf("Get(%s) on %s after the crash: %v", k, name, err)
					}
				})
			}
		}
		time.Sleep(500 * time.Millisecond) // the successor's fills run
		if _, err := ec.Restart("n3"); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			reads.Go(func() {
				if _, err := ec.g("n3").Get(context.Background(), k); err != nil {
					t.Errorf("Get(%s) on the restarted owner: %v", k, err)
				}
			})
		}
		reads.Wait()
		ec.converge(t)
		for _, name := range []string{"n0", "n1", "n2", "n3"} {
			for _, k := range keys {
				if _, err := ec.g(name).Get(context.Background(), k); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, k := range keys {
			if got := ec.count(k); got > 2 {
				t.Errorf("%s loaded %d times, want at most 2 (one before the crash, one refill)", k, got)
			}
		}
	})
}

// A member declared dead and back in place under its name and address, read at once on
// itself and on each key's successor — which owns the key in its view until it hears of
// the new life — costs one refill per key, not two. The two fills look for a copy on each
// other at the same moment and neither has one yet: the member with the smaller name waits
// for the other's fill and takes its value, whichever of the two asked first. (Before that
// tie-break, 8 to 10 of these 10 keys were loaded twice after the crash.)
func TestRestartAfterDeathReadOnBothCostsOneRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 4, delay: 2 * time.Second, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		keys := ownedBy(ec.Node("n3"), keyList(400, "f"), 10)
		for _, k := range keys {
			if _, err := ec.g("n0").Get(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
		if err := ec.Crash("n3"); err != nil {
			t.Fatal(err)
		}
		ec.converge(t) // n3 is declared dead: its keys are its successors'
		successor := map[string]string{}
		for _, k := range keys {
			successor[k] = ec.Node("n0").Owner(k).Name
		}
		if _, err := ec.Restart("n3"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, k := range keys {
			for _, name := range []string{"n3", successor[k]} {
				wg.Go(func() {
					if _, err := ec.g(name).Get(context.Background(), k); err != nil {
						t.Errorf("Get(%s) on %s: %v", k, name, err)
					}
				})
			}
		}
		wg.Wait()
		for _, k := range keys {
			if got := ec.count(k); got != 2 {
				t.Errorf("%s loaded %d times, want 2 (one before the crash, one refill, on n3 or its successor %s)", k, got, successor[k])
			}
		}
	})
}

// A backup restarted in place — crashed and back under its name and address before the others
// saw it die — has lost the copies it kept. Its owner gives them to it again, as to any new
// backup, so that the owner's own crash after it still costs no refill. (Before, the owner
// took the new life for the member it had given its copies to, and gave it nothing: every key
// it backed up was loaded again after the owner's crash.)
func TestBackupRestartedInPlaceGetsItsCopiesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 4, opts: []corral.GroupOption{corral.WithTTL(time.Hour), corral.WithBackups(1)}})
		keys := ownedBy(ec.Node("n3"), keyList(400, "b"), 20)
		for _, k := range keys {
			if _, err := ec.g("n0").Get(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
		backs := map[string]int{} // each backup, and how many of the keys it keeps
		for _, k := range keys {
			b := ec.g("n3").Backups(k)
			if len(b) != 1 {
				t.Fatalf("%s has %d backups, want 1", k, len(b))
			}
			backs[b[0].Name]++
		}
		for _, name := range []string{"n0", "n1", "n2"} {
			if backs[name] == 0 {
				continue
			}
			if err := ec.Crash(name); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // virtual: a new process, started later, before the others saw the crash
			if _, err := ec.Restart(name); err != nil {
				t.Fatal(err)
			}
			ec.converge(t)
			deadline := time.Now().Add(time.Minute) // virtual
			for ec.g(name).Stats().BackupEntries < backs[name] {
				if time.Now().After(deadline) {
					t.Fatalf("%s, restarted in place, keeps %d copies a minute later, want %d", name, ec.g(name).Stats().BackupEntries, backs[name])
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		crashOwnerLoadsNothing(t, ec, "n3", keys)
	})
}

// A backup the owner could not reach when it gave a key's entry — cut off from it for a
// moment, back before anyone was declared dead — is given the entry again once it can be
// reached, so that the owner's crash after it still costs no refill. (Before, the copy was
// never given again: no membership change made the member a new backup.)
func TestBackupCutOffAtTheFillIsGivenItsCopyLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 4, opts: []corral.GroupOption{corral.WithTTL(time.Hour), corral.WithBackups(1)}})
		keys := ownedBy(ec.Node("n3"), keyList(400, "c"), 10)
		owner := []*memnet.Host{ec.Host("n3")}
		others := []*memnet.Host{ec.Host("n0"), ec.Host("n1"), ec.Host("n2")}
		ec.Network.Cut(owner, others)
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Go(func() {
				if _, err := ec.g("n3").Get(context.Background(), k); err != nil {
					t.Errorf("Get(%s) on its owner, cut off: %v", k, err)
				}
			})
		}
		wg.Wait()
		ec.Network.Uncut(owner, others)
		held := func() int {
			n := 0
			for _, name := range []string{"n0", "n1", "n2"} {
				n += ec.g(name).Stats().BackupEntries
			}
			return n
		}
		deadline := time.Now().Add(time.Minute) // virtual
		for held() < len(keys) {
			if time.Now().After(deadline) {
				t.Fatalf("the backups keep %d of the %d copies a minute after the cut ended", held(), len(keys))
			}
			time.Sleep(10 * time.Millisecond)
		}
		crashOwnerLoadsNothing(t, ec, "n3", keys)
	})
}

// crashOwnerLoadsNothing crashes owner, reads keys on every other node, and checks that each
// key was loaded once in all (its fill before the crash): its backups served it.
func crashOwnerLoadsNothing(t *testing.T, ec *ecluster, owner string, keys []string) {
	t.Helper()
	if err := ec.Crash(owner); err != nil {
		t.Fatal(err)
	}
	for _, n := range ec.Nodes() {
		for _, k := range keys {
			if _, err := ec.g(n.Name()).Get(context.Background(), k); err != nil {
				t.Fatalf("Get(%s) on %s after the owner's crash: %v", k, n.Name(), err)
			}
		}
	}
	for _, k := range keys {
		if n := ec.count(k); n != 1 {
			t.Errorf("%s loaded %d times, want 1: its backup serves it after the owner's crash", k, n)
		}
	}
}
