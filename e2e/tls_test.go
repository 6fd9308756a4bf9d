package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/testpki"
)

// headless is the headless Service a chart install would name the pods under; a member's
// certificate carries <member>.<headless>, as a cert-manager Certificate for the wildcard
// of the headless Service satisfies too.
const headless = "corral-headless.default.svc.cluster.local"

// secret returns the files of a cert-manager Secret for member, signed by issuer, with
// bundle as ca.crt.
func secret(tb testing.TB, issuer *testpki.CA, member string, expired bool, bundle ...*testpki.CA) map[string][]byte {
	return testpki.Secret(tb, issuer, member+"."+headless, testpki.Spec{Expired: expired}, bundle...)
}

// tlsFlags are the corral serve flags that point at the files of s.
func tlsFlags(s *testpki.SecretDir) []string {
	return []string{"--tls-cert", s.Path("tls.crt"), "--tls-key", s.Path("tls.key"), "--tls-ca", s.Path("ca.crt")}
}

// clientTLS is a TLS client config presenting cert (none when nil) that trusts anything: it
// stands for whoever dials a peer port, and what is tested is what the node does.
func clientTLS(tb testing.TB, certPEM, keyPEM []byte) *tls.Config {
	tb.Helper()
	c := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			tb.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

// peerGet calls the peer protocol's Get on addr as a gRPC client would, written out by hand
// (HTTP/2, a length-prefixed protobuf GetRequest{group, key}), over TLS with tlsCfg or, when
// it is nil, in plaintext. It returns the grpc-status and the message, or the error of a
// connection that gave nothing.
func peerGet(addr string, tlsCfg *tls.Config, group, key string) (grpcStatus string, msg []byte, err error) {
	var protos http.Protocols
	tr := &http.Transport{TLSClientConfig: tlsCfg, Protocols: &protos}
	scheme := "https"
	if tlsCfg == nil {
		protos.SetUnencryptedHTTP2(true)
		scheme = "http"
	} else {
		protos.SetHTTP2(true)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	req := []byte{0x12, byte(len(group))}
	req = append(req, group...)
	req = append(req, 0x1a, byte(len(key)))
	req = append(req, key...)
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req)))
	body = append(body, req...)
	hr, err := http.NewRequest("POST", scheme+"://"+addr+"/corral.peer.v1.Peer/Get", bytes.NewReader(body))
	if err != nil {
		return "", nil, err
	}
	hr.Header.Set("Content-Type", "application/grpc")
	hr.Header.Set("TE", "trailers")
	resp, err := client.Do(hr)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	msg, err = io.ReadAll(resp.Body)
	if err != nil {
		return "", nil, err
	}
	grpcStatus = resp.Trailer.Get("Grpc-Status")
	if grpcStatus == "" {
		grpcStatus = resp.Header.Get("Grpc-Status") // a trailers-only answer
	}
	return grpcStatus, msg, nil
}

// served returns the certificate the node at addr presents in a new handshake.
func served(tb testing.TB, addr string, cfg *tls.Config) *x509.Certificate {
	tb.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		tb.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func leafOf(tb testing.TB, certPEM []byte) *x509.Certificate {
	tb.Helper()
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// metric returns the value of the series of name whose labels include labels (written as
// in the exposition, e.g. `reason="tls: expired"`), or -1.
func (p *proc) metric(tb testing.TB, name, labels string) float64 {
	tb.Helper()
	resp, err := http.Get(p.url("/metrics"))
	if err != nil {
		tb.Fatalf("/metrics of %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{[^}]*` + regexp.QuoteMeta(labels) + `[^}]*\} (\S+)$`)
	m := re.FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// A TLS node's peer port gives nothing to a plaintext client, nor to one without an
// acceptable certificate (none, another CA's, an expired one): each is refused in the
// handshake, and the node logs and counts an expired or wrongly signed certificate by reason.
// A member's certificate reads the value, so the client itself works. A member started with
// an expired certificate is refused the same way, and kept out of the ring.
func TestServeTLSRefusesStrangers(t *testing.T) {
	origin := newOrigin(t, 0)
	ca, other := testpki.NewCA(t, "corral-ca"), testpki.NewCA(t, "other-ca")
	var nodes []*proc
	for i := range 2 {
		name := fmt.Sprint("node-", i)
		var join []string
		if i > 0 {
			join = []string{nodes[0].Gossip}
		}
		d := testpki.NewSecretDir(t, secret(t, ca, name, false, ca))
		nodes = append(nodes, startNode(t, name, join, append(tlsFlags(d), "--origin", origin.template(), "--ttl", "1h")...))
	}
	for _, n := range nodes {
		waitFor(t, n.Name+" sees the cluster", 20*time.Second, func() bool { return len(n.cluster(t, "").Members) == 2 })
	}
	for _, n := range nodes { // every node serves k: one of them through the other's peer port
		if code, _, body := n.get(t, "/v1/groups/items/keys/k"); code != 200 || body != "value of k" {
			t.Fatalf("GET on %s: %d %q", n.Name, code, body)
		}
	}
	target := nodes[0]

	member, memberKey := ca.Issue(t, "node-1."+headless, testpki.Spec{Expired: false})
	if status, msg, err := peerGet(target.Peer, clientTLS(t, member, memberKey), "items", "k"); err != nil || status != "0" || !bytes.Contains(msg, []byte("value of k")) {
		t.Fatalf("a member's Get: status %q, %q, %v; the hand-made gRPC client does not work", status, msg, err)
	}

	otherCert, otherKey := other.Issue(t, "node-1."+headless, testpki.Spec{Expired: false})
	expiredCert, expiredKey := ca.Issue(t, "node-1."+headless, testpki.Spec{Expired: true})
	tests := []struct {
		name   string
		tls    *tls.Config
		reason string // counted and logged; "" = refused before any certificate is looked at
	}{
		{"plaintext", nil, ""},
		{"no certificate", clientTLS(t, nil, nil), "tls: no certificate"},
		{"wrongly signed", clientTLS(t, otherCert, otherKey), "tls: unknown authority"},
		{"expired", clientTLS(t, expiredCert, expiredKey), "tls: expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before float64
			if tt.reason != "" {
				before = target.metric(t, "corral_peer_requests_refused_total", `reason="`+tt.reason+`"`)
			}
			status, msg, err := peerGet(target.Peer, tt.tls, "items", "k")
			if err == nil {
				t.Fatalf("the node answered: grpc-status %q, %d bytes %q", status, len(msg), msg)
			}
			t.Logf("refused: %v", err)
			if tt.reason == "" {
				return
			}
			waitFor(t, "the refusal to be counted", 10*time.Second, func() bool {
				return target.metric(t, "corral_peer_requests_refused_total", `reason="`+tt.reason+`"`) == before+1
			})
			waitFor(t, "the refusal to be logged", 10*time.Second, func() bool {
				return strings.Contains(target.log.String(), `"msg":"corral: refused a peer connection: its certificate failed the check"`) &&
					strings.Contains(target.log.String(), `"reason":"`+tt.reason+`"`)
			})
		})
	}
	if !strings.Contains(target.log.String(), "certificate has expired") {
		t.Errorf("the log does not say the certificate expired:\n%s", target.log.String())
	}

	// A member with an expired certificate: a member of the gossip cluster, but no handshake
	// with it completes, so it owns nothing here.
	before := target.metric(t, "corral_peer_requests_refused_total", `reason="tls: expired"`)
	d := testpki.NewSecretDir(t, secret(t, ca, "node-2", true, ca))
	stale := startNode(t, "node-2", []string{target.Gossip}, append(tlsFlags(d), "--origin", origin.template())...)
	waitFor(t, "node-2 to be excluded for its TLS", 20*time.Second, func() bool {
		return target.metric(t, "corral_members_excluded", `reason="peer TLS failed"`) == 1
	})
	if got := target.metric(t, "corral_peer_requests_refused_total", `reason="tls: expired"`); got <= before {
		t.Errorf("node-2's expired certificate was not counted: %v, before %v", got, before)
	}
	for _, m := range target.cluster(t, "").Members {
		if m.Name == "node-2" && m.Share != 0 {
			t.Errorf("node-2 owns %.2f of the ring with an expired certificate", m.Share)
		}
	}
	if !strings.Contains(stale.log.String(), "this member's peer TLS certificate has expired") {
		t.Errorf("node-2 does not say its certificate expired:\n%s", stale.log.String())
	}
}

// loadStream is a bounded, steady stream of GETs spread over every key and node: workers
// each send one request at a time, a millisecond apart, until stopped or max requests.
type loadStream struct {
	ok, failed, viaPeer atomic.Int64
	mu                  sync.Mutex
	errs                []string // the first failures
	stop                chan struct{}
	wg                  sync.WaitGroup
}

func startLoad(t *testing.T, nodes func() []*proc, keys []string, workers int, max int64) *loadStream {
	l := &loadStream{stop: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	var sent atomic.Int64
	for w := range workers {
		l.wg.Go(func() {
			for i := w; sent.Add(1) <= max; i += workers {
				select {
				case <-l.stop:
					return
				case <-time.After(time.Millisecond):
				}
				ns := nodes()
				n, key := ns[i%len(ns)], keys[(i/len(ns))%len(keys)]
				resp, err := client.Get(n.url("/v1/groups/items/keys/" + key))
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || string(body) != "value of "+key {
						err = fmt.Errorf("%d %q (source %s)", resp.StatusCode, body, resp.Header.Get("X-Corral-Source"))
					} else if resp.Header.Get("X-Corral-Source") == "peer" {
						l.viaPeer.Add(1)
					}
				}
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.errs) < 10 {
						l.errs = append(l.errs, fmt.Sprintf("GET %s on %s: %v", key, n.Name, err))
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		})
	}
	t.Cleanup(l.end)
	return l
}

func (l *loadStream) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// The CA-signed certificates of running `corral serve` nodes are rotated under a steady
// stream of GETs across the nodes, with no failed request: a new certificate of the same CA,
// then a new CA (added to every bundle, then every certificate from it, then the old CA
// dropped). Each new handshake presents the newest files; a certificate of the dropped CA is
// refused afterwards; and a node that knows only the new CA joins the rings of all the others,
// handshakes both ways, while the stream goes on.
func TestServeTLSRotationUnderLoad(t *testing.T) {
	origin := newOrigin(t, 0)
	ca1, ca2 := testpki.NewCA(t, "ca-1"), testpki.NewCA(t, "ca-2")
	extra := []string{"--origin", origin.template(), "--ttl", "1h"}
	dirs := map[string]*testpki.SecretDir{}
	var mu sync.Mutex // guards nodes, which the load reads
	var nodes []*proc
	for i := range 3 {
		name := fmt.Sprint("node-", i)
		var join []string
		if i > 0 {
			join = []string{nodes[0].Gossip}
		}
		dirs[name] = testpki.NewSecretDir(t, secret(t, ca1, name, false, ca1))
		nodes = append(nodes, startNode(t, name, join, append(tlsFlags(dirs[name]), extra...)...))
	}
	for _, n := range nodes {
		waitFor(t, n.Name+" sees the cluster", 20*time.Second, func() bool { return len(n.cluster(t, "").Members) == 3 })
	}
	var keys []string
	for i := range 48 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	load := startLoad(t, func() []*proc { mu.Lock(); defer mu.Unlock(); return nodes }, keys, 4, 200_000)

	// step waits until the stream has sent requests through peers since the last step, then
	// checks that every node presents the certificate of its newest files.
	lastPeer := int64(0)
	step := func(name string, issuer *testpki.CA) {
		t.Helper()
		waitFor(t, "requests through peers "+name, 30*time.Second, func() bool { return load.viaPeer.Load() > lastPeer+100 })
		lastPeer = load.viaPeer.Load()
		knock, knockKey := issuer.Issue(t, "node-0."+headless, testpki.Spec{Expired: false})
		mu.Lock()
		ns := nodes
		mu.Unlock()
		for _, n := range ns {
			d, ok := dirs[n.Name]
			if !ok {
				continue
			}
			want, _ := os.ReadFile(d.Path("tls.crt"))
			if got := served(t, n.Peer, clientTLS(t, knock, knockKey)); !got.Equal(leafOf(t, want)) {
				t.Fatalf("%s: %s presents serial %v, not its newest certificate", name, n.Name, got.SerialNumber)
			}
		}
		t.Logf("%s: %d requests, %d through peers, %d failed", name, load.ok.Load(), load.viaPeer.Load(), load.failed.Load())
	}
	step("before the rotation", ca1)
	for _, s := range []struct {
		name   string
		issuer *testpki.CA
		bundle []*testpki.CA
	}{
		{"a new certificate of the same CA", ca1, []*testpki.CA{ca1}},
		{"both CAs trusted", ca1, []*testpki.CA{ca1, ca2}},
		{"certificates of the new CA", ca2, []*testpki.CA{ca1, ca2}},
		{"the old CA dropped", ca2, []*testpki.CA{ca2}},
	} {
		for name, d := range dirs {
			d.Swap(secret(t, s.issuer, name, false, s.bundle...))
		}
		step(s.name, s.issuer)
	}
	old, oldKey := ca1.Issue(t, "node-1."+headless, testpki.Spec{Expired: false})
	if _, _, err := peerGet(nodes[0].Peer, clientTLS(t, old, oldKey), "items", "k0"); err == nil {
		t.Error("a certificate of the dropped CA was accepted")
	}

	d := testpki.NewSecretDir(t, secret(t, ca2, "node-3", false, ca2))
	joiner := startNode(t, "node-3", []string{nodes[0].Gossip}, append(tlsFlags(d), extra...)...)
	mu.Lock()
	nodes = append(nodes, joiner)
	mu.Unlock()
	for _, n := range nodes {
		waitFor(t, n.Name+" to give node-3 a share of its ring", 30*time.Second, func() bool {
			v := n.cluster(t, "")
			for _, m := range v.Members {
				if m.Name == "node-3" && m.Share > 0 {
					return len(v.Members) == 4
				}
			}
			return false
		})
	}
	step("node-3 joined", ca2)
	load.end()
	t.Logf("%d requests, %d through peers, %d failed", load.ok.Load(), load.viaPeer.Load(), load.failed.Load())
	if f := load.failed.Load(); f != 0 {
		t.Fatalf("%d requests failed during the rotation: %v", f, load.errs)
	}
	if load.ok.Load()+load.failed.Load() >= 200_000 {
		t.Fatal("the stream reached its bound before the rotation was over")
	}
	var reloads int
	for _, n := range nodes {
		reloads += strings.Count(n.log.String(), "corral: peer TLS files reloaded")
	}
	if reloads == 0 {
		t.Error("no node logged a reload")
	}
}
