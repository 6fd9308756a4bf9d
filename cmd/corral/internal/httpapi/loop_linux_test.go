//go:build linux

package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/clustertest"
)

// loops are ts's event loops.
func (ts *testServer) loops() []*httpLoop {
	ts.srv.mu.Lock()
	defer ts.srv.mu.Unlock()
	return ts.srv.loops
}

// loopAnswered is how many requests ts's event loops answered (corral_http_loop_hits_total).
func (ts *testServer) loopAnswered() uint64 {
	return uint64(testutil.ToFloat64(ts.a.cfg.Metrics.loopHits))
}

// moves are corral_http_moves_total's to="goroutine" and to="loop".
func (ts *testServer) moves() (toConn, toLoop float64) {
	return testutil.ToFloat64(ts.a.cfg.Metrics.toConn), testutil.ToFloat64(ts.a.cfg.Metrics.toLoop)
}

// getOn sends a GET of path on c and returns its status, X-Corral-Source and body.
func getOn(tb testing.TB, c net.Conn, br *bufio.Reader, path string) (int, string, string) {
	tb.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: corral\r\n\r\n"); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Corral-Source"), string(body)
}

// An event loop answers the hits of a kept-alive connection; a request it cannot answer at
// once (a miss) moves the connection to a goroutine, which answers it, and after
// handBackAfter hits in a row the connection is the loop's again.
func TestLoopAnswersHitsAndHandsTheRestOver(t *testing.T) {
	ts := startTestServer(t, nil)
	ts.holdHit(t)
	c, err := net.Dial("tcp", ts.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	hit := func(what string) {
		t.Helper()
		if status, src, body := getOn(t, c, br, "/v1/groups/g/keys/k"); status != http.StatusOK || src != "hit" || body != string(hitValue.Body) {
			t.Fatalf("%s: %d %q %q", what, status, src, body)
		}
	}
	for range 10 {
		hit("a hit")
	}
	if got := ts.loopAnswered(); got != 10 {
		t.Fatalf("the loop answered %d of 10 hits, want all", got)
	}
	// A key not held: the goroutine answers (404), and the hits after it, handBackAfter of
	// them, before the connection goes back.
	if status, _, _ := getOn(t, c, br, "/v1/groups/g/keys/missing"); status != http.StatusNotFound {
		t.Fatalf("a missing key: %d", status)
	}
	for range handBackAfter {
		hit("a hit on the goroutine")
	}
	if got := ts.loopAnswered(); got != 10 {
		t.Fatalf("the loop answered %d, want 10: the goroutine answers a miss and the hits after it", got)
	}
	for range 10 {
		hit("a hit after the hand-back")
	}
	clustertest.Eventually(t, "the connection back on its loop", func() bool { return ts.loopAnswered() == 20 })
	if toConn, toLoop := ts.moves(); toConn != 1 || toLoop != 1 {
		t.Fatalf("corral_http_moves_total: to goroutine %v, to loop %v; want 1 and 1", toConn, toLoop)
	}
}

// A pipeline of hits whose responses the client does not read fills the socket: the loop
// hands the connection to its goroutine with the responses it could not write, and the
// client reads every response, whole and in order.
func TestLoopHandsOverWhatTheClientHasNotRead(t *testing.T) {
	ts := startTestServer(t, nil)
	g, err := ts.groups.Group(ts.a.cfg.Node, "g")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 1000
	bodies := map[string][]byte{}
	for i, k := range []string{"a", "b", "c", "d"} {
		// Past frontBodyBuffer, but for one: chunked and Content-Length responses both.
		bodies[k] = bytes.Repeat([]byte{byte('a' + i)}, 7<<10+i*8<<10)
		if err := g.Set(ctx, k, objects.Object{Body: bodies[k], Type: "text/plain"}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := net.Dial("tcp", ts.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var pipeline strings.Builder
	keys := []string{"a", "b", "c", "d"}
	for i := range n {
		pipeline.WriteString("GET /v1/groups/g/keys/" + keys[i%4] + " HTTP/1.1\r\nHost: corral\r\n\r\n")
	}
	if _, err := io.WriteString(c, pipeline.String()); err != nil {
		t.Fatal(err)
	}
	// 1000 responses of 7 to 31 KiB are 19 MiB: more than the socket takes before the client
	// reads.
	clustertest.Eventually(t, "the loop to hand the connection over with responses unread", func() bool {
		var n uint64
		for _, l := range ts.loops() {
			n += l.unread.Load()
		}
		return n > 0
	})
	br := bufio.NewReader(c)
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, bodies[keys[i%4]]) {
			t.Fatalf("response %d: %d, %d bytes, %v; want key %s's %d bytes", i, resp.StatusCode, len(body), err, keys[i%4], len(bodies[keys[i%4]]))
		}
	}
	if got := ts.loopAnswered(); got == 0 {
		t.Fatal("the loop answered none of the pipeline")
	}
}

// A new connection on a loop that sends nothing within --read-header-timeout is closed and
// counted as a slowloris, as on a goroutine; a kept-alive one is not closed for it.
func TestLoopReadHeaderTimeout(t *testing.T) {
	ts := startTestServer(t, func(c *apiSetup) { c.Limits.ReadHeaderTimeout = 300 * time.Millisecond })
	ts.holdHit(t)
	kept, err := net.Dial("tcp", ts.http)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	kept.SetDeadline(time.Now().Add(30 * time.Second))
	keptBR := bufio.NewReader(kept)
	if status, _, _ := getOn(t, kept, keptBR, "/v1/groups/g/keys/k"); status != http.StatusOK {
		t.Fatalf("a hit: %d", status)
	}
	silent, err := net.Dial("tcp", ts.http)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); err == nil {
		t.Fatalf("a silent connection read %d bytes, want it closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a silent connection was kept for 30 s")
	}
	clustertest.Eventually(t, "read_header_timeout counted", func() bool { return ts.limitHits("read_header_timeout") == 1 })
	if status, _, _ := getOn(t, kept, keptBR, "/v1/groups/g/keys/k"); status != http.StatusOK {
		t.Fatalf("a hit on the kept-alive connection after the timeout: %d", status)
	}
	if got := ts.limitHits("read_header_timeout"); got != 1 {
		t.Fatalf("read_header_timeout counted %v times, want 1: the kept-alive connection is not a slowloris", got)
	}
}

// Requests sent in pieces cut anywhere — hits, misses, a key with tags, a request net/http
// answers — are each answered once, in order, whichever of the loop, the goroutine and
// net/http answers them, as the connection moves between them.
func TestLoopPipelinesInPieces(t *testing.T) {
	ts := startTestServer(t, nil)
	g, err := ts.groups.Group(ts.a.cfg.Node, "g")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Set(ctx, "k", hitValue); err != nil {
		t.Fatal(err)
	}
	if err := g.SetWithTags(ctx, "tagged", objects.Object{Body: []byte("t"), Type: "text/plain"}, "t1"); err != nil {
		t.Fatal(err)
	}
	type want struct {
		status int
		body   string
		tags   string
	}
	kinds := []struct {
		raw  string
		want want
	}{
		{"GET /v1/groups/g/keys/k HTTP/1.1\r\nHost: corral\r\n\r\n", want{200, string(hitValue.Body), ""}},
		{"GET /v1/groups/g/keys/k HTTP/1.1\r\nHost: corral\r\nUser-Agent: pieces\r\nAccept: */*\r\n\r\n", want{200, string(hitValue.Body), ""}},
		{"GET /v1/groups/g/keys/tagged HTTP/1.1\r\nHost: corral\r\n\r\n", want{200, "t", "t1"}},
		{"GET /v1/groups/g/keys/missing HTTP/1.1\r\nHost: corral\r\n\r\n", want{404, "", ""}},
	}
	for seed := range int64(4) {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		var raw strings.Builder
		var wants []want
		for range 300 {
			k := kinds[rng.IntN(len(kinds))]
			raw.WriteString(k.raw)
			wants = append(wants, k.want)
		}
		// The last connection of each seed meets net/http too, at its end.
		if seed%2 == 1 {
			raw.WriteString("GET /healthz HTTP/1.1\r\nHost: corral\r\n\r\n" + kinds[0].raw)
			wants = append(wants, want{200, "ok\n", ""}, kinds[0].want)
		}
		c, err := net.Dial("tcp", ts.http)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		sent := make(chan error, 1)
		go func() {
			b := []byte(raw.String())
			for len(b) > 0 {
				n := min(len(b), 1+rng.IntN(200))
				if _, err := c.Write(b[:n]); err != nil {
					sent <- err
					return
				}
				b = b[n:]
			}
			sent <- nil
		}()
		br := bufio.NewReader(c)
		for i, w := range wants {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("seed %d, response %d: %v", seed, i, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("seed %d, response %d: %v", seed, i, err)
			}
			if resp.StatusCode != w.status || (w.status == 200 && string(body) != w.body) || resp.Header.Get(objects.SurrogateKeyHeader) != w.tags {
				t.Fatalf("seed %d, response %d: %d %q tags %q; want %d %q tags %q", seed, i, resp.StatusCode, body, resp.Header.Get(objects.SurrogateKeyHeader), w.status, w.body, w.tags)
			}
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if ts.loopAnswered() == 0 {
		t.Fatal("the loop answered none of the requests")
	}
}

// A near copy of a hot key another node owns is answered on the loop, as getKey answers it
// (X-Corral-Source: near): a new connection's GET of it is the loop's, with no move to a
// goroutine. (A near copy lives a second: each try reads the key through the API until it is
// kept near again, then asks on a new connection.)
func TestLoopAnswersNearCopies(t *testing.T) {
	ts := startTestServer(t, nil)
	g, key := servetest.OwnerElsewhere(t, ts.a.cfg.Node, ts.a.cfg.MaxValueBytes, "g")
	if err := g.Set(context.Background(), key, hitValue); err != nil {
		t.Fatal(err)
	}
	ts.nearCopyOnLoop(t, "/v1/groups/g/keys/"+key)
}

// A purge drops the near copies the loops answer: once DELETE /v1/tags/{tag} has answered,
// no request through the node gets a near copy of a value stored with the tag before it.
func TestLoopDropsPurgedNearCopies(t *testing.T) {
	ts := startTestServer(t, nil)
	g, key := servetest.OwnerElsewhere(t, ts.a.cfg.Node, ts.a.cfg.MaxValueBytes, "g")
	if err := g.SetWithTags(context.Background(), key, hitValue, "page-7"); err != nil {
		t.Fatal(err)
	}
	path := "/v1/groups/g/keys/" + key
	ts.nearCopyOnLoop(t, path)
	if resp, body := ts.do(t, http.MethodDelete, "/v1/tags/page-7", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /v1/tags/page-7: %d %q", resp.StatusCode, body)
	}
	// The owner lost the value too, and the group has no origin: the key is not found now,
	// on the loop as on a goroutine.
	for i := range 3 {
		c, err := net.Dial("tcp", ts.http)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		status, src, body := getOn(t, c, bufio.NewReader(c), path)
		c.Close()
		if status != http.StatusNotFound {
			t.Fatalf("GET %d after the purge, on a new connection: %d %q %q, want 404", i, status, src, body)
		}
	}
}

// nearCopyOnLoop waits until a GET of path, a key another node owns and holds, on a new
// connection is answered on the loop from the node's near copy.
func (ts *testServer) nearCopyOnLoop(t *testing.T, path string) {
	t.Helper()
	tries := 0
	clustertest.Eventually(t, "a near copy answered on the loop", func() bool {
		tries++
		for range 3 { // the second read through the owner keeps a near copy
			if resp, body := ts.do(t, http.MethodGet, path, ""); resp.StatusCode != http.StatusOK || body != string(hitValue.Body) {
				t.Fatalf("GET through the owner: %d %q", resp.StatusCode, body)
			}
		}
		c, err := net.Dial("tcp", ts.http)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		answered, moved := ts.loopAnswered(), ts.movesToConn()
		status, src, body := getOn(t, c, bufio.NewReader(c), path)
		if status != http.StatusOK || body != string(hitValue.Body) {
			t.Fatalf("GET on a new connection: %d %q %q", status, src, body)
		}
		return src == "near" && ts.loopAnswered() == answered+1 && ts.movesToConn() == moved
	})
	t.Logf("%d tries", tries)
}

// movesToConn is corral_http_moves_total{to="goroutine"}.
func (ts *testServer) movesToConn() float64 {
	toConn, _ := ts.moves()
	return toConn
}
