package corral_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/testpki"
	"github.com/corralcache/corral/internal/view"
)

var gossipKey = []byte("0123456789abcdef")

func tlsNode(tb testing.TB, name string, peerTLS *tls.Config, reg prometheus.Registerer, seeds ...string) *corral.Node {
	cfg := testConfig(name, seeds...)
	cfg.SecretKey, cfg.PeerTLS, cfg.Registerer = gossipKey, peerTLS, reg
	return newNode(tb, cfg)
}

func pod(name string) string { return name + ".corral-headless.default.svc.cluster.local" }

// waitRing waits until every node routes by a ring of exactly want members.
func waitRing(tb testing.TB, nodes []*corral.Node, want int) {
	tb.Helper()
	clustertest.Eventually(tb, fmt.Sprintf("rings of %d members", want), func() bool {
		for _, n := range nodes {
			if len(n.Shares()) != want || n.Epoch() != nodes[0].Epoch() {
				return false
			}
		}
		return true
	})
}

// With mutual TLS, members whose certificates name them by pod DNS name (no IP SAN) form one
// cluster and serve each other.
func TestPeerTLSNamesMembers(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	a := tlsNode(t, "n0", ca.TLSConfig(t, pod("n0")), nil)
	b := tlsNode(t, "n1", ca.TLSConfig(t, pod("n1")), nil, a.GossipAddr())
	waitMembers(t, []*corral.Node{a, b}, 2)
	waitRing(t, []*corral.Node{a, b}, 2)
	gs := groups(t, []*corral.Node{a, b}, "g", clustertest.NewSource(0).Load)
	for _, k := range []string{keyOwnedBy(t, a, "a"), keyOwnedBy(t, b, "b")} {
		for _, g := range gs {
			if v, err := g.Get(context.Background(), k); err != nil || v != k+"@0" {
				t.Fatalf("Get(%s) over TLS: %q, %v", k, v, err)
			}
		}
	}
}

// A member that does not complete mutual TLS with the others — it runs without TLS, its
// certificate is of another CA, or it names another member — is never an owner: the others
// keep it out of their rings (corral_members_excluded says why) and serve every key.
func TestPeerTLSMixedConfigurationsFailSafe(t *testing.T) {
	tests := []struct {
		name, reason string
		tls          func(ca *testpki.CA) *tls.Config
	}{
		{"no TLS", view.ExcludedPeerTLS, func(*testpki.CA) *tls.Config { return nil }},
		{"another CA", view.ExcludedTLSFailed, func(*testpki.CA) *tls.Config { return testpki.NewCA(t, "other").TLSConfig(t, pod("n2")) }},
		{"names no member", view.ExcludedTLSFailed, func(ca *testpki.CA) *tls.Config { return ca.TLSConfig(t, "intruder.example.com") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := testpki.NewCA(t, "ca")
			reg := prometheus.NewRegistry()
			a := tlsNode(t, "n0", ca.TLSConfig(t, pod("n0")), reg)
			b := tlsNode(t, "n1", ca.TLSConfig(t, pod("n1")), nil, a.GossipAddr())
			bad := tlsNode(t, "n2", tt.tls(ca), nil, a.GossipAddr())
			good := []*corral.Node{a, b}
			waitMembers(t, append(good, bad), 3) // a member of the gossip cluster …
			waitRing(t, good, 2)                 // … but not of the ring
			clustertest.Eventually(t, "the exclusion to be counted", func() bool {
				return clustertest.MetricWithLabel(t, reg, "corral_members_excluded", tt.reason) == 1
			})
			gs := groups(t, good, "g", clustertest.NewSource(0).Load)
			groups(t, []*corral.Node{bad}, "g", clustertest.NewSource(0).Load)
			for i := range 200 {
				k := fmt.Sprint("k", i)
				if o := a.Owner(k).Name; o == "n2" {
					t.Fatalf("%s is owned by the member that does not complete mutual TLS", k)
				}
				for _, g := range gs {
					if _, err := g.Get(context.Background(), k); err != nil {
						t.Fatalf("Get(%s): %v", k, err)
					}
				}
			}
		})
	}
}
