package corral_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/lease"
)

// noLoader is the loader of a group whose values come only from writes (corral serve
// without --origin).
func noLoader(context.Context, string) (string, error) { return "", corral.ErrNotFound }

// leaseTally counts the answers of many concurrent Lease calls.
type leaseTally struct {
	mu     sync.Mutex
	states map[corral.LeaseState]int
	tokens []string
	values map[string]int
}

func newLeaseTally() *leaseTally {
	return &leaseTally{states: map[corral.LeaseState]int{}, values: map[string]int{}}
}

func (t *leaseTally) add(l corral.Lease[string]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.states[l.State]++
	if l.Token != "" {
		t.tokens = append(t.tokens, l.Token)
	}
	if l.State == corral.LeaseHit || l.State == corral.LeaseStale {
		t.values[l.Value]++
	}
}

// K concurrent Lease calls on each of 3 nodes for a missing key: one FILL in the cluster,
// and every other caller is held until the filler's value lands, then answered hit.
func TestLeaseOneFillerClusterWide(t *testing.T) {
	nodes := newCluster(t, 3)
	gs := groups(t, nodes, "g", noLoader)
	const K = 50
	tally := newLeaseTally()
	var wg sync.WaitGroup
	for _, g := range gs {
		for range K {
			wg.Go(func() {
				l, err := g.Lease(context.Background(), "hot", corral.LeaseOptions{Fill: 10 * time.Second, Wait: 10 * time.Second})
				if err != nil {
					t.Errorf("Lease: %v", err)
					return
				}
				if l.State == corral.LeaseFill {
					time.Sleep(50 * time.Millisecond) // the filler's build
					ok, err := g.FillSet(context.Background(), "hot", "built", l.Token, corral.Expiry{TTL: time.Hour})
					if !ok || err != nil {
						t.Errorf("FillSet = %v, %v", ok, err)
					}
				}
				tally.add(l)
			})
		}
	}
	wg.Wait()
	if tally.states[corral.LeaseFill] != 1 || tally.states[corral.LeaseHit] != 3*K-1 || tally.values["built"] != 3*K-1 {
		t.Fatalf("answers %v, values %v; want 1 fill and %d hits of \"built\"", tally.states, tally.values, 3*K-1)
	}
	var granted uint64
	for i, g := range gs {
		granted += g.Stats().LeasesGranted
		if v, err := g.Get(context.Background(), "hot"); v != "built" || err != nil {
			t.Errorf("Get on %s = %q, %v", nodes[i].Name(), v, err)
		}
	}
	if granted != 1 {
		t.Fatalf("leases granted in the cluster: %d, want 1", granted)
	}
}

// A filler that never stores: its lease lapses and passes to exactly one waiting caller;
// the first filler's late FillSet stores nothing.
func TestLeaseLapsesToOneCaller(t *testing.T) {
	nodes := newCluster(t, 3)
	gs := groups(t, nodes, "g", noLoader)
	first, err := gs[0].Lease(context.Background(), "k", corral.LeaseOptions{Fill: 300 * time.Millisecond})
	if err != nil || first.State != corral.LeaseFill {
		t.Fatalf("first Lease = %+v, %v", first, err)
	}
	const K = 20
	tally := newLeaseTally()
	var wg sync.WaitGroup
	for _, g := range gs {
		for range K {
			wg.Go(func() {
				l, err := g.Lease(context.Background(), "k", corral.LeaseOptions{Fill: 10 * time.Second, Wait: 20 * time.Second})
				if err != nil {
					t.Errorf("Lease: %v", err)
					return
				}
				if l.State == corral.LeaseFill {
					if ok, err := g.FillSet(context.Background(), "k", "second", l.Token, corral.Expiry{TTL: time.Hour}); !ok || err != nil {
						t.Errorf("FillSet = %v, %v", ok, err)
					}
				}
				tally.add(l)
			})
		}
	}
	wg.Wait()
	if tally.states[corral.LeaseFill] != 1 || tally.states[corral.LeaseHit] != 3*K-1 {
		t.Fatalf("answers %v, want 1 fill and %d hits", tally.states, 3*K-1)
	}
	if ok, err := gs[1].FillSet(context.Background(), "k", "late", first.Token, corral.Expiry{TTL: time.Hour}); ok || err != nil {
		t.Fatalf("late FillSet = %v, %v; want false", ok, err)
	}
	if v, _ := gs[2].Get(context.Background(), "k"); v != "second" {
		t.Fatalf("Get = %q, want the second filler's value", v)
	}
	var lapsed, rejected uint64
	for _, g := range gs {
		lapsed += g.Stats().LeasesLapsed
		rejected += g.Stats().LeaseRejected
	}
	if lapsed != 1 || rejected != 1 {
		t.Fatalf("lapsed %d, rejected %d; want 1, 1", lapsed, rejected)
	}
}

// A Remove or a Set revokes the lease: its FillSet stores nothing, and waiters are answered
// at once (a hit of the Set's value; after a Remove, one of them fills).
func TestWritesRevokeTheLease(t *testing.T) {
	nodes := newCluster(t, 2)
	gs := groups(t, nodes, "g", noLoader)
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		write func(key string) error
		want  corral.LeaseState
	}{
		{"remove", func(key string) error { return gs[1].Remove(ctx, key) }, corral.LeaseFill},
		{"set", func(key string) error { return gs[1].Set(ctx, key, "set") }, corral.LeaseHit},
		{"set with expiry", func(key string) error { return gs[1].SetWithExpiry(ctx, key, "set", corral.Expiry{TTL: time.Hour}) }, corral.LeaseHit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := "k-" + tt.name
			l, err := gs[0].Lease(ctx, key, corral.LeaseOptions{Fill: time.Minute})
			if err != nil || l.State != corral.LeaseFill {
				t.Fatalf("Lease = %+v, %v", l, err)
			}
			waiter := make(chan corral.Lease[string], 1)
			go func() {
				w, err := gs[1].Lease(ctx, key, corral.LeaseOptions{Fill: time.Minute, Wait: 30 * time.Second})
				if err != nil {
					t.Errorf("waiter: %v", err)
				}
				waiter <- w
			}()
			clustertest.Eventually(t, "the waiter waits", func() bool { return busy(gs[1], key) })
			if err := tt.write(key); err != nil {
				t.Fatal(err)
			}
			if w := <-waiter; w.State != tt.want {
				t.Fatalf("waiter answered %+v, want %s", w, tt.want)
			}
			if ok, err := gs[0].FillSet(ctx, key, "filled", l.Token, corral.Expiry{TTL: time.Hour}); ok || err != nil {
				t.Fatalf("FillSet after the write = %v, %v; want false", ok, err)
			}
			v, err := gs[0].Get(ctx, key)
			if tt.want == corral.LeaseFill && !errors.Is(err, corral.ErrNotFound) || tt.want == corral.LeaseHit && v != "set" {
				t.Fatalf("Get after = %q, %v", v, err)
			}
		})
	}
}

// busy reports whether a Lease call on g for key answers busy now (without waiting).
func busy(g *corral.Group[string], key string) bool {
	l, err := g.Lease(context.Background(), key, corral.LeaseOptions{Fill: time.Minute})
	return err == nil && l.State == corral.LeaseBusy
}

// A join moves some keys to the new member: the old owner's leases of those keys are void
// (their FillSets store nothing), and the leases of keys that stayed still store.
func TestOwnershipChangeVoidsLeases(t *testing.T) {
	nodes := newCluster(t, 2)
	gs := groups(t, nodes, "g", noLoader)
	ctx := context.Background()
	tokens := map[string]string{}
	for i := range 100 {
		key := fmt.Sprint("k", i)
		l, err := gs[i%2].Lease(ctx, key, corral.LeaseOptions{Fill: time.Minute})
		if err != nil || l.State != corral.LeaseFill {
			t.Fatalf("Lease(%s) = %+v, %v", key, l, err)
		}
		tokens[key] = l.Token
	}
	n2 := newNode(t, testConfig("n2", nodes[0].GossipAddr()))
	g2, err := corral.NewGroup(n2, "g", noLoader)
	if err != nil {
		t.Fatal(err)
	}
	all := append(nodes, n2)
	waitMembers(t, all, 3)
	gs = append(gs, g2)
	moved := 0
	for key, token := range tokens {
		ok, err := gs[0].FillSet(ctx, key, "v", token, corral.Expiry{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if owner := n2.Owner(key).Name; owner == "n2" {
			moved++
			if ok {
				t.Errorf("%s moved to n2, yet its old lease stored", key)
			}
		} else if !ok {
			t.Errorf("%s stayed on %s, yet its lease did not store", key, owner)
		}
	}
	if moved == 0 {
		t.Fatal("no key moved to n2")
	}
}

func TestLeaseBadArguments(t *testing.T) {
	n := newNode(t, testConfig("n0"))
	g, err := corral.NewGroup(n, "g", noLoader)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		call func() error
		want error
	}{
		{"fill 0", func() error { _, err := g.Lease(ctx, "k", corral.LeaseOptions{}); return err }, corral.ErrLeaseArgument},
		{"fill too long", func() error {
			_, err := g.Lease(ctx, "k", corral.LeaseOptions{Fill: 2 * corral.MaxLeaseFill})
			return err
		}, corral.ErrLeaseArgument},
		{"negative wait", func() error {
			_, err := g.Lease(ctx, "k", corral.LeaseOptions{Fill: time.Second, Wait: -1})
			return err
		}, corral.ErrLeaseArgument},
		{"empty token", func() error { _, err := g.FillSet(ctx, "k", "v", "", corral.Expiry{}); return err }, corral.ErrLeaseArgument},
		{"negative ttl", func() error { _, err := g.FillSet(ctx, "k", "v", "t", corral.Expiry{TTL: -1}); return err }, corral.ErrLeaseArgument},
		{"negative swr", func() error { return g.SetWithExpiry(ctx, "k", "v", corral.Expiry{SWR: -1}) }, corral.ErrLeaseArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	var le *corral.LimitError
	if _, err := g.Lease(ctx, "", corral.LeaseOptions{Fill: time.Second}); !errors.As(err, &le) {
		t.Fatalf("empty key: %v", err)
	}
	// Nothing changed: the key has no lease and no value.
	if l, err := g.Lease(ctx, "k", corral.LeaseOptions{Fill: time.Second}); err != nil || l.State != corral.LeaseFill {
		t.Fatalf("Lease after bad calls = %+v, %v", l, err)
	}
}

// A FillSet with a token of the right shape that was never granted stores nothing, and a
// waiter whose context ends gets ctx.Err() alone.
func TestLeaseUnknownTokenAndCancelledWaiter(t *testing.T) {
	nodes := newCluster(t, 2)
	gs := groups(t, nodes, "g", noLoader)
	ctx := context.Background()
	if ok, err := gs[1].FillSet(ctx, "k", "v", "0123456789abcdef", corral.Expiry{TTL: time.Hour}); ok || err != nil {
		t.Fatalf("FillSet of an unknown token = %v, %v", ok, err)
	}
	if _, err := gs[0].Lease(ctx, "k", corral.LeaseOptions{Fill: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i, g := range gs {
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := g.Lease(cctx, "k", corral.LeaseOptions{Fill: time.Minute, Wait: time.Minute})
			errc <- err
		}()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter on %s: %v", nodes[i].Name(), err)
		}
	}
}

// A waiter on a node that does not own the key is held by one long-poll peer call, not by
// polling: however long it waits, its node sends the owner one Lease request.
func TestLeaseWaiterSendsOneRequest(t *testing.T) {
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var nodes []*corral.Node
	for i, reg := range regs {
		cfg := testConfig(fmt.Sprint("w", i))
		cfg.Registerer = reg
		if i > 0 {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		nodes = append(nodes, newNode(t, cfg))
	}
	waitMembers(t, nodes, 2)
	gs := groups(t, nodes, "g", noLoader)
	key := keyOwnedBy(t, nodes[0], "lp")
	filler, err := gs[0].Lease(context.Background(), key, corral.LeaseOptions{Fill: 30 * time.Second})
	if err != nil || filler.State != corral.LeaseFill {
		t.Fatalf("filler: %+v, %v", filler, err)
	}
	leaseCalls := func() float64 { // every code
		mfs, err := regs[1].Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, mf := range mfs {
			if mf.GetName() != "corral_peer_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "method" && l.GetValue() == "Lease" {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	before := leaseCalls()
	got := make(chan corral.Lease[string], 1)
	asking := make(chan struct{})
	go func() {
		close(asking)
		l, err := gs[1].Lease(context.Background(), key, corral.LeaseOptions{Fill: 30 * time.Second, Wait: 30 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	<-asking
	// The waiter is held meanwhile (the counter counts a call when it ends); a poller would
	// have asked several times.
	time.Sleep(500 * time.Millisecond)
	if leaseCalls() != before {
		t.Fatal("the waiter's call ended before the value landed")
	}
	if ok, err := gs[0].FillSet(context.Background(), key, "built", filler.Token, corral.Expiry{TTL: time.Hour}); !ok || err != nil {
		t.Fatalf("FillSet = %v, %v", ok, err)
	}
	if l := <-got; l.State != corral.LeaseHit || l.Value != "built" {
		t.Fatalf("waiter got %+v, want the filler's value", l)
	}
	if n := leaseCalls() - before; n != 1 {
		t.Fatalf("the waiter's node sent %v Lease requests, want 1", n)
	}
}

// A full lease table is ErrTooManyLeases, not ErrLeaseArgument, on the owner and on a
// member that asked it; the key it refused gets no lease, and a key whose lease the owner
// holds is still answered.
func TestLeaseTableFull(t *testing.T) {
	nodes := newCluster(t, 2)
	gs := groups(t, nodes, "g", noLoader)
	owner, other := gs[0], gs[1]
	ctx := context.Background()
	var ownKey, held string // keys nodes[0] owns in both views
	for i := 0; ownKey == "" || held == ""; i++ {
		k := fmt.Sprint("k", i)
		if nodes[0].Owner(k).Name == nodes[0].Name() && nodes[1].Owner(k).Name == nodes[0].Name() {
			if held == "" {
				held = k
			} else {
				ownKey = k
			}
		}
	}
	if _, err := owner.Lease(ctx, held, corral.LeaseOptions{Fill: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// The owner's table fills up with leases of keys it owns in both views.
	for i, filled := 0, 1; filled < lease.MaxHeld; i++ {
		k := fmt.Sprint("filler-", i)
		if nodes[0].Owner(k).Name != nodes[0].Name() || nodes[1].Owner(k).Name != nodes[0].Name() {
			continue
		}
		if _, err := owner.Lease(ctx, k, corral.LeaseOptions{Fill: time.Minute}); err != nil {
			t.Fatalf("lease %d: %v", filled, err)
		}
		filled++
	}
	granted := owner.Stats().LeasesGranted
	for i, g := range []*corral.Group[string]{owner, other} {
		_, err := g.Lease(ctx, ownKey, corral.LeaseOptions{Fill: time.Second})
		if !errors.Is(err, corral.ErrTooManyLeases) || errors.Is(err, corral.ErrLeaseArgument) {
			t.Fatalf("Lease on %s with the owner's table full: %v, want ErrTooManyLeases alone", nodes[i].Name(), err)
		}
		if l, err := g.Lease(ctx, held, corral.LeaseOptions{Fill: time.Second}); err != nil || l.State != corral.LeaseBusy {
			t.Fatalf("Lease of a held key on %s = %+v, %v; want busy", nodes[i].Name(), l, err)
		}
	}
	if got := owner.Stats().LeasesGranted; got != granted {
		t.Fatalf("%d tokens granted by the refused calls, want 0", got-granted)
	}
}

// Past its TTL but within its SWR, a value is served stale to everyone, and exactly one
// caller in the cluster gets a token to refresh it.
func TestStaleHandsOutOneRefreshToken(t *testing.T) {
	nodes := newCluster(t, 3)
	gs := groups(t, nodes, "g", noLoader)
	ctx := context.Background()
	if err := gs[0].SetWithExpiry(ctx, "s", "old", corral.Expiry{TTL: 50 * time.Millisecond, SWR: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, "the value to go stale", func() bool {
		_, info, err := gs[0].Peek(ctx, "s")
		return err == nil && info.FreshFor <= 0
	})
	const K = 30
	tally := newLeaseTally()
	var wg sync.WaitGroup
	for _, g := range gs {
		for range K {
			wg.Go(func() {
				l, err := g.Lease(ctx, "s", corral.LeaseOptions{Fill: time.Minute, Wait: time.Second})
				if err != nil {
					t.Errorf("Lease: %v", err)
					return
				}
				tally.add(l)
			})
		}
	}
	wg.Wait()
	if tally.states[corral.LeaseStale] != 3*K || tally.values["old"] != 3*K || len(tally.tokens) != 1 {
		t.Fatalf("answers %v, values %v, %d tokens; want %d stale \"old\" and 1 token", tally.states, tally.values, len(tally.tokens), 3*K)
	}
	if ok, err := gs[2].FillSet(ctx, "s", "new", tally.tokens[0], corral.Expiry{TTL: time.Hour}); !ok || err != nil {
		t.Fatalf("refresh FillSet = %v, %v", ok, err)
	}
	if l, err := gs[1].Lease(ctx, "s", corral.LeaseOptions{Fill: time.Minute}); l.State != corral.LeaseHit || l.Value != "new" || err != nil {
		t.Fatalf("Lease after the refresh = %+v, %v", l, err)
	}
}
