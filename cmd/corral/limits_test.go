package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
)

// limitHits reads corral_http_limit_hits_total{limit} of the daemon.
func (td *testDaemon) limitHits(limit string) float64 { return td.d.hits.Count(limithits.Limit(limit)) }

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
