package peer_test

import (
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/corralcache/corral/peer"
)

func TestMembersJoinThroughOneSeed(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e"}
	recs := map[string]*recorder{}
	ms := map[string]*peer.Membership{}
	for i, name := range all {
		cfg := fastConfig(t, name)
		if i > 0 {
			cfg.Seeds = []string{ms["a"].GossipAddr()}
		}
		recs[name] = &recorder{}
		recs[name].install(&cfg)
		ms[name] = start(t, cfg)
	}

	for _, name := range all {
		waitFor(t, name+" to see every member", hasNames(ms[name], all...))
	}
	want := ms["a"].Members()
	for _, name := range all {
		m := ms[name]
		got := m.Members()
		if !sameMembers(got, want) {
			t.Errorf("%s sees %+v, a sees %+v", name, got, want)
		}
		for _, mem := range got {
			if mem.Meta.PeerAddr != peerAddrOf(mem.Name) || mem.Meta.RingVersion != peer.RingVersion {
				t.Errorf("%s sees %s with meta %+v", name, mem.Name, mem.Meta)
			}
			if mem.Name == name && !sameMembers([]peer.Member{mem}, []peer.Member{m.Self()}) {
				t.Errorf("%s: Members has %+v, Self %+v", name, mem, m.Self())
			}
		}
		waitFor(t, name+"'s last OnChange to match Members", func() bool {
			return sameMembers(recs[name].lastChange(), m.Members())
		})
		for _, other := range all {
			if ks := recs[name].kinds(other); !slices.Equal(ks, []peer.EventKind{peer.EventJoin}) {
				t.Errorf("%s got events %v about %s, want one join", name, ks, other)
			}
		}
	}
}

func TestLeaveIsReportedAsLeave(t *testing.T) {
	recA, recB, recC := &recorder{}, &recorder{}, &recorder{}
	cfgA := fastConfig(t, "a")
	logA := testLog(t, "a")
	cfgA.Logger = slog.New(logA)
	recA.install(&cfgA)
	a := start(t, cfgA)
	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{a.GossipAddr()}
	recB.install(&cfgB)
	b := start(t, cfgB)
	cfgC := fastConfig(t, "c")
	cfgC.Seeds = []string{a.GossipAddr()}
	recC.install(&cfgC)
	c := start(t, cfgC)
	for _, m := range []*peer.Membership{a, b, c} {
		waitFor(t, "3 members", hasNames(m, "a", "b", "c"))
	}

	if err := c.Leave(testCtx(t)); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := c.Leave(testCtx(t)); err != nil {
		t.Errorf("second Leave: %v", err)
	}
	for name, m := range map[string]*peer.Membership{"a": a, "b": b} {
		waitFor(t, name+" to drop c", hasNames(m, "a", "b"))
	}
	for name, r := range map[string]*recorder{"a": recA, "b": recB} {
		waitFor(t, name+" to report c's leave", func() bool {
			return slices.Equal(r.kinds("c"), []peer.EventKind{peer.EventJoin, peer.EventLeave})
		})
	}
	// c keeps serving until Close: it still lists itself, and got no event about its own leave.
	if got := names(c.Members()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after Leave, c sees %v", got)
	}
	if ks := recC.kinds("c"); !slices.Equal(ks, []peer.EventKind{peer.EventJoin}) {
		t.Errorf("c got %v about itself", ks)
	}
	if _, err := c.Join(testCtx(t), []string{a.GossipAddr()}); !errors.Is(err, peer.ErrLeft) {
		t.Errorf("Join after Leave: %v, want ErrLeft", err)
	}
	if err := c.UpdateMeta(testCtx(t), peer.Meta{PeerAddr: "127.0.0.1:1"}); !errors.Is(err, peer.ErrLeft) {
		t.Errorf("UpdateMeta after Leave: %v, want ErrLeft", err)
	}

	if err := c.Close(); err != nil {
		t.Fatalf("Close after Leave: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Leave(testCtx(t)); !errors.Is(err, peer.ErrClosed) {
		t.Errorf("Leave after Close: %v, want ErrClosed", err)
	}
	// A left member is not probed, so Close after Leave must not turn the leave into a failure.
	// Let a run two more full state exchanges with b (a second or so, over three suspicion
	// timeouts), counted in a's debug log, before checking that it did not.
	const sync = "Initiating push/pull sync with: b"
	n := logA.count(sync)
	waitFor(t, "a to sync with b twice more", func() bool { return logA.count(sync) >= n+2 })
	for name, r := range map[string]*recorder{"a": recA, "b": recB} {
		if ks := r.kinds("c"); !slices.Equal(ks, []peer.EventKind{peer.EventJoin, peer.EventLeave}) {
			t.Errorf("%s got %v about c, want join, leave", name, ks)
		}
	}
}

func TestCrashIsReportedAsFail(t *testing.T) {
	recA, recB := &recorder{}, &recorder{}
	cfgA := fastConfig(t, "a")
	recA.install(&cfgA)
	a := start(t, cfgA)
	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{a.GossipAddr()}
	recB.install(&cfgB)
	b := start(t, cfgB)
	cfgC := fastConfig(t, "c")
	cfgC.Seeds = []string{a.GossipAddr()}
	c := start(t, cfgC)
	for _, m := range []*peer.Membership{a, b, c} {
		waitFor(t, "3 members", hasNames(m, "a", "b", "c"))
	}

	if err := c.Close(); err != nil { // no Leave: a crash, as far as peers can tell
		t.Fatal(err)
	}
	for name, r := range map[string]*recorder{"a": recA, "b": recB} {
		waitFor(t, name+" to report c's failure", func() bool {
			return slices.Equal(r.kinds("c"), []peer.EventKind{peer.EventJoin, peer.EventFail})
		})
	}
	for name, m := range map[string]*peer.Membership{"a": a, "b": b} {
		if got := names(m.Members()); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s still sees %v", name, got)
		}
		waitFor(t, name+"'s OnChange to drop c", func() bool {
			return slices.Equal(names(map[string]*recorder{"a": recA, "b": recB}[name].lastChange()), []string{"a", "b"})
		})
	}
}

func TestUpdateMeta(t *testing.T) {
	recB := &recorder{}
	a := start(t, fastConfig(t, "a"))
	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{a.GossipAddr()}
	recB.install(&cfgB)
	b := start(t, cfgB)
	waitFor(t, "b to see a", hasNames(b, "a", "b"))

	started := a.Self().Meta.StartedAt
	if err := a.UpdateMeta(testCtx(t), peer.Meta{PeerAddr: "127.0.0.1:4242"}); err != nil {
		t.Fatalf("UpdateMeta: %v", err)
	}
	if got := a.Self().Meta; got.PeerAddr != "127.0.0.1:4242" || !got.StartedAt.Equal(started) || got.RingVersion != peer.RingVersion {
		t.Errorf("Self().Meta = %+v after UpdateMeta", got)
	}
	waitFor(t, "b to see a's new PeerAddr", func() bool {
		return slices.Equal(recB.kinds("a"), []peer.EventKind{peer.EventJoin, peer.EventUpdate}) &&
			b.Members()[0].Meta.PeerAddr == "127.0.0.1:4242"
	})
	if err := a.UpdateMeta(testCtx(t), peer.Meta{RingVersion: peer.RingVersion + 1}); err == nil {
		t.Error("UpdateMeta changed the ring version")
	}
}

func TestRingVersionMismatchIsNeverAdmitted(t *testing.T) {
	logA := testLog(t, "a")
	cfgA := fastConfig(t, "a")
	cfgA.Logger = slog.New(logA)
	a := start(t, cfgA)
	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{a.GossipAddr()}
	b := start(t, cfgB)
	waitFor(t, "b to join a", hasNames(a, "a", "b"))

	// c runs another version of the ownership rules.
	logC := testLog(t, "c")
	cfgC := fastConfig(t, "c")
	cfgC.Meta.RingVersion = peer.RingVersion + 1
	cfgC.Logger = slog.New(logC)
	cfgC.Seeds = []string{a.GossipAddr(), b.GossipAddr()}
	c := start(t, cfgC)
	if n, err := c.Join(testCtx(t), []string{a.GossipAddr()}); err == nil {
		t.Errorf("c joined a (%d reached)", n)
	}
	// Both sides refuse: a when c's state arrives, c when a's does; and c's background loop
	// keeps knocking. Wait until a has refused c and c has been through several attempts.
	waitFor(t, "a to refuse c", func() bool { return logA.count("refusing member") >= 1 })
	waitFor(t, "c to retry several times", func() bool { return logC.count("join attempt failed") >= 3 })
	for name, m := range map[string]*peer.Membership{"a": a, "b": b} {
		if got := names(m.Members()); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s sees %v", name, got)
		}
	}
	if got := names(c.Members()); !slices.Equal(got, []string{"c"}) {
		t.Errorf("c sees %v", got)
	}
}

func TestLabelMismatchIsNeverAdmitted(t *testing.T) {
	cfgA := fastConfig(t, "a")
	cfgA.Label = "prod"
	a := start(t, cfgA)
	cfgB := fastConfig(t, "b")
	cfgB.Label = "staging"
	b := start(t, cfgB)
	cfgC := fastConfig(t, "c") // no label at all
	c := start(t, cfgC)

	for _, m := range []*peer.Membership{b, c} {
		if n, err := m.Join(testCtx(t), []string{a.GossipAddr()}); err == nil {
			t.Errorf("%v joined a labelled cluster (%d reached)", m, n)
		}
	}
	if n, err := a.Join(testCtx(t), []string{b.GossipAddr(), c.GossipAddr()}); err == nil {
		t.Errorf("a joined members of other labels (%d reached)", n)
	}
	for _, m := range []*peer.Membership{a, b, c} {
		if got := m.Members(); len(got) != 1 {
			t.Errorf("%v sees %v", m, names(got))
		}
	}

	cfgD := fastConfig(t, "d")
	cfgD.Label = "prod"
	cfgD.Seeds = []string{a.GossipAddr()}
	d := start(t, cfgD)
	waitFor(t, "same label to join", hasNames(d, "a", "d"))
}

func TestSecretKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	cfgA := fastConfig(t, "a")
	cfgA.SecretKey = key
	a := start(t, cfgA)

	cfgB := fastConfig(t, "b")
	cfgB.SecretKey = slices.Clone(key)
	cfgB.Seeds = []string{a.GossipAddr()}
	b := start(t, cfgB)
	waitFor(t, "b to join with the key", hasNames(a, "a", "b"))
	waitFor(t, "b to see a", hasNames(b, "a", "b"))

	for name, k := range map[string][]byte{"c": []byte("fedcba9876543210fedcba9876543210"), "d": nil} {
		cfg := fastConfig(t, name)
		cfg.SecretKey = k
		m := start(t, cfg)
		if n, err := m.Join(testCtx(t), []string{a.GossipAddr()}); err == nil {
			t.Errorf("%s joined with key %q (%d reached)", name, k, n)
		}
		if got := names(m.Members()); !slices.Equal(got, []string{name}) {
			t.Errorf("%s sees %v", name, got)
		}
	}
	if got := names(a.Members()); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("a sees %v", got)
	}
}

func TestAdvertisePortWithBindPortZero(t *testing.T) {
	cfg := fastConfig(t, "a")
	cfg.AdvertisePort = 7999
	m := start(t, cfg)
	if got, want := m.GossipAddr(), "127.0.0.1:7999"; got != want {
		t.Errorf("GossipAddr = %s, want %s", got, want)
	}
	if got := m.Members(); len(got) != 1 || got[0].GossipAddr != "127.0.0.1:7999" {
		t.Errorf("Members = %+v", got)
	}

	cfg = fastConfig(t, "b")
	cfg.AdvertiseAddr = "127.0.0.9"
	m = start(t, cfg)
	if host, port, _ := net.SplitHostPort(m.GossipAddr()); host != "127.0.0.9" || port == "0" {
		t.Errorf("GossipAddr = %s, want 127.0.0.9 and the bound port", m.GossipAddr())
	}
}

// StartLeaving marks the member as leaving for every peer while it stays live, with no
// event; the Leave that follows is reported as a leave.
func TestStartLeavingIsSeenBeforeTheLeave(t *testing.T) {
	recA := &recorder{}
	cfgA := fastConfig(t, "a")
	recA.install(&cfgA)
	a := start(t, cfgA)
	cfgB := fastConfig(t, "b")
	cfgB.Seeds = []string{a.GossipAddr()}
	b := start(t, cfgB)
	waitFor(t, "2 members", hasNames(a, "a", "b"))

	if err := b.StartLeaving(testCtx(t)); err != nil {
		t.Fatalf("StartLeaving: %v", err)
	}
	if err := b.StartLeaving(testCtx(t)); err != nil {
		t.Errorf("second StartLeaving: %v", err)
	}
	if !b.Self().Leaving {
		t.Error("b does not see itself leaving")
	}
	leavingSeen := func() bool {
		for _, m := range recA.lastChange() {
			if m.Name == "b" {
				return m.Leaving
			}
		}
		return false
	}
	waitFor(t, "a's OnChange to show b leaving", leavingSeen)
	if got := names(a.Members()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a dropped b before it left: %v", got)
	}
	if ks := recA.kinds("b"); !slices.Equal(ks, []peer.EventKind{peer.EventJoin}) {
		t.Fatalf("a got %v about b, want only its join", ks)
	}
	if err := b.Leave(testCtx(t)); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	waitFor(t, "a to report b's leave", func() bool {
		return slices.Equal(recA.kinds("b"), []peer.EventKind{peer.EventJoin, peer.EventLeave})
	})
}

// LocalState reaches the other member's MergeState in the join's state exchange.
func TestStateTravelsInFullExchanges(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	cfg := func(name string) peer.Config {
		c := fastConfig(t, name)
		c.LocalState = func(bool) []byte { return []byte("from " + name) }
		c.MergeState = func(buf []byte, _ bool) {
			mu.Lock()
			got[name] = append(got[name], string(buf))
			mu.Unlock()
		}
		return c
	}
	a := start(t, cfg("a"))
	cb := cfg("b")
	cb.Seeds = []string{a.GossipAddr()}
	start(t, cb)
	waitFor(t, "both to merge the other's state", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got["a"], "from b") && slices.Contains(got["b"], "from a")
	})
}
