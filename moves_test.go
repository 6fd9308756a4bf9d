package corral_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/memnet"
)

// moveKeys joins a node to ec or has n2 leave it, and returns, for each of keys that changed
// owner, its owner before.
func moveKeys(t *testing.T, ec *ecluster, change string, keys []string) map[string]string {
	t.Helper()
	before := map[string]string{}
	for _, k := range keys {
		before[k] = ec.Node("n0").Owner(k).Name
	}
	if change == "join" {
		if _, err := ec.Add(); err != nil {
			t.Fatal(err)
		}
	} else if err := ec.Leave(context.Background(), "n2"); err != nil {
		t.Fatal(err)
	}
	ec.converge(t)
	moved := map[string]string{}
	for _, k := range keys {
		if ec.Node("n0").Owner(k).Name != before[k] {
			moved[k] = before[k]
		}
	}
	if len(moved) == 0 {
		t.Fatalf("the %s moved none of %d keys: nothing checked", change, len(keys))
	}
	return moved
}

// Stale values within their SWR window move with their keys: after a join and after a
// graceful leave, a Get of a moved key answers the stale value — not a miss that the source
// (here: none, as corral serve without an origin) cannot fill — and a Lease answers stale,
// not fill.
func TestMovesCarryStaleValues(t *testing.T) {
	for _, change := range []string{"join", "leave"} {
		t.Run(change, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ec := newECluster(t, eclusterConfig{nodes: 3, notFound: true, opts: []corral.GroupOption{
					corral.WithTTL(300 * time.Millisecond), corral.WithStaleWhileRevalidate(time.Hour)}})
				keys := keyList(300, "s")
				for _, k := range keys {
					if err := ec.g("n0").Set(context.Background(), k, "v:"+k); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(400 * time.Millisecond) // every value is stale now
				moved := moveKeys(t, ec, change, keys)
				i := 0
				for k := range moved {
					// Half the keys are read first, the others leased first.
					if i++; i%2 == 0 {
						v, src, err := ec.g("n0").GetWithSource(context.Background(), k)
						if err != nil || v != "v:"+k {
							t.Fatalf("after the %s, Get(%s) = %q (%s), %v; want the stale value", change, k, v, src, err)
						}
					}
					for _, n := range ec.Nodes() {
						l, err := ec.g(n.Name()).Lease(context.Background(), k, corral.LeaseOptions{Fill: time.Minute})
						if err != nil || l.State != corral.LeaseStale || l.Value != "v:"+k {
							t.Fatalf("after the %s, Lease(%s) on %s = %+v, %v; want stale", change, k, n.Name(), l, err)
						}
					}
					v, err := ec.g("n1").Get(context.Background(), k)
					if err != nil || v != "v:"+k {
						t.Fatalf("after the %s, Get(%s) = %q, %v; want the stale value", change, k, v, err)
					}
				}
			})
		})
	}
}

// Remembered not-founds within their TTL move with their keys too: after a join and after a
// graceful leave, a moved key still answers ErrNotFound without a new load.
func TestMovesCarryNotFounds(t *testing.T) {
	for _, change := range []string{"join", "leave"} {
		t.Run(change, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ec := newECluster(t, eclusterConfig{nodes: 3, notFound: true, opts: []corral.GroupOption{
					corral.WithTTL(time.Hour), corral.WithNegativeTTL(time.Hour)}})
				keys := keyList(300, "a")
				for _, k := range keys {
					if _, err := ec.g("n0").Get(context.Background(), k); !errors.Is(err, corral.ErrNotFound) {
						t.Fatalf("Get(%s) = %v, want ErrNotFound", k, err)
					}
				}
				moved := moveKeys(t, ec, change, keys)
				for k := range moved {
					for _, n := range ec.Nodes() {
						if _, err := ec.g(n.Name()).Get(context.Background(), k); !errors.Is(err, corral.ErrNotFound) {
							t.Fatalf("after the %s, Get(%s) on %s = %v, want ErrNotFound", change, k, n.Name(), err)
						}
					}
					if got := ec.count(k); got != 1 {
						t.Fatalf("after the %s, the not-found %s was loaded %d times, want 1", change, k, got)
					}
				}
			})
		})
	}
}

// A new member connects to the others as they enter its view, not on its first question to
// them: a new owner's first miss asks the keys' former owners for a copy, each question
// bounded by a peek's short timeout (300 ms here), and a connection made by that question
// would spend most of it — on a link of 70 ms each way, 140 ms for the SYN and its answer
// and as much for the stream's preface, before the question's own round trip (on a lossy
// one, a lost SYN alone costs a second). Without a loader, a value a move does not carry
// is lost. (A first miss within a connection's making still finds no copy in time.)
func TestJoinerConnectsBeforeItsWarmPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 3, notFound: true, link: memnet.Link{Delay: 70 * time.Millisecond},
			opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		keys := keyList(300, "j")
		for _, k := range keys {
			if err := ec.g("n0").Set(context.Background(), k, "v:"+k); err != nil {
				t.Fatal(err)
			}
		}
		moved := moveKeys(t, ec, "join", keys)
		// The application's first Gets come a moment after the join: long enough for the
		// connections to be made (two round trips), not for a question to make one itself.
		time.Sleep(time.Second)
		joiner := ec.Node("n3")
		asked := 0
		for k := range moved {
			if joiner.Owner(k).Name != "n3" {
				continue // moved between the others (bounded loads)
			}
			asked++
			v, err := ec.g("n3").Get(context.Background(), k)
			if err != nil || v != "v:"+k {
				t.Fatalf("after the join, Get(%s) on its new owner = %q, %v; want the value written before it (from %s)", k, v, err, moved[k])
			}
		}
		if asked == 0 {
			t.Fatal("no key moved to the new member: nothing checked")
		}
	})
}

// A write applied on a leaving owner while its hand-off is on its way moves with the key
// too: the leaving node stops applying writes (writers go to the next owner), then sends what
// changed since its first round. Here the hand-off to n1 is slow (2 s from n2 to n1), and a
// Set of a key n2 owns reaches n2 meanwhile; without a loader, a value left behind would be
// lost with n2.
func TestWriteDuringHandoffMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 3, notFound: true, opts: []corral.GroupOption{corral.WithTTL(time.Hour)}})
		var owned []string // keys n2 owns
		for _, k := range keyList(300, "h") {
			if ec.Node("n0").Owner(k).Name == "n2" {
				owned = append(owned, k)
			}
		}
		if len(owned) < 20 {
			t.Fatalf("n2 owns %d of 300 keys", len(owned))
		}
		late, early := owned[0], owned[1:]
		for _, k := range early { // something to hand off, to n1 among others
			if err := ec.g("n0").Set(context.Background(), k, "v:"+k); err != nil {
				t.Fatal(err)
			}
		}
		ec.Network.SetLink(ec.Host("n2"), ec.Host("n1"), memnet.Link{Delay: 2 * time.Second})
		left := make(chan error, 1)
		go func() { left <- ec.Leave(context.Background(), "n2") }()
		time.Sleep(time.Second) // n2 hands off, and its entries for n1 are on their way
		if got := ec.Node("n0").Owner(late).Name; got != "n2" {
			t.Fatalf("%s is owned by %s while n2 hands off; want n2, for the write to reach it", late, got)
		}
		if err := ec.g("n0").Set(context.Background(), late, "v:"+late); err != nil {
			t.Fatalf("Set(%s) during n2's hand-off: %v", late, err)
		}
		if err := <-left; err != nil {
			t.Fatal(err)
		}
		ec.converge(t)
		for _, k := range owned {
			for _, name := range []string{"n0", "n1"} {
				if v, err := ec.g(name).Get(context.Background(), k); err != nil || v != "v:"+k {
					t.Fatalf("after n2 left, Get(%s) on %s = %q, %v; want its value", k, name, v, err)
				}
			}
		}
	})
}

// A joiner's first misses ask former owners that may not have heard of it yet: it joined
// through other members, and gossip reaches them a moment later. Until then they refuse it as
// a stranger; the warm pull asks again within its peek's time. Here n3 joins through n0 only,
// and at once asks n1 or n2 for a key it took from them; without a loader, a refusal taken
// as "no copy" would lose the value.
func TestJoinerAsksHoldersThatHaveNotHeardOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec := newECluster(t, eclusterConfig{nodes: 3, notFound: true, opts: []corral.GroupOption{corral.WithTTL(time.Hour)},
			join: func(name string, others []string) []string {
				if name == "n3" {
					return []string{"n0"}
				}
				return others
			}})
		keys := keyList(300, "g")
		before := map[string]string{}
		for _, k := range keys {
			if err := ec.g("n0").Set(context.Background(), k, "v:"+k); err != nil {
				t.Fatal(err)
			}
			before[k] = ec.Node("n0").Owner(k).Name
		}
		joiner, err := ec.Add()
		if err != nil {
			t.Fatal(err)
		}
		asked := 0
		for _, k := range keys {
			from := before[k]
			if joiner.Owner(k).Name != "n3" || from == "n0" {
				continue // a key n3 did not take from a member that has not heard of it
			}
			if knows(ec.Node(from), "n3") {
				break // gossip has reached the others: nothing left to check
			}
			asked++
			if v, err := ec.g("n3").Get(context.Background(), k); err != nil || v != "v:"+k {
				t.Fatalf("Get(%s) on n3, just joined, = %q, %v; want the value %s holds", k, v, err, from)
			}
		}
		if asked == 0 {
			t.Fatal("no key n3 took from a member that had not heard of it: nothing checked")
		}
	})
}

// knows reports whether n's view holds the member called name.
func knows(n *corral.Node, name string) bool {
	for _, m := range n.Members() {
		if m.Name == name {
			return true
		}
	}
	return false
}
