package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestServeAPI(t *testing.T) {
	origin := newOrigin(t, 0)
	nodes := startCluster(t, 2, "--origin", origin.template(), "--ttl", "1h")
	a, b := nodes[0], nodes[1]

	// Read-through, from the owner and from the other node.
	code, src, body := a.get(t, "/v1/groups/items/keys/k1")
	if code != 200 || body != "value of k1" || (src != "fill" && src != "peer") {
		t.Fatalf("GET = %d %q %q", code, src, body)
	}
	if code, src, _ := b.get(t, "/v1/groups/items/keys/k1"); code != 200 || (src != "hit" && src != "peer") {
		t.Fatalf("second GET from b = %d %q", code, src)
	}
	if n := origin.count("k1"); n != 1 {
		t.Fatalf("origin saw k1 %d times", n)
	}
	// Content-Type is kept.
	resp, err := http.Get(a.url("/v1/groups/items/keys/k1"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Fatalf("Content-Type = %q", ct)
	}
	// Origin 404 → 404, 500 → 502 with a reason.
	if code, _, _ := a.get(t, "/v1/groups/items/keys/missing-1"); code != 404 {
		t.Fatalf("missing = %d", code)
	}
	if code, _, body := b.get(t, "/v1/groups/items/keys/broken-1"); code != 502 || !strings.Contains(body, "500") {
		t.Fatalf("broken = %d %q", code, body)
	}
	// PUT then GET anywhere; DELETE is seen everywhere.
	key := url.PathEscape("any/bytes é\x00?")
	if code, _ := b.do(t, "PUT", "/v1/groups/items/keys/"+key, "written"); code != 204 {
		t.Fatalf("PUT = %d", code)
	}
	for _, n := range nodes {
		if code, _, body := n.get(t, "/v1/groups/items/keys/"+key); code != 200 || body != "written" {
			t.Fatalf("GET after PUT on %s = %d %q", n.Name, code, body)
		}
	}
	if code, _ := a.do(t, "DELETE", "/v1/groups/items/keys/"+key, ""); code != 204 {
		t.Fatalf("DELETE = %d", code)
	}
	for _, n := range nodes {
		// The key now reads through to the origin again (which serves any key).
		if code, _, body := n.get(t, "/v1/groups/items/keys/"+key); code != 200 || body == "written" {
			t.Fatalf("GET after DELETE on %s = %d %q", n.Name, code, body)
		}
	}
	// Cluster view with an owner every node agrees on.
	va, vb := a.cluster(t, "k1"), b.cluster(t, "k1")
	if len(va.Members) != 2 || va.Owner == "" || va.Owner != vb.Owner || va.Epoch != vb.Epoch {
		t.Fatalf("cluster views disagree: %+v vs %+v", va, vb)
	}
	out, err := runCorral(t, "inspect", "--addr", a.HTTP, "--key", "k1")
	if err != nil || !strings.Contains(out, "sees 2 members") || !strings.Contains(out, `key "k1" → `+va.Owner) {
		t.Fatalf("corral inspect: %v\n%s", err, out)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code := a.status(path); code != 200 {
			t.Fatalf("%s = %d", path, code)
		}
	}
	_, _, metrics := a.get(t, "/metrics")
	for _, name := range []string{"corral_gets_total", "corral_fills_total", "corral_members 2", "corral_peer_requests_total"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestServeBadInput(t *testing.T) {
	origin := newOrigin(t, 0)
	n := startNode(t, "solo", nil, "--origin", origin.template(), "--max-value-bytes", "1000", "--fill-timeout", "300ms")
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"bad group name", "GET", "/v1/groups/bad%20name/keys/k", "", 400},
		{"group name too long", "GET", "/v1/groups/" + strings.Repeat("g", 65) + "/keys/k", "", 400},
		{"key too long", "GET", "/v1/groups/items/keys/" + strings.Repeat("k", 4097), "", 400},
		{"empty key: said, not the router's 404", "GET", "/v1/groups/items/keys/", "", 400},
		{"oversize body", "PUT", "/v1/groups/items/keys/k", strings.Repeat("v", 1001), 413},
		{"unknown method", "POST", "/v1/groups/items/keys/k", "", 405},
		{"hanging origin is bounded by the fill timeout", "GET", "/v1/groups/items/keys/hang-1", "", 502},
		{"unknown path", "GET", "/v2/nothing", "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			code, body := n.do(t, tt.method, tt.path, tt.body)
			if code != tt.want {
				t.Fatalf("%s %s = %d %q, want %d", tt.method, tt.path, code, body, tt.want)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("took %v", time.Since(start))
			}
		})
	}
	// Malformed escapes never reach the handler: the HTTP server answers 400. Go's client
	// refuses to send such a URL, so it goes over a raw connection.
	conn, err := net.Dial("tcp", n.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/groups/items/keys/%%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("malformed escape = %d", resp.StatusCode)
	}
	// Nothing else on the node was affected.
	if code, _, body := n.get(t, "/v1/groups/items/keys/fine"); code != 200 || body != "value of fine" {
		t.Fatalf("a good request after bad input = %d %q", code, body)
	}
}

// 300 concurrent requests over three nodes for one key reach the origin once.
func TestServeStampedeReachesOriginOnce(t *testing.T) {
	origin := newOrigin(t, 100*time.Millisecond)
	nodes := startCluster(t, 3, "--origin", origin.template())
	var wg sync.WaitGroup
	errs := make(chan string, 300)
	for i := range 300 {
		n := nodes[i%3]
		wg.Go(func() {
			resp, err := http.Get(n.url("/v1/groups/items/keys/hot"))
			if err != nil {
				errs <- err.Error()
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- resp.Status
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if c := origin.count("hot"); c != 1 {
		t.Fatalf("origin called %d times for 300 requests, want 1", c)
	}
}

// SIGKILL of the owner costs one origin call for the hot key, however many survivors ask.
func TestServeOwnerKilledCostsOneOriginCall(t *testing.T) {
	origin := newOrigin(t, 50*time.Millisecond)
	nodes := startCluster(t, 3, "--origin", origin.template(), "--ttl", "1h")
	owner := nodes[0].cluster(t, "hot").Owner
	var victim *proc
	var survivors []*proc
	for _, n := range nodes {
		if n.Name == owner {
			victim = n
		} else {
			survivors = append(survivors, n)
		}
	}
	if code, _, _ := survivors[0].get(t, "/v1/groups/items/keys/hot"); code != 200 {
		t.Fatal("warm-up failed")
	}
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	var wg sync.WaitGroup
	for _, n := range survivors {
		for range 50 {
			wg.Go(func() {
				resp, err := http.Get(n.url("/v1/groups/items/keys/hot"))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("after SIGKILL: %s", resp.Status)
				}
			})
		}
	}
	wg.Wait()
	if c := origin.count("hot"); c != 2 {
		t.Fatalf("origin called %d times, want 2 (one before the kill, one refill)", c)
	}
}

// SIGTERM: readiness fails first, the node leaves (peers see it go), and the process exits 0.
func TestServeSIGTERM(t *testing.T) {
	origin := newOrigin(t, 0)
	nodes := startCluster(t, 2, "--origin", origin.template(), "--shutdown-delay", "300ms")
	leaving := nodes[1]
	notReady := make(chan time.Time, 1)
	go func() {
		for {
			if leaving.status("/readyz") == http.StatusServiceUnavailable {
				notReady <- time.Now()
				return
			}
			select {
			case <-leaving.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	if err := leaving.signal(t, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, leaving.log.String())
	}
	exited := time.Now()
	select {
	case at := <-notReady:
		if !at.Before(exited) {
			t.Fatal("readiness did not fail before exit")
		}
		t.Logf("not ready %v after SIGTERM, exited after %v", at.Sub(start).Round(time.Millisecond), exited.Sub(start).Round(time.Millisecond))
	default:
		t.Fatal("readiness never reported 503 while stopping")
	}
	if !strings.Contains(leaving.log.String(), "corral stopped") {
		t.Fatal("no clean stop in the log")
	}
	waitFor(t, "the survivor to drop the leaver", 10*time.Second, func() bool {
		return len(nodes[0].cluster(t, "").Members) == 1
	})
}

func TestServeEnvironment(t *testing.T) {
	t.Setenv("CORRAL_TTL", "bogus")
	cmdOut := startFail(t, "serve", "--bind", "127.0.0.1")
	if !strings.Contains(cmdOut, "CORRAL_TTL") {
		t.Fatalf("a bad environment variable is not named: %s", cmdOut)
	}
}

// startFail runs corral with args, expecting it to exit non-zero at once, and returns its output.
func startFail(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCorral(t, args...)
	if err == nil {
		t.Fatalf("corral %v succeeded", args)
	}
	return out
}

func runCorral(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(buildCorral(t), args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Past --ttl but within --swr, a read answers at once with the stale value
// (X-Corral-Source: stale) and one background refresh reaches the origin.
func TestServeStaleWhileRevalidate(t *testing.T) {
	origin := newOrigin(t, 0)
	nodes := startCluster(t, 2, "--origin", origin.template(), "--ttl", "1s", "--jitter", "0", "--swr", "1m")
	owner := nodes[0].cluster(t, "k").Owner
	var o *proc
	for _, n := range nodes {
		if n.Name == owner {
			o = n
		}
	}
	if code, _, _ := o.get(t, "/v1/groups/items/keys/k"); code != 200 {
		t.Fatal("first GET failed")
	}
	time.Sleep(1100 * time.Millisecond)
	code, src, body := o.get(t, "/v1/groups/items/keys/k")
	if code != 200 || src != "stale" || body != "value of k" {
		t.Fatalf("GET past TTL = %d %q %q, want the stale value", code, src, body)
	}
	// The origin answers the refresh a moment before the owner stores what it answered: wait
	// for the store (GETs meanwhile are still stale, and start no second refresh).
	waitFor(t, "a fresh hit after the background refresh", 10*time.Second, func() bool {
		code, src, _ := o.get(t, "/v1/groups/items/keys/k")
		return code == 200 && src == "hit"
	})
	if got := origin.count("k"); got != 2 {
		t.Fatalf("origin asked %d times, want 2: the fill and one background refresh", got)
	}
}
