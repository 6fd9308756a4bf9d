package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/httpapi"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
)

// --resp-loops and --http-loops: a number given is taken as it is; the default is one loop per 2 CPUs, at
// least one, and none when the node traces (a GET a loop answers records no span).
func TestRESPLoops(t *testing.T) {
	for _, tt := range []struct {
		flag, procs int
		tracing     bool
		want        int
	}{
		{-1, 1, false, 1}, {-1, 2, false, 1}, {-1, 3, false, 1}, {-1, 8, false, 4},
		{-1, 8, true, 0}, {0, 8, false, 0}, {3, 2, false, 3}, {2, 8, true, 2},
	} {
		if got := eventLoops(tt.flag, tt.procs, tt.tracing); got != tt.want {
			t.Errorf("eventLoops(%d, %d procs, tracing %v) = %d, want %d", tt.flag, tt.procs, tt.tracing, got, tt.want)
		}
	}
	_, c := serveFlags(io.Discard)
	if c.respLoops != -1 || c.httpLoops != -1 {
		t.Fatalf("--resp-loops and --http-loops default to %d and %d, want -1", c.respLoops, c.httpLoops)
	}
}

func TestAPITokenFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(c *serveConfig)
	}{
		{"reads without a file", func(c *serveConfig) { c.apiTokenReads = true }},
		{"resp port out of range", func(c *serveConfig) { c.respPort = 70000 }},
		{"resp loops below -1", func(c *serveConfig) { c.respLoops = -2 }},
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

// A value of exactly --max-value-bytes is stored, over HTTP and over the Redis protocol,
// with a Content-Type too; one byte more is refused by both.
func TestValueLimitIsTheUsersBytes(t *testing.T) {
	const limit = 1 << 10
	td := startTestDaemon(t, func(c *serveConfig) { c.maxValueBytes = limit })
	exact, over := strings.Repeat("v", limit), strings.Repeat("v", limit+1)
	if resp, body := td.do(t, "PUT", "/v1/groups/g/keys/exact", exact, "Content-Type", "text/plain; charset=utf-8"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT of exactly --max-value-bytes: %d %s", resp.StatusCode, body)
	}
	if resp, body := td.do(t, "GET", "/v1/groups/g/keys/exact", ""); resp.StatusCode != http.StatusOK || body != exact {
		t.Fatalf("GET = %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := td.do(t, "PUT", "/v1/groups/g/keys/over", over); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("PUT of one byte more: %d", resp.StatusCode)
	}
	if resp, _ := td.do(t, "PUT", "/v1/groups/g/keys/t", "v", "Content-Type", strings.Repeat("t", objects.MaxTypeBytes+1)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT with a Content-Type over its bound: %d", resp.StatusCode)
	}
	rc := servetest.DialRESP(t, td.resp)
	if got := rc.Do(t, "SET", "exact", exact); got != "+OK\r\n" {
		t.Fatalf("SET of exactly --max-value-bytes = %q", got)
	}
	if got := rc.Do(t, "GET", "exact"); got != servetest.Bulk(exact) {
		t.Fatalf("GET = %d bytes", len(got))
	}
	if got := rc.Do(t, "SET", "over", over); !strings.Contains(got, "exceeds the value limit of 1024 bytes") {
		t.Fatalf("SET of one byte more = %q", got)
	}
}
