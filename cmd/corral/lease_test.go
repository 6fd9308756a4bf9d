package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/httpapi"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
)

// testDaemon is a one-node `corral serve` in this process, with the Redis protocol on.
type testDaemon struct {
	d    *daemon
	http string // "127.0.0.1:port"
	resp string
}

func startTestDaemon(tb testing.TB, mod func(*serveConfig)) *testDaemon {
	tb.Helper()
	fs, c := serveFlags(io.Discard)
	if err := fs.Parse([]string{"--bind", "127.0.0.1", "--gossip-port", "0", "--peer-port", "0", "--drain", "0"}); err != nil {
		tb.Fatal(err)
	}
	c.name = "test"
	if mod != nil {
		mod(c)
	}
	if err := c.validate(); err != nil {
		tb.Fatal(err)
	}
	d, err := startDaemon(c, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.startRESP(rl); err != nil {
		tb.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serveOn(ctx, lis) }()
	tb.Cleanup(func() {
		// A connection the client dialed but never used would hold Shutdown for 5 s.
		http.DefaultClient.CloseIdleConnections()
		stop()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return &testDaemon{d: d, http: lis.Addr().String(), resp: rl.Addr().String()}
}

// do sends an HTTP request and returns the response with its body read.
func (td *testDaemon) do(tb testing.TB, method, path, body string, header ...string) (*http.Response, string) {
	tb.Helper()
	return servetest.Do(tb, td.http, method, path, body, header...)
}

func writeTokenFile(tb testing.TB, token string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestAPITokenFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(c *serveConfig)
	}{
		{"reads without a file", func(c *serveConfig) { c.apiTokenReads = true }},
		{"resp port out of range", func(c *serveConfig) { c.respPort = 70000 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, c := serveFlags(io.Discard)
			tt.mod(c)
			if err := c.validate(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := loadToken(writeTokenFile(t, "  ")); err == nil {
		t.Fatal("an empty token file was accepted")
	}
	if _, err := loadToken(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}

// With an API token, a lease needs it: without it, ?lease is a plain read and FILLGET is
// refused, and neither holds the key up for a caller with the token. A lease past
// --max-lease is refused; a client's leases are bounded by --max-client-leases (429, -BUSY)
// while another client is still granted one; a group without the token is not created by
// a read.
func TestLeaseBounds(t *testing.T) {
	file := writeTokenFile(t, "s3cret")
	td := startTestDaemon(t, func(c *serveConfig) {
		c.apiTokenFile = file
		c.leases.MaxLease = 10 * time.Second
		c.leases.MaxClientLeases = 2
		c.groups = listFlag{"pages"}
	})
	auth := []string{"Authorization", "Bearer s3cret"}

	// Without the token: a plain read, no lease.
	resp, _ := td.do(t, "GET", "/v1/groups/pages/keys/k?lease=5s", "")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(httpapi.LeaseTokenHeader) != "" || resp.Header.Get(httpapi.LeaseStateHeader) != "" {
		t.Fatalf("?lease without the token: %d %v, want a plain read (404)", resp.StatusCode, resp.Header)
	}
	rc := servetest.DialRESP(t, td.resp)
	if got := rc.Do(t, "FILLGET", "k", "5000"); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("FILLGET without AUTH = %q", got)
	}
	// The caller with the token is granted the lease: nobody took it.
	resp, _ = td.do(t, "GET", "/v1/groups/pages/keys/k?lease=5s", "", auth...)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get(httpapi.LeaseTokenHeader) == "" {
		t.Fatalf("?lease with the token: %d %v", resp.StatusCode, resp.Header)
	}
	if got := rc.Do(t, "AUTH", "s3cret"); got != "+OK\r\n" {
		t.Fatalf("AUTH = %q", got)
	}
	fill := rc.Do(t, "FILLGET", "k", "5000")
	if !strings.HasPrefix(fill, "*2\r\n+FILL\r\n") {
		t.Fatalf("FILLGET after AUTH = %q", fill)
	}
	token := strings.TrimSuffix(fill[strings.LastIndex(fill[:len(fill)-2], "\n")+1:], "\r\n")

	// Past --max-lease.
	if resp, body := td.do(t, "GET", "/v1/groups/pages/keys/long?lease=11s", "", auth...); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "--max-lease") {
		t.Fatalf("?lease=11s: %d %s", resp.StatusCode, body)
	}
	if got := rc.Do(t, "FILLGET", "long", "3600000"); !strings.HasPrefix(got, "-ERR ") || !strings.Contains(got, "--max-lease") {
		t.Fatalf("FILLGET long 3600000 = %q", got)
	}

	// 127.0.0.1 holds two leases: pages/k over HTTP, resp/k over RESP.
	if got := td.d.leases.Held("127.0.0.1"); got != 2 {
		t.Fatalf("127.0.0.1 holds %d leases, want 2", got)
	}
	if got := rc.Do(t, "FILLGET", "third", "5000"); !strings.HasPrefix(got, "-BUSY ") || !strings.Contains(got, "--max-client-leases") {
		t.Fatalf("a third lease over RESP = %q", got)
	}
	if resp, body := td.do(t, "GET", "/v1/groups/pages/keys/third?lease=5s", "", auth...); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "--max-client-leases") {
		t.Fatalf("a third lease over HTTP: %d %s", resp.StatusCode, body)
	}
	if got := td.limitHits("client_leases"); got != 2 {
		t.Fatalf("client_leases hits = %v, want 2", got)
	}
	// Another client is granted one.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	defer other.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+td.http+"/v1/groups/pages/keys/third?lease=5s", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	r2, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusAccepted {
		t.Fatalf("another client's lease: %d", r2.StatusCode)
	}
	// A FILLSET through this node gives the client's slot back.
	if got := rc.Do(t, "FILLSET", "k", "v", "60000", token); got != ":1\r\n" {
		t.Fatalf("FILLSET = %q", got)
	}
	if got := rc.Do(t, "FILLGET", "third", "5000"); !strings.HasPrefix(got, "*2\r\n+FILL\r\n") {
		t.Fatalf("a lease after a FILLSET gave a slot back = %q", got)
	}

	// Without the token, a read never creates a group; with it, it does.
	if resp, body := td.do(t, "GET", "/v1/groups/junk/keys/k", ""); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no group") {
		t.Fatalf("a read of a new group without the token: %d %s", resp.StatusCode, body)
	}
	if _, ok := td.d.groups.Existing("junk"); ok {
		t.Fatal("a read without the token created a group")
	}
	if resp, _ := td.do(t, "GET", "/v1/groups/junk/keys/k", "", auth...); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a read of a new group with the token: %d", resp.StatusCode)
	}
	if _, ok := td.d.groups.Existing("junk"); !ok {
		t.Fatal("a read with the token did not create the group")
	}
}
