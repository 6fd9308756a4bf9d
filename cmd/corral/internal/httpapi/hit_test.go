package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// hitValue is the value the hit tests and benchmarks read: 512 bytes, as in the comparison
// with Varnish and nginx (docs/performance.md).
var hitValue = objects.Object{Body: bytes.Repeat([]byte("v"), 512), Type: "text/plain"}

// discardWriter is a ResponseWriter that keeps one header map, cleared between requests
// (clear keeps its memory), and counts the body: what it costs is none of the handler's.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(b)
	return len(b), nil
}
func (w *discardWriter) reset() { clear(w.h); w.status, w.n = 0, 0 }

var _ http.ResponseWriter = (*discardWriter)(nil)

// hitHandler returns the API's handler, as its Server serves it, with key k of group g
// holding hitValue.
func hitHandler(tb testing.TB) http.Handler {
	tb.Helper()
	ta := newTestAPI(tb, nil)
	ta.holdHit(tb)
	return ta.a.handler()
}

// holdHit sets key k of group g to hitValue.
func (ta *testAPI) holdHit(tb testing.TB) {
	tb.Helper()
	g, err := ta.groups.Group(ta.a.cfg.Node, "g")
	if err != nil {
		tb.Fatal(err)
	}
	if err := g.Set(context.Background(), "k", hitValue); err != nil {
		tb.Fatal(err)
	}
}

// TestHitAllocs holds the HTTP hit path — the limits, the token check, the route, the
// group's Get and the headers, everything corral runs between a server handing it a request
// and the body's write — to no allocation. The whole request, as served, is TestFrontAllocs';
// what net/http would allocate is measured beside it by BenchmarkHit/net-http.
func TestHitAllocs(t *testing.T) {
	h := hitHandler(t)
	r := httptest.NewRequest(http.MethodGet, "/v1/groups/g/keys/k", nil)
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	if w.status != http.StatusOK || w.n != len(hitValue.Body) || w.h.Get("X-Corral-Source") != "hit" || w.h.Get("Content-Type") != "text/plain" {
		t.Fatalf("a hit answered %d, %d bytes, %v", w.status, w.n, w.h)
	}
	allocs := testing.AllocsPerRun(1000, func() { w.reset(); h.ServeHTTP(w, r) })
	if allocs != 0 {
		t.Errorf("an HTTP hit allocates %v times in corral's code, want 0", allocs)
	}
}

// TestKeyPath checks the hit's own route against the mux it stands in front of: for every
// path it takes, the mux routes the same request to the key route with the same group and
// key. It declines some the mux would take (escaped paths, HEAD); those the mux serves.
func TestKeyPath(t *testing.T) {
	mux := http.NewServeMux()
	var group, key string
	mux.HandleFunc("GET /v1/groups/{group}/keys/{key}", func(w http.ResponseWriter, r *http.Request) {
		group, key = r.PathValue("group"), r.PathValue("key")
	})
	check := func(t *testing.T, method, target string) bool {
		t.Helper()
		r, err := http.NewRequest(method, "http://x"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, k, ok := keyPath(r)
		if !ok {
			return false
		}
		group, key = "", ""
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusOK || group != g || key != k {
			t.Errorf("%s %s: keyPath says group %q, key %q; the mux answers %d with group %q, key %q", method, target, g, k, w.Code, group, key)
		}
		return true
	}
	tests := []struct {
		name, method, target string
		taken                bool
	}{
		{"plain", "GET", "/v1/groups/g/keys/k", true},
		{"query", "GET", "/v1/groups/g/keys/k?lease=5s", true},
		{"space", "GET", "/v1/groups/g/keys/a%20b", true},
		{"keys-named-keys", "GET", "/v1/groups/keys/keys/keys", true},
		{"head", "HEAD", "/v1/groups/g/keys/k", false},
		{"put", "PUT", "/v1/groups/g/keys/k", false},
		{"escaped-slash", "GET", "/v1/groups/g/keys/a%2Fb", false},
		{"escaped-dot", "GET", "/v1/groups/g/keys/%2E", false},
		{"dot", "GET", "/v1/groups/g/keys/.", false},
		{"dot-dot", "GET", "/v1/groups/../keys/k", false},
		{"double-slash", "GET", "/v1/groups//g/keys/k", false},
		{"empty-key", "GET", "/v1/groups/g/keys/", false},
		{"deeper", "GET", "/v1/groups/g/keys/k/more", false},
		{"trailing-slash", "GET", "/v1/groups/g/keys/k/", false},
		{"other", "GET", "/v1/cluster", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := check(t, tt.method, tt.target); got != tt.taken {
				t.Errorf("keyPath took %s %s: %v, want %v", tt.method, tt.target, got, tt.taken)
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(36, 1))
		const alphabet = "ak/.%2F5e "
		seg := func() string {
			b := make([]byte, rng.IntN(5))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			return string(b)
		}
		for range 20000 {
			target := "/v1/groups/" + seg() + "/keys/" + seg()
			if rng.IntN(4) == 0 {
				target = "/" + seg() + "/groups/" + seg() + "/" + seg()
			}
			if _, err := http.NewRequest(http.MethodGet, "http://x"+target, nil); err != nil {
				continue // not a URL a client could send
			}
			check(t, http.MethodGet, target)
		}
	})
}

// BenchmarkHit measures an HTTP hit of a 512-byte value: handler, what corral runs (0 allocs:
// TestHitAllocs); server, a whole request over a loopback connection as the API serves it (the
// front; 0 allocs: TestFrontAllocs); net-http, the same through net/http alone, as the API was
// served before the front — its allocs/op are net/http's own. The client allocates nothing.
//
//	go test -run '^$' -bench BenchmarkHit -benchmem ./cmd/corral/internal/httpapi
func BenchmarkHit(b *testing.B) {
	b.Run("handler", func(b *testing.B) {
		h := hitHandler(b)
		r := httptest.NewRequest(http.MethodGet, "/v1/groups/g/keys/k", nil)
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		for b.Loop() {
			w.reset()
			h.ServeHTTP(w, r)
		}
	})
	b.Run("server", func(b *testing.B) {
		ts := startTestServer(b, nil)
		benchmarkHitOver(b, ts.testAPI, ts.http)
	})
	b.Run("net-http", func(b *testing.B) {
		ta := newTestAPI(b, nil)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: ta.a.handler()}
		go srv.Serve(lis)
		defer srv.Close()
		benchmarkHitOver(b, ta, lis.Addr().String())
	})
}

// benchmarkHitOver measures hits of group g's key k, which it sets, through the server at addr.
func benchmarkHitOver(b *testing.B, ta *testAPI, addr string) {
	ta.holdHit(b)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /v1/groups/g/keys/k HTTP/1.1\r\nHost: corral\r\n\r\n")
	br := bufio.NewReaderSize(c, 8<<10)
	body := make([]byte, 8<<10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		length := -1
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if len(line) <= 2 {
				break
			}
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
		}
		if length != len(hitValue.Body) {
			b.Fatalf("Content-Length %d, want %d", length, len(hitValue.Body))
		}
		if _, err := io.ReadFull(br, body[:length]); err != nil {
			b.Fatal(err)
		}
	}
}
