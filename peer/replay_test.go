package peer_test

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/peer"
)

// tap is memberlist's UDP and TCP transport, keeping a copy of every packet it sends: what an
// eavesdropper on the network would capture.
type tap struct {
	*memberlist.NetTransport
	mu   sync.Mutex // guards sent
	sent [][]byte
}

var _ memberlist.NodeAwareTransport = (*tap)(nil)

func newTap(tb testing.TB) *tap {
	tb.Helper()
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}})
	if err != nil {
		tb.Fatal(err)
	}
	return &tap{NetTransport: nt}
}

func (t *tap) record(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent = append(t.sent, slices.Clone(b))
}

func (t *tap) WriteTo(b []byte, addr string) (time.Time, error) {
	t.record(b)
	return t.NetTransport.WriteTo(b, addr)
}

func (t *tap) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.record(b)
	return t.NetTransport.WriteToAddress(b, a)
}

func (t *tap) captured() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.sent)
}

// replay sends every packet to addr from a socket of its own, as an attacker would.
func replay(tb testing.TB, packets [][]byte, addr string) {
	tb.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	for _, p := range packets {
		if _, err := conn.Write(p); err != nil {
			tb.Fatal(err)
		}
	}
}

// Encrypted gossip captured on the network and replayed later: an attacker without the key can
// make it say only what it said then. c leaves, b's gossip about that is captured, c comes
// back under its name at a new address (a StatefulSet pod with a new IP), and the capture is
// replayed to a, twice. memberlist's incarnation numbers protect the members that stayed up:
// b never leaves a's view, and no name appears that was not a member. They do not protect c:
// its new instance starts with a low incarnation, so the replayed leave, and then the old
// instance's alive messages, outrank it — a drops c and takes its old address for it, until
// failure detection declares that address dead and c reclaims its name (after
// DeadNodeReclaimTime, 30 s by default). So a replay costs a member that came back under its
// name an outage of its own, and peers try its old address meanwhile; with peer TLS nothing
// there is trusted (SECURITY.md).
func TestReplayedGossip(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	var rec recorder
	cfgA := fastConfig(t, "a")
	cfgA.SecretKey = key
	rec.install(&cfgA)
	a := start(t, cfgA)

	tp := newTap(t)
	cfgB := fastConfig(t, "b")
	cfgB.SecretKey, cfgB.Transport, cfgB.Seeds = key, tp, []string{a.GossipAddr()}
	start(t, cfgB)

	cfgC := fastConfig(t, "c")
	cfgC.SecretKey, cfgC.Seeds = key, []string{a.GossipAddr()}
	c, err := peer.New(cfgC)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three members", hasNames(a, "a", "b", "c"))
	if err := c.Leave(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitFor(t, "a to see c leave", hasNames(a, "a", "b"))
	waitFor(t, "b to pass c's leave on", func() bool { return len(tp.captured()) > 20 })
	capture := tp.captured()

	cfgC = fastConfig(t, "c") // another port: another address
	cfgC.SecretKey, cfgC.Seeds = key, []string{a.GossipAddr()}
	start(t, cfgC)
	waitFor(t, "c back", hasNames(a, "a", "b", "c"))
	gone := func() int { return count(rec.kinds("c"), peer.EventLeave) + count(rec.kinds("c"), peer.EventFail) }

	for i := range 2 {
		before := gone()
		replay(t, capture, a.GossipAddr())
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) || !hasNames(a, "a", "b", "c")() {
			if time.Now().After(deadline.Add(waitTimeout)) {
				t.Fatalf("replay %d: c is not back at a: events %v", i+1, rec.kinds("c"))
			}
			for _, m := range a.Members() {
				if m.Name != "a" && m.Name != "b" && m.Name != "c" {
					t.Fatalf("replay %d: a sees %s, never a member", i+1, m.Name)
				}
			}
			if got := names(a.Members()); !slices.Contains(got, "b") {
				t.Fatalf("replay %d: a dropped b, a member that stayed up: %v", i+1, got)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("replay %d: c dropped %d times, back", i+1, gone()-before)
		if i == 0 && gone() == before {
			t.Fatal("the replay changed nothing at all: was it taken in? (the test needs it to be)")
		}
	}
	if k := rec.kinds("b"); slices.Contains(k, peer.EventLeave) || slices.Contains(k, peer.EventFail) {
		t.Errorf("a saw b go: %v", k)
	}
}

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
