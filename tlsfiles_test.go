package corral_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/peertls"
	"github.com/corralcache/corral/internal/testpki"
)

// tlsSecret returns the files of a cert-manager Secret for member name, signed by ca, with
// caBundle as ca.crt.
func tlsSecret(tb testing.TB, ca *testpki.CA, name string, caBundle ...*testpki.CA) map[string][]byte {
	return testpki.Secret(tb, ca, pod(name), testpki.Spec{}, caBundle...)
}

func filesTLS(tb testing.TB, s *testpki.SecretDir, log *slog.Logger) *tls.Config {
	tb.Helper()
	c, err := corral.PeerTLSFromFiles(s.Path("tls.crt"), s.Path("tls.key"), s.Path("ca.crt"), log)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// knock opens a TLS connection to a node's peer port as a gRPC client would, presenting cert
// (none when nil) and trusting nothing (it only looks), and reports the certificate the node
// presented and whether the node accepted the connection: it answers with its HTTP/2 settings
// when it did, and with an alert when it refused the client's certificate.
func knock(tb testing.TB, addr string, certPEM, keyPEM []byte) (served *x509.Certificate, err error) {
	tb.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	served = conn.ConnectionState().PeerCertificates[0]
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err != nil {
		return served, err
	}
	var b [9]byte
	if _, err := conn.Read(b[:]); err != nil {
		return served, err
	}
	if b[3] != 0x04 { // a SETTINGS frame
		return served, fmt.Errorf("the node answered frame type %d, not SETTINGS", b[3])
	}
	return served, nil
}

// Members whose certificates come from files keep serving each other through a rotation of
// every member's certificate and of the CA (new CA added to the bundles, certificates of the
// new CA, old CA dropped): new handshakes use the new files at once, a certificate of the
// dropped CA is refused, and a member with only the new CA joins the rings of the others.
func TestPeerTLSFromFilesRotation(t *testing.T) {
	ca1, ca2 := testpki.NewCA(t, "ca1"), testpki.NewCA(t, "ca2")
	logs := &clustertest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	dirs := map[string]*testpki.SecretDir{}
	var nodes []*corral.Node
	reg := prometheus.NewRegistry()
	for i, name := range []string{"n0", "n1"} {
		dirs[name] = testpki.NewSecretDir(t, tlsSecret(t, ca1, name, ca1))
		cfg := testConfig(name)
		if i > 0 {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		cfg.PeerTLS = filesTLS(t, dirs[name], log.With("files", name))
		if i == 0 {
			cfg.Registerer = reg
		}
		nodes = append(nodes, newNode(t, cfg))
	}
	waitMembers(t, nodes, 2)
	waitRing(t, nodes, 2)
	gs := groups(t, nodes, "g", clustertest.NewSource(0).Load)
	getAll := func(step string) {
		t.Helper()
		for i := range 50 {
			k := fmt.Sprint("k", i)
			for _, g := range gs {
				if v, err := g.Get(context.Background(), k); err != nil || !strings.HasPrefix(v, k+"@") {
					t.Fatalf("%s: Get(%s) = %q, %v", step, k, v, err)
				}
			}
		}
	}
	getAll("before the rotation")
	asMember, asMemberKey := ca1.Issue(t, pod("n1"), testpki.Spec{}) // n1's name, as a knock from n1

	// 1. A new certificate of the same CA: the next handshake presents it.
	fresh := tlsSecret(t, ca1, "n0", ca1)
	dirs["n0"].Swap(fresh)
	served, err := knock(t, nodes[0].PeerAddr(), asMember, asMemberKey)
	if err != nil {
		t.Fatalf("a member's knock after the rotation: %v", err)
	}
	if want, _ := pem.Decode(fresh["tls.crt"]); string(served.Raw) != string(want.Bytes) {
		t.Fatalf("after the rotation n0 presents serial %v, not the new certificate", served.SerialNumber)
	}
	getAll("after a new certificate")

	// 2. The CA: both CAs in every bundle, then certificates of the new CA, then only it.
	for _, step := range []struct {
		name   string
		issuer *testpki.CA
		bundle []*testpki.CA
	}{
		{"both CAs trusted", ca1, []*testpki.CA{ca1, ca2}},
		{"certificates of the new CA", ca2, []*testpki.CA{ca1, ca2}},
		{"old CA dropped", ca2, []*testpki.CA{ca2}},
	} {
		for name, d := range dirs {
			d.Swap(tlsSecret(t, step.issuer, name, step.bundle...))
		}
		getAll(step.name)
	}
	before := clustertest.MetricWithLabel(t, reg, "corral_peer_requests_refused_total", peertls.RefusedAuthority)
	if _, err := knock(t, nodes[0].PeerAddr(), asMember, asMemberKey); err == nil {
		t.Fatal("a certificate of the dropped CA was accepted")
	}
	if got := clustertest.MetricWithLabel(t, reg, "corral_peer_requests_refused_total", peertls.RefusedAuthority); got != before+1 {
		t.Errorf("refusals for an unknown authority went from %v to %v, want one more", before, got)
	}
	newMember, newMemberKey := ca2.Issue(t, pod("n1"), testpki.Spec{})
	if _, err := knock(t, nodes[0].PeerAddr(), newMember, newMemberKey); err != nil {
		t.Fatalf("a certificate of the new CA: %v", err)
	}

	// A member that knows only the new CA completes mutual TLS with both, in both directions.
	d := testpki.NewSecretDir(t, tlsSecret(t, ca2, "n2", ca2))
	cfg := testConfig("n2", nodes[0].GossipAddr())
	cfg.PeerTLS = filesTLS(t, d, log.With("files", "n2"))
	nodes = append(nodes, newNode(t, cfg))
	waitMembers(t, nodes, 3)
	waitRing(t, nodes, 3)
	gs = append(gs, groups(t, nodes[2:], "g", clustertest.NewSource(0).Load)...)
	getAll("with a member of the new CA")
	// Files are read again at a handshake, so swaps with no handshake between them are one
	// reload; n1 had none until n2 joined.
	for _, name := range []string{"n0", "n1"} {
		if !strings.Contains(logs.String(), `msg="corral: peer TLS files reloaded" files=`+name) {
			t.Errorf("%s logged no reload:\n%s", name, logs.String())
		}
	}
}

// A reload that fails keeps the certificate loaded before, says so once, and the next good
// files are loaded.
func TestPeerTLSFromFilesKeepsTheOldOnABadReload(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	logs := &clustertest.SyncBuffer{}
	d := testpki.NewSecretDir(t, tlsSecret(t, ca, "n0", ca))
	cfg := testConfig("n0")
	cfg.PeerTLS = filesTLS(t, d, slog.New(slog.NewTextHandler(logs, nil)))
	n := newNode(t, cfg)
	asMember, asMemberKey := ca.Issue(t, pod("n0"), testpki.Spec{})
	first, err := knock(t, n.PeerAddr(), asMember, asMemberKey)
	if err != nil {
		t.Fatal(err)
	}

	bad := tlsSecret(t, ca, "n0", ca)
	_, otherKey := ca.Issue(t, pod("n0"), testpki.Spec{})
	bad["tls.key"] = otherKey // does not match tls.crt
	d.Swap(bad)
	for range 3 {
		served, err := knock(t, n.PeerAddr(), asMember, asMemberKey)
		if err != nil {
			t.Fatalf("a knock while the files are bad: %v", err)
		}
		if !served.Equal(first) {
			t.Fatal("a bad reload changed the certificate")
		}
	}
	if c := strings.Count(logs.String(), "could not be reloaded"); c != 1 {
		t.Errorf("the bad files were reported %d times, want once:\n%s", c, logs.String())
	}

	good := tlsSecret(t, ca, "n0", ca)
	d.Swap(good)
	served, err := knock(t, n.PeerAddr(), asMember, asMemberKey)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := pem.Decode(good["tls.crt"]); string(served.Raw) != string(want.Bytes) {
		t.Error("good files after bad ones were not loaded")
	}
}

// A peer port with TLS gives nothing to a client without an acceptable certificate: each is
// refused in the handshake, logged with its reason and address, and counted by reason.
func TestPeerTLSRefusals(t *testing.T) {
	ca, other := testpki.NewCA(t, "ca"), testpki.NewCA(t, "other")
	logs := &clustertest.SyncBuffer{}
	reg := prometheus.NewRegistry()
	d := testpki.NewSecretDir(t, tlsSecret(t, ca, "n0", ca))
	cfg := testConfig("n0")
	cfg.PeerTLS, cfg.Registerer = filesTLS(t, d, nil), reg
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	n := newNode(t, cfg)

	tests := []struct {
		name, reason string
		cert         func() ([]byte, []byte)
	}{
		{"no certificate", peertls.RefusedNoCertificate, func() ([]byte, []byte) { return nil, nil }},
		{"another CA", peertls.RefusedAuthority, func() ([]byte, []byte) { return other.Issue(t, pod("n0"), testpki.Spec{}) }},
		{"expired", peertls.RefusedExpired, func() ([]byte, []byte) { return ca.Issue(t, pod("n0"), testpki.Spec{Expired: true}) }},
		{"names no member", peertls.RefusedNotAMember, func() ([]byte, []byte) { return ca.Issue(t, "intruder.example.com", testpki.Spec{}) }},
		{"not for client auth", peertls.RefusedBadCert, func() ([]byte, []byte) { return ca.Issue(t, pod("n0"), testpki.Spec{ServerOnly: true}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := clustertest.MetricWithLabel(t, reg, "corral_peer_requests_refused_total", tt.reason)
			crt, key := tt.cert()
			if _, err := knock(t, n.PeerAddr(), crt, key); err == nil {
				t.Fatal("the node accepted the connection")
			}
			clustertest.Eventually(t, "the refusal to be counted", func() bool {
				return clustertest.MetricWithLabel(t, reg, "corral_peer_requests_refused_total", tt.reason) == before+1
			})
			if !strings.Contains(logs.String(), `reason="`+tt.reason+`"`) {
				t.Errorf("no log line with reason %q:\n%s", tt.reason, logs.String())
			}
		})
	}
	if !strings.Contains(logs.String(), "from=127.0.0.1:") {
		t.Errorf("the refusals do not name the address they came from:\n%s", logs.String())
	}
	good, goodKey := ca.Issue(t, pod("n0"), testpki.Spec{})
	if _, err := knock(t, n.PeerAddr(), good, goodKey); err != nil {
		t.Fatalf("a member's certificate was refused: %v", err)
	}
}

func TestPeerTLSFromFilesErrors(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	good := tlsSecret(t, ca, "n0", ca)
	_, otherKey := ca.Issue(t, pod("n0"), testpki.Spec{})
	tests := []struct {
		name  string
		edit  func(map[string][]byte)
		want  string
		paths func(*testpki.SecretDir) [3]string
	}{
		{"missing file", nil, "no such file", func(d *testpki.SecretDir) [3]string {
			return [3]string{d.Path("tls.crt"), d.Path("nope.key"), d.Path("ca.crt")}
		}},
		{"key of another certificate", func(f map[string][]byte) { f["tls.key"] = otherKey }, "private key does not match", nil},
		{"no CA", func(f map[string][]byte) { f["ca.crt"] = []byte("not PEM") }, "holds no PEM certificate", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range good {
				files[k] = v
			}
			if tt.edit != nil {
				tt.edit(files)
			}
			d := testpki.NewSecretDir(t, files)
			p := [3]string{d.Path("tls.crt"), d.Path("tls.key"), d.Path("ca.crt")}
			if tt.paths != nil {
				p = tt.paths(d)
			}
			_, err := corral.PeerTLSFromFiles(p[0], p[1], p[2], nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PeerTLSFromFiles: %v, want an error about %q", err, tt.want)
			}
		})
	}
}

// New refuses a PeerTLS that could not check peers.
func TestPeerTLSConfigErrors(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	tests := []struct {
		name string
		edit func(*tls.Config)
		want string
	}{
		{"no certificate", func(c *tls.Config) { c.Certificates = nil }, "no certificate"},
		{"no CA", func(c *tls.Config) { c.RootCAs, c.ClientCAs = nil, nil }, "no CA"},
		{"GetConfigForClient", func(c *tls.Config) {
			c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return nil, nil }
		}, "GetConfigForClient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("n0")
			cfg.PeerTLS = ca.TLSConfig(t, pod("n0"))
			tt.edit(cfg.PeerTLS)
			n, err := corral.New(cfg)
			if err == nil {
				n.Close(context.Background())
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want %q", err, tt.want)
			}
		})
	}
}
