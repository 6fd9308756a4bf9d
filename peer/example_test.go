package peer_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/corralcache/corral/peer"
)

// A one-node cluster: no seeds, so the member waits to be joined.
func Example() {
	m, err := peer.New(peer.Config{
		Name:     "node-a",
		BindAddr: "127.0.0.1",
		BindPort: 0, // pick a free port; GossipAddr tells which
		Meta:     peer.Meta{PeerAddr: "127.0.0.1:7947"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	for _, mem := range m.Members() {
		fmt.Println(mem.Name, mem.Meta.PeerAddr, mem.Meta.RingVersion == peer.RingVersion)
	}
	// Output: node-a 127.0.0.1:7947 true
}

// Two members: b joins through a, then leaves gracefully; a's callbacks follow along.
func Example_cluster() {
	changes := make(chan []peer.Member, 16)
	events := make(chan peer.Event, 16)
	a, err := peer.New(peer.Config{
		Name:           "a",
		BindAddr:       "127.0.0.1",
		GossipInterval: 20 * time.Millisecond, // faster than production, so Leave returns sooner
		OnChange:       func(ms []peer.Member) { changes <- ms },
		OnEvent:        func(e peer.Event) { events <- e },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	b, err := peer.New(peer.Config{
		Name:           "b",
		BindAddr:       "127.0.0.1",
		GossipInterval: 20 * time.Millisecond,
		Seeds:          []string{a.GossipAddr()}, // joined before New returns
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	fmt.Println("b sees", names(b.Members()))

	for ms := range changes {
		if len(ms) == 2 {
			fmt.Println("a sees", names(ms))
			break
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Leave(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for e := range events {
		if e.Kind == peer.EventLeave {
			fmt.Println("a got", e.Kind, e.Member.Name)
			break
		}
	}
	// Output:
	// b sees [a b]
	// a sees [a b]
	// a got leave b
}

// Seeds that name a headless Service: every pod is a seed, and the name is looked up again on
// every attempt. A StaticResolver stands in for DNS here.
func ExampleStaticResolver() {
	res := &peer.StaticResolver{}
	a, err := peer.New(peer.Config{Name: "a", BindAddr: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	res.Set("corral-headless.default.svc.cluster.local", "127.0.0.1")

	b, err := peer.New(peer.Config{
		Name:     "b",
		BindAddr: "127.0.0.1",
		Resolver: res,
		Seeds:    []string{"dns+corral-headless.default.svc.cluster.local:" + portOf(a.GossipAddr())},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	fmt.Println(names(b.Members()))
	// Output: [a b]
}

// Join now, beyond the configured seeds.
func ExampleMembership_Join() {
	a, err := peer.New(peer.Config{Name: "a", BindAddr: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := peer.New(peer.Config{Name: "b", BindAddr: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := b.Join(ctx, []string{a.GossipAddr()})
	fmt.Println(n, err, names(b.Members()))
	// Output: 1 <nil> [a b]
}

// staticDiscoverer reports fixed addresses: the smallest Discoverer.
type staticDiscoverer []string

func (d staticDiscoverer) Run(ctx context.Context, _ *slog.Logger, update func([]string)) error {
	update(d)
	<-ctx.Done()
	return nil
}

// A discovery scheme: the package that implements it registers it (from its init function, as
// peer/k8s does for k8s://), and seeds of that scheme then work in Config.Seeds.
func ExampleRegisterScheme() {
	a, err := peer.New(peer.Config{Name: "node-a", BindAddr: "127.0.0.1", Meta: peer.Meta{PeerAddr: "127.0.0.1:7947"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	peer.RegisterScheme("static", func(target string) (peer.Discoverer, error) {
		return staticDiscoverer(strings.Split(target, ",")), nil
	})
	defer peer.RegisterScheme("static", nil)
	b, err := peer.New(peer.Config{Name: "node-b", BindAddr: "127.0.0.1", Meta: peer.Meta{PeerAddr: "127.0.0.1:7948"},
		Seeds: []string{"static://" + a.GossipAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	// New waited for the discovery's first answer and joined it.
	for _, m := range b.Members() {
		fmt.Println(m.Name)
	}
	// Output:
	// node-a
	// node-b
}
