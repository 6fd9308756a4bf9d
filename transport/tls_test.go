package transport

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/corralcache/corral/transport/peerpb"
)

// testCA is a self-signed certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(tb testing.TB) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "corral test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a certificate for a member, valid for serving on and
// connecting from 127.0.0.1.
func (ca *testCA) issue(tb testing.TB, name string) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mutualTLS returns a Server's and a Client's config for mutual TLS under ca.
func (ca *testCA) mutualTLS(tb testing.TB) (server, client *tls.Config) {
	server = &tls.Config{
		Certificates: []tls.Certificate{ca.issue(tb, "server")},
		ClientCAs:    ca.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
	return server, &tls.Config{Certificates: []tls.Certificate{ca.issue(tb, "client")}, RootCAs: ca.pool}
}

func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	serverTLS, _ := ca.mutualTLS(t)
	serverTLS.MinVersion = tls.VersionTLS13
	h := newFakeHandler()
	addr, _ := serve(t, h, ServerConfig{TLS: serverTLS})
	ctx := context.Background()
	req := &peerpb.GetRequest{Group: "g", Key: []byte("k")}

	t.Run("both sides authenticated", func(t *testing.T) {
		c := newClient(t, ClientConfig{TLS: &tls.Config{
			Certificates: []tls.Certificate{ca.issue(t, "client")},
			RootCAs:      ca.pool,
			MinVersion:   tls.VersionTLS13,
		}})
		resp, err := c.Get(ctx, addr, req)
		if err != nil || string(resp.GetEntry().GetValue()) != "v:k" {
			t.Fatalf("Get over mTLS = %v, %v", resp, err)
		}
	})

	tests := []struct {
		name string
		cfg  ClientConfig
	}{
		{"client without certificate", ClientConfig{TLS: &tls.Config{RootCAs: ca.pool}}},
		{"client certificate from another CA", ClientConfig{TLS: &tls.Config{
			Certificates: []tls.Certificate{newTestCA(t).issue(t, "intruder")},
			RootCAs:      ca.pool,
		}}},
		{"client does not trust the server", ClientConfig{TLS: &tls.Config{
			Certificates: []tls.Certificate{ca.issue(t, "client")},
			RootCAs:      newTestCA(t).pool,
		}}},
		{"plaintext client", ClientConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.CallTimeout = 2 * time.Second
			c := newClient(t, tt.cfg)
			_, err := c.Get(ctx, addr, req)
			if err == nil {
				t.Fatal("Get succeeded")
			}
			t.Log(err)
		})
	}

	t.Run("TLS client against a plaintext server", func(t *testing.T) {
		plain, _ := serve(t, h, ServerConfig{})
		c := newClient(t, ClientConfig{CallTimeout: 2 * time.Second, TLS: &tls.Config{
			Certificates: []tls.Certificate{ca.issue(t, "client")},
			RootCAs:      ca.pool,
		}})
		if _, err := c.Get(ctx, plain, req); err == nil {
			t.Fatal("Get succeeded")
		}
	})
}

// With TLS, Gets travel on a framed connection too: its preface in clear, then a TLS
// handshake, then frames that carry no value in clear; the unary calls go on gRPC's TLS
// connection to the same port. A TLS Server that does not speak framing (an older corral)
// gets the Gets on its gRPC stream; a framed connection that stops after its preface is
// closed at the handshake timeout and counted.
func TestTLSGetsTravelFramed(t *testing.T) {
	serverTLS, clientTLS := newTestCA(t).mutualTLS(t)
	h := newHitHandler()
	addr, _ := serve(t, h, ServerConfig{TLS: serverTLS})
	ctx := context.Background()
	const value = "a value only TLS may carry"

	var d tapDialer
	c := newClient(t, ClientConfig{TLS: clientTLS, Dialer: d.dial})
	if _, err := c.Set(ctx, addr, &peerpb.SetRequest{Entry: &peerpb.Entry{Group: "g", Key: []byte("k"), Value: []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		resp, err := getKey(c, ctx, addr, "k")
		if err != nil || string(resp.GetEntry().GetValue()) != value {
			t.Fatalf("Get %d = %v, %v", i, resp, err)
		}
	}
	if s := streamOf(t, c, addr); s.framed == nil {
		t.Fatal("the Gets went on the gRPC stream")
	}
	sent := d.sent()
	if len(sent) != 2 {
		t.Fatalf("%d connections made, want 2 (gRPC for Set, framed for the Gets)", len(sent))
	}
	var framedConns int
	for _, b := range sent {
		if bytes.HasPrefix(b, []byte(framePreface)) {
			framedConns++
			b = b[len(framePreface):]
		}
		if len(b) == 0 || b[0] != 0x16 { // a TLS handshake record
			t.Fatalf("a connection's bytes after any preface start with %#x, want a TLS handshake", b[:min(len(b), 8)])
		}
		if bytes.Contains(b, []byte(value)) {
			t.Fatal("a connection carried the value in clear")
		}
	}
	if framedConns != 1 {
		t.Fatalf("%d framed connections, want 1", framedConns)
	}

	t.Run("a TLS server without framing", func(t *testing.T) {
		old := serveUnframedWith(t, h, ServerConfig{TLS: serverTLS})
		c := newClient(t, ClientConfig{TLS: clientTLS})
		for i := range 3 {
			if resp, err := getKey(c, ctx, old, "k"); err != nil || string(resp.GetEntry().GetValue()) != value {
				t.Fatalf("Get %d = %v, %v", i, resp, err)
			}
		}
		if s := streamOf(t, c, old); s.framed != nil {
			t.Fatal("a framed stream to a server without framing")
		}
	})

	t.Run("a preface and no handshake", func(t *testing.T) {
		// A server of its own: its short handshake timeout is for this connection only.
		var limits limitCounter
		short, _ := serve(t, h, ServerConfig{TLS: serverTLS, HandshakeTimeout: 300 * time.Millisecond, OnLimit: limits.hit})
		conn := rawFramed(t, short)
		closedByServer(t, conn)
		for deadline := time.Now().Add(10 * time.Second); limits.count("peer_handshake") == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if got := limits.count("peer_handshake"); got != 1 {
			t.Fatalf("peer_handshake counted %d times, want 1", got)
		}
	})
}
