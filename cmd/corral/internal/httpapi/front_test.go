package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// answer is what a client reads of a response: all but the framing and the Date.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) String() string { return fmt.Sprintf("%d %v %q", a.status, a.header, a.body) }

// exchange sends raw to addr and reads n responses, or as many as come before the
// connection closes.
func exchange(tb testing.TB, addr, raw string, n int) []answer {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []answer
	for range n {
		// A HEAD's response has no body, whatever its Content-Length says.
		resp, err := http.ReadResponse(br, &http.Request{Method: strings.Fields(raw)[0]})
		if err != nil {
			break
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			tb.Fatal(err)
		}
		h := resp.Header.Clone()
		for _, k := range []string{"Date", "Content-Length", "Transfer-Encoding"} {
			h.Del(k)
		}
		out = append(out, answer{resp.StatusCode, h, string(body)})
	}
	return out
}

// TestFrontMatchesNetHTTP sends the same bytes to the API as served (the front before
// net/http) and to net/http alone, and checks that a client reads the same answers: the
// requests the front takes, those it hands over, and pipelines of both — with an event loop
// before the front, and without.
func TestFrontMatchesNetHTTP(t *testing.T) {
	for _, loops := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) { frontMatchesNetHTTP(t, loops) })
	}
}

func frontMatchesNetHTTP(t *testing.T, loops int) {
	ts := startTestServer(t, func(c *apiSetup) { c.Loops = loops })
	g, err := ts.groups.Group(ts.a.cfg.Node, "g")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for key, v := range map[string]objects.Object{
		"k":     hitValue,
		"typed": {Body: []byte(`{"a":1}`), Type: "application/json"},
		"bare":  {Body: []byte("<html>no type</html>")},
		"big":   {Body: bytes.Repeat([]byte("b"), 20<<10), Type: "text/plain"},
		"mid":   {Body: bytes.Repeat([]byte("m"), 5<<10), Type: "text/plain"},
	} {
		if err := g.Set(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.SetWithTags(ctx, "tagged", hitValue, "t1", "t2"); err != nil {
		t.Fatal(err)
	}
	// net/http alone, serving the same API.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := &http.Server{Handler: ts.a.handler(), IdleTimeout: idleTimeout}
	done := make(chan error, 1)
	go func() { done <- plain.Serve(lis) }()
	t.Cleanup(func() {
		plain.Shutdown(context.Background())
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})

	get := func(path string, header ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: corral\r\n" + strings.Join(header, "") + "\r\n"
	}
	tests := []struct {
		name string
		raw  string
		n    int
	}{
		{"hit", get("/v1/groups/g/keys/k"), 1},
		{"typed", get("/v1/groups/g/keys/typed"), 1},
		{"sniffed", get("/v1/groups/g/keys/bare"), 1},
		{"tagged", get("/v1/groups/g/keys/tagged"), 1},
		{"chunked", get("/v1/groups/g/keys/big"), 1},
		{"past-net-http-buffer", get("/v1/groups/g/keys/mid"), 1},
		{"not-found", get("/v1/groups/g/keys/missing"), 1},
		{"bad-group", get("/v1/groups/bad!name/keys/k"), 1},
		{"headers", get("/v1/groups/g/keys/k", "User-Agent: wrk\r\n", "Accept: */*\r\n", "X-Empty:\r\n"), 1},
		{"pipeline", get("/v1/groups/g/keys/k") + get("/v1/groups/g/keys/typed") + get("/v1/groups/g/keys/missing"), 3},
		{"pipeline-then-other", get("/v1/groups/g/keys/k") + get("/v1/cluster") + get("/v1/groups/g/keys/k"), 3},
		{"query", get("/v1/groups/g/keys/k?peek"), 1},
		{"escaped", get("/v1/groups/g/keys/%6B"), 1},
		{"head", "HEAD /v1/groups/g/keys/k HTTP/1.1\r\nHost: corral\r\n\r\n", 1},
		{"http-1.0", "GET /v1/groups/g/keys/k HTTP/1.0\r\n\r\n", 1},
		{"no-host", "GET /v1/groups/g/keys/k HTTP/1.1\r\n\r\n", 1},
		{"two-hosts", "GET /v1/groups/g/keys/k HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 1},
		{"connection-close", get("/v1/groups/g/keys/k", "Connection: close\r\n") + get("/v1/groups/g/keys/k"), 2},
		{"content-length", get("/v1/groups/g/keys/k", "Content-Length: 0\r\n"), 1},
		{"folded-header", get("/v1/groups/g/keys/k", "X-A: 1\r\n folded\r\n"), 1},
		{"bad-header-name", get("/v1/groups/g/keys/k", "X A: 1\r\n"), 1},
		{"control-in-value", get("/v1/groups/g/keys/k", "X-A: a\x01b\r\n"), 1},
		{"long-header", get("/v1/groups/g/keys/k", "X-Long: "+strings.Repeat("x", 6000)+"\r\n"), 1},
		{"dot-segment", get("/v1/groups/g/keys/.."), 1},
		{"put", "PUT /v1/groups/g/keys/new HTTP/1.1\r\nHost: corral\r\nContent-Length: 3\r\n\r\nabc" + get("/v1/groups/g/keys/new"), 2},
		{"lowercase-method", "get /v1/groups/g/keys/k HTTP/1.1\r\nHost: corral\r\n\r\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := exchange(t, lis.Addr().String(), tt.raw, tt.n)
			got := exchange(t, ts.http, tt.raw, tt.n)
			if len(want) == 0 {
				t.Fatalf("net/http answered nothing to %q", tt.raw)
			}
			if !slices.EqualFunc(got, want, func(a, b answer) bool { return a.String() == b.String() }) {
				t.Errorf("to %q\n the API answers %v\n net/http alone %v", tt.raw, got, want)
			}
		})
	}
}

// TestFrontAllocs holds an HTTP hit served whole — read, handled and written by the front —
// to no allocation in the whole process once the connection is set up (the client allocates
// nothing). net/http allocated 16 a hit; see BenchmarkHit.
func TestFrontAllocs(t *testing.T) {
	ts := startTestServer(t, nil)
	ts.holdHit(t)
	c, err := net.Dial("tcp", ts.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /v1/groups/g/keys/k HTTP/1.1\r\nHost: corral\r\nUser-Agent: wrk\r\n\r\n")
	br := bufio.NewReaderSize(c, 8<<10)
	want := 0
	one := func() {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				t.Fatal(err)
			}
			n += len(line)
			if len(line) <= 2 {
				break
			}
		}
		if _, err := br.Discard(len(hitValue.Body)); err != nil {
			t.Fatal(err)
		}
		if want == 0 {
			want = n
		}
	}
	for range 100 {
		one()
	}
	const rounds = 2000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		one()
	}
	runtime.ReadMemStats(&after)
	// As testing.AllocsPerRun counts. The node's own timers allocate a little meanwhile, and
	// the Date header is made once a second.
	if per := (after.Mallocs - before.Mallocs) / rounds; per != 0 {
		t.Errorf("an HTTP hit allocates %d times, want 0", per)
	}
}

// TestFrontShutdown checks that Shutdown closes the front's idle connections and waits for
// none, and that a connection it handed to net/http is net/http's to close.
func TestFrontShutdown(t *testing.T) {
	ta := newTestAPI(t, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ta.a.Server()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	idle := exchangeConn(t, lis.Addr().String(), "GET /v1/groups/g/keys/k HTTP/1.1\r\nHost: x\r\n\r\n")
	handed := exchangeConn(t, lis.Addr().String(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	for name, c := range map[string]net.Conn{"front": idle, "net/http": handed} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("%s: the idle connection read %d bytes after Shutdown, want it closed", name, n)
		}
		c.Close()
	}
}

// exchangeConn sends one request on a new connection, reads its answer, and returns the
// connection, kept alive.
func exchangeConn(tb testing.TB, addr, raw string) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.WriteString(c, raw); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}
