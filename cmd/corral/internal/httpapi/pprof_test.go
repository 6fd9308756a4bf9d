package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corralcache/corral/cmd/corral/internal/servetest"
)

// With Pprof the runtime's profiles are served as net/http/pprof serves them; without it,
// not at all. With a token they need it, whether reads do or not.
func TestPprof(t *testing.T) {
	off := startTestServer(t, nil)
	if resp, _ := off.do(t, "GET", "/debug/pprof/", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /debug/pprof/ without Pprof: %d, want 404", resp.StatusCode)
	}
	on := startTestServer(t, func(c *apiSetup) { c.Pprof = true })
	for path, want := range map[string]string{
		"/debug/pprof/":                     "goroutine",
		"/debug/pprof/goroutine?debug=1":    "goroutine profile: total",
		"/debug/pprof/heap?debug=1":         "heap profile:",
		"/debug/pprof/cmdline":              "",
		"/debug/pprof/profile?seconds=1":    "", // a gzipped protobuf
		"/debug/pprof/trace?seconds=0.1":    "", // the execution tracer's bytes
		"/debug/pprof/symbol":               "num_symbols",
		"/debug/pprof/allocs?debug=1":       "heap profile:",
		"/debug/pprof/threadcreate?debug=1": "threadcreate profile:",
	} {
		resp, body := on.do(t, "GET", path, "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) || len(body) == 0 {
			t.Errorf("GET %s: %d, %d bytes (want %q in them)", path, resp.StatusCode, len(body), want)
		}
	}
	for _, reads := range []bool{false, true} {
		t.Run(fmt.Sprint("token, reads=", reads), func(t *testing.T) {
			ts := startTestServer(t, func(c *apiSetup) {
				c.Pprof, c.Token, c.TokenReads = true, servetest.Token(t, "s3cret"), reads
			})
			for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
				if resp, _ := ts.do(t, "GET", p, ""); resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("GET %s without the token: %d, want 401", p, resp.StatusCode)
				}
			}
			if resp, _ := ts.do(t, "POST", "/debug/pprof/symbol", "0x1"); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST /debug/pprof/symbol without the token: %d, want 401", resp.StatusCode)
			}
			if resp, body := ts.do(t, "GET", "/debug/pprof/heap?debug=1", "", "Authorization", "Bearer s3cret"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "heap profile:") {
				t.Errorf("GET /debug/pprof/heap with the token: %d", resp.StatusCode)
			}
		})
	}
}
