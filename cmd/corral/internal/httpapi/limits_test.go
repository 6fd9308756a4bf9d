package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/clustertest"
)

func (td *testServer) mustGet(tb testing.TB, what string) {
	tb.Helper()
	if resp, body := td.do(tb, "GET", "/v1/groups/g/keys/ok", ""); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		tb.Fatalf("%s: an ordinary GET got %d %s", what, resp.StatusCode, body)
	}
}

// Each limit of the HTTP front answers with its status, counts, and leaves the node serving
// everyone else.
func TestHTTPLimits(t *testing.T) {
	td := startTestServer(t, func(c *apiSetup) {
		c.MaxValueBytes = 1 << 10
		c.MaxGroups = 3 // g, second and third hold values
		c.Limits.MaxHeaderBytes = 2 << 10
		c.Limits.MaxClientRequests = 2
		// Long enough for an ordinary request on a busy machine: it runs from its first byte.
		c.Limits.ReadHeaderTimeout = time.Second
	})
	if resp, _ := td.do(t, "PUT", "/v1/groups/g/keys/ok", "v"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}

	t.Run("header", func(t *testing.T) {
		resp, body := td.do(t, "GET", "/v1/groups/g/keys/ok", "", "X-Big", strings.Repeat("h", 3<<10))
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(body, "--max-header-bytes") {
			t.Fatalf("big header: %d %s", resp.StatusCode, body)
		}
		if got := td.limitHits("header"); got != 1 {
			t.Fatalf("header hits = %v", got)
		}
		td.mustGet(t, "after a big header")
	})

	t.Run("body", func(t *testing.T) {
		resp, body := td.do(t, "PUT", "/v1/groups/g/keys/big", strings.Repeat("b", 2<<10))
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("big body: %d %s", resp.StatusCode, body)
		}
		if got := td.limitHits("body"); got != 1 {
			t.Fatalf("body hits = %v", got)
		}
		td.mustGet(t, "after a big body")
	})

	t.Run("groups", func(t *testing.T) {
		// g holds a value. A group a read made, which holds nothing, keeps no other group out.
		if resp, _ := td.do(t, "PUT", "/v1/groups/second/keys/k", "v"); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("second group: %d", resp.StatusCode)
		}
		if resp, _ := td.do(t, "GET", "/v1/groups/empty/keys/k", ""); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("a read of a new group: %d", resp.StatusCode)
		}
		if resp, body := td.do(t, "PUT", "/v1/groups/third/keys/k", "v"); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("third group that holds a value, beside one that holds none: %d %s", resp.StatusCode, body)
		}
		resp, body := td.do(t, "PUT", "/v1/groups/fourth/keys/k", "v")
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "--max-groups") {
			t.Fatalf("fourth group: %d %s", resp.StatusCode, body)
		}
		if got := td.limitHits("groups"); got != 1 {
			t.Fatalf("groups hits = %v", got)
		}
		td.mustGet(t, "after a group too many")
	})

	t.Run("client_requests", func(t *testing.T) {
		// Two requests held open from 127.0.0.1 (lease waits), then a third from it: 429; a
		// client at another address is served meanwhile.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		td.do(t, "GET", "/v1/groups/g/keys/held?lease=10s", "") // this caller holds the lease
		held := make(chan int, 2)
		for range 2 {
			go func() {
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+td.http+"/v1/groups/g/keys/held?lease=10s&wait=20s", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					held <- 0
					return
				}
				resp.Body.Close()
				held <- resp.StatusCode
			}()
		}
		clustertest.Eventually(t, "two requests in flight", func() bool {
			td.a.limits.mu.Lock()
			defer td.a.limits.mu.Unlock()
			return td.a.limits.inFlight["127.0.0.1"] == 2
		})
		resp, body := td.do(t, "GET", "/v1/groups/g/keys/ok", "")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("third request from one client: %d %s", resp.StatusCode, body)
		}
		if got := td.limitHits("client_requests"); got != 1 {
			t.Fatalf("client_requests hits = %v", got)
		}
		// The probes and /metrics do not share the data requests' budget: a kubelet probing
		// from this IP is answered.
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if resp, body := td.do(t, "GET", p, ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s from a client at its data bound: %d %s", p, resp.StatusCode, body)
			}
		}
		other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
			LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
		defer other.CloseIdleConnections()
		r2, err := other.Get("http://" + td.http + "/v1/groups/g/keys/ok")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r2.Body)
		r2.Body.Close()
		if r2.StatusCode != http.StatusOK {
			t.Fatalf("another client while this one is at its bound: %d", r2.StatusCode)
		}
		cancel()
		<-held
		<-held
		clustertest.Eventually(t, "the held requests to end on the server", func() bool {
			td.a.limits.mu.Lock()
			defer td.a.limits.mu.Unlock()
			return td.a.limits.inFlight["127.0.0.1"] == 0
		})
		td.mustGet(t, "after the held requests ended")
	})

	t.Run("read_header_timeout", func(t *testing.T) {
		slow, err := net.Dial("tcp", td.http)
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		fmt.Fprintf(slow, "GET /v1/groups/g/keys/ok HTTP/1.1\r\nHost: x\r\n") // never ends the header
		td.mustGet(t, "while a slowloris holds a connection")
		slow.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(slow).ReadString('\n')
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the slow connection was kept for 30 s")
		}
		t.Logf("the slow connection got %q, %v", line, err)
		clustertest.Eventually(t, "read_header_timeout counted", func() bool { return td.limitHits("read_header_timeout") == 1 })
	})
}
