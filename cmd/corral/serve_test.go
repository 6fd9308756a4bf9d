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

	"github.com/corralcache/corral/cmd/corral/internal/limithits"
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

// limitHits reads corral_http_limit_hits_total{limit} of the daemon.
func (td *testDaemon) limitHits(limit string) float64 { return td.d.hits.Count(limithits.Limit(limit)) }

// --pprof serves the Go runtime's profiles on the HTTP port; without it they are not served.
func TestServePprof(t *testing.T) {
	off := startTestDaemon(t, nil)
	if resp, _ := off.do(t, "GET", "/debug/pprof/goroutine?debug=1", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("without --pprof: %d, want 404", resp.StatusCode)
	}
	on := startTestDaemon(t, func(c *serveConfig) { c.pprof = true })
	resp, body := on.do(t, "GET", "/debug/pprof/goroutine?debug=1", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "goroutine profile: total") {
		t.Fatalf("with --pprof: %d, %.80q", resp.StatusCode, body)
	}
}
