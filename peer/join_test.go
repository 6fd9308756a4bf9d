package peer_test

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

// A member whose seed is not listening yet (it starts later, as pods of one rollout do) keeps
// retrying until it is, instead of staying a one-node cluster.
func TestRetryUntilSeedListens(t *testing.T) {
	port := freePort(t, "127.0.0.1")
	seed := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))

	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{seed}
	b := start(t, cfgB) // its first attempt fails: nothing listens on port
	if got := names(b.Members()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b sees %v before a exists", got)
	}

	cfgA := fastConfig(t, "a")
	cfgA.BindPort = port
	a := start(t, cfgA) // no seeds: a would never find b by itself
	if a.GossipAddr() != seed {
		t.Fatalf("a is at %s, want %s", a.GossipAddr(), seed)
	}
	waitFor(t, "b's retries to reach a", hasNames(b, "a", "b"))
	waitFor(t, "a to see b", hasNames(a, "a", "b"))
}

// Two clusters that formed apart, {a, b} and {c, d}, merge once a seed of one side resolves to a
// member of the other: the re-join loop joins seed addresses that are not members. Members sit on
// separate loopback addresses with one port, as pods behind a headless Service do, and seeds are
// dns+ names answered by a StaticResolver that the test changes, as DNS changes.
func TestRejoinMergesSplitClusters(t *testing.T) {
	ips := map[string]string{"a": "127.0.0.11", "b": "127.0.0.12", "c": "127.0.0.13", "d": "127.0.0.14"}
	port := freePort(t, ips["a"], ips["b"], ips["c"], ips["d"])
	res := &peer.StaticResolver{}
	res.Set("left.test", ips["a"], ips["b"])
	res.Set("right.test", ips["c"], ips["d"])

	ms := map[string]*peer.Membership{}
	for _, name := range []string{"a", "b", "c", "d"} {
		cfg := fastConfig(t, name)
		cfg.BindAddr = ips[name]
		cfg.BindPort = port
		cfg.Resolver = res
		cfg.Seeds = []string{fmt.Sprintf("dns+left.test:%d", port)}
		if name == "c" || name == "d" {
			cfg.Seeds = []string{fmt.Sprintf("dns+right.test:%d", port)}
		}
		ms[name] = start(t, cfg)
	}
	for _, name := range []string{"a", "b"} {
		waitFor(t, name+" in {a, b}", hasNames(ms[name], "a", "b"))
	}
	for _, name := range []string{"c", "d"} {
		waitFor(t, name+" in {c, d}", hasNames(ms[name], "c", "d"))
	}

	res.Set("right.test", ips["c"], ips["d"], ips["a"])
	for name, m := range ms {
		waitFor(t, name+" to see the merged cluster", hasNames(m, "a", "b", "c", "d"))
	}
}

// Every member uses one dns+ seed naming all of them, itself included; each resolves it on every
// attempt and skips its own address.
func TestDNSSeeds(t *testing.T) {
	ips := []string{"127.0.0.21", "127.0.0.22", "127.0.0.23"}
	port := freePort(t, ips...)
	res := &peer.StaticResolver{}
	res.Set("corral-headless.default.svc.cluster.local", ips...)
	seed := fmt.Sprintf("dns+corral-headless.default.svc.cluster.local:%d", port)

	var ms []*peer.Membership
	for i, name := range []string{"a", "b", "c"} {
		cfg := fastConfig(t, name)
		cfg.BindAddr = ips[i]
		cfg.BindPort = port
		cfg.Resolver = res
		cfg.Seeds = []string{seed}
		ms = append(ms, start(t, cfg))
	}
	for _, m := range ms {
		waitFor(t, fmt.Sprint(m, " to see all"), hasNames(m, "a", "b", "c"))
	}
	for _, m := range ms[0].Members() {
		if host, _, _ := net.SplitHostPort(m.GossipAddr); host != ips[m.Name[0]-'a'] {
			t.Errorf("%s advertises %s", m.Name, m.GossipAddr)
		}
	}

	// The only answer is the member itself: not a seed reached.
	res.Set("alone.test", "127.0.0.1")
	cfg := fastConfig(t, "e")
	m := start(t, cfg)
	if n, err := m.Join(testCtx(t), []string{"dns+alone.test:" + portOf(m.GossipAddr())}); err == nil || n != 0 {
		t.Errorf("joining only itself: %d, %v; want an error", n, err)
	}
	if _, err := m.Join(testCtx(t), []string{"dns+unknown.test:7946"}); err == nil {
		t.Error("joining a name that does not resolve: no error")
	}
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// A member restarted under its old name on a new port (its old entry still known to peers, alive
// or dead) is refused as a "conflicting address" at first, and admitted once the old entry has
// been dead for DeadNodeReclaimTime, or at once if it had left.
func TestRestartWithSameNameOnNewPort(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		t.Run(map[bool]string{false: "crashed", true: "left"}[graceful], func(t *testing.T) {
			rec := &recorder{}
			cfgA := fastConfig(t, "a")
			logA := testLog(t, "a")
			cfgA.Logger = slog.New(logA)
			rec.install(&cfgA)
			a := start(t, cfgA)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("a's events about b: %v", rec.kinds("b"))
				}
			})
			cfgB := fastConfig(t, "b")
			cfgB.Seeds = []string{a.GossipAddr()}
			cfgB.Logger = slog.New(testLog(t, "b"))
			old, err := peer.New(cfgB)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { old.Close() })
			waitFor(t, "b to join", hasNames(a, "a", "b"))
			oldAddr := old.GossipAddr()
			if graceful {
				if err := old.Leave(testCtx(t)); err != nil {
					t.Fatal(err)
				}
			}
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}

			b := start(t, cfgB) // same name, BindPort 0: a new port
			if b.GossipAddr() == oldAddr {
				t.Fatalf("restarted on the same address %s", oldAddr)
			}
			waitFor(t, "a to admit b at its new address", func() bool {
				ms := a.Members()
				return len(ms) == 2 && ms[1].Name == "b" && ms[1].GossipAddr == b.GossipAddr()
			})
			waitFor(t, "b to see a", hasNames(b, "a", "b"))
			// The crashed b was still alive in a's view when the new one came: a refused it.
			if conflicts := logA.count("member name claimed from two addresses"); !graceful && conflicts == 0 {
				t.Error("a never saw b's name conflict")
			}
			end := peer.EventFail
			if graceful {
				end = peer.EventLeave
			}
			// Then a join, possibly after a flap: a stray message of the old b's life (such as a
			// late copy of its leave) outranks the new b's first messages, because a restarted
			// member's incarnation numbers start over. The new b refutes it at once.
			waitFor(t, fmt.Sprintf("a's events about b to be join, %v, …, join", end), func() bool {
				ks := rec.kinds("b")
				return len(ks) >= 3 && ks[0] == peer.EventJoin && ks[1] == end && ks[len(ks)-1] == peer.EventJoin &&
					slices.Equal(names(a.Members()), []string{"a", "b"})
			})

		})
	}
}

// A member back under the name of a dead member at a new address, which memberlist refuses
// until the old entry has been dead for DeadNodeReclaimTime, is listed by Claimants meanwhile,
// with its new address and meta, and not by Members.
func TestClaimantOfADeadMembersName(t *testing.T) {
	cfgA := fastConfig(t, "a")
	cfgA.DeadNodeReclaimTime = time.Hour
	a := start(t, cfgA)
	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{a.GossipAddr()}
	old, err := peer.New(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	waitFor(t, "b to join", hasNames(a, "a", "b"))
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to find b dead", hasNames(a, "a"))
	if cs := a.Claimants(); len(cs) != 0 {
		t.Fatalf("claimants before b came back: %v", cs)
	}

	b := start(t, cfgB) // same name, BindPort 0: a new port
	waitFor(t, "a to list b's claim", func() bool {
		cs := a.Claimants()
		return len(cs) == 1 && cs[0].Name == "b" && cs[0].GossipAddr == b.GossipAddr() && cs[0].Meta.PeerAddr == peerAddrOf("b")
	})
	if !slices.Equal(names(a.Members()), []string{"a"}) {
		t.Fatalf("a's members %v: b admitted before DeadNodeReclaimTime", names(a.Members()))
	}
}
