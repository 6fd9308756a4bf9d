package corral

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(tb testing.TB, name string) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// config returns a PeerTLS whose certificate carries dnsName only (no IP SAN): a pod's
// certificate names it, not its address.
func (ca *testCA) config(tb testing.TB, dnsName string) *tls.Config {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "corral"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{dnsName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      ca.pool, ClientCAs: ca.pool, MinVersion: tls.VersionTLS13,
	}
}

var gossipKey = []byte("0123456789abcdef")

func tlsNode(tb testing.TB, name string, peerTLS *tls.Config, reg prometheus.Registerer, seeds ...string) *Node {
	cfg := testConfig(name, seeds...)
	cfg.SecretKey, cfg.PeerTLS, cfg.Registerer = gossipKey, peerTLS, reg
	return newNode(tb, cfg)
}

func pod(name string) string { return name + ".corral-headless.default.svc.cluster.local" }

// waitRing waits until every node routes by a ring of exactly want members.
func waitRing(tb testing.TB, nodes []*Node, want int) {
	tb.Helper()
	eventually(tb, fmt.Sprintf("rings of %d members", want), func() bool {
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
	ca := newTestCA(t, "ca")
	a := tlsNode(t, "n0", ca.config(t, pod("n0")), nil)
	b := tlsNode(t, "n1", ca.config(t, pod("n1")), nil, a.GossipAddr())
	waitMembers(t, []*Node{a, b}, 2)
	waitRing(t, []*Node{a, b}, 2)
	gs := groups(t, []*Node{a, b}, "g", newSource(0).load)
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
		tls          func(ca *testCA) *tls.Config
	}{
		{"no TLS", excludedPeerTLS, func(*testCA) *tls.Config { return nil }},
		{"another CA", excludedPeerTLSFailed, func(*testCA) *tls.Config { return newTestCA(t, "other").config(t, pod("n2")) }},
		{"names no member", excludedPeerTLSFailed, func(ca *testCA) *tls.Config { return ca.config(t, "intruder.example.com") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := newTestCA(t, "ca")
			reg := prometheus.NewRegistry()
			a := tlsNode(t, "n0", ca.config(t, pod("n0")), reg)
			b := tlsNode(t, "n1", ca.config(t, pod("n1")), nil, a.GossipAddr())
			bad := tlsNode(t, "n2", tt.tls(ca), nil, a.GossipAddr())
			good := []*Node{a, b}
			waitMembers(t, append(good, bad), 3) // a member of the gossip cluster …
			waitRing(t, good, 2)                 // … but not of the ring
			eventually(t, "the exclusion to be counted", func() bool {
				return metricWithLabel(t, reg, "corral_members_excluded", tt.reason) == 1
			})
			gs := groups(t, good, "g", newSource(0).load)
			groups(t, []*Node{bad}, "g", newSource(0).load)
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

// metricWithLabel returns the value of the series of name whose one label has value.
func metricWithLabel(tb testing.TB, reg *prometheus.Registry, name, value string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
