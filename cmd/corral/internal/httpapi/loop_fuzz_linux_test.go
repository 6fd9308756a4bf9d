//go:build linux

package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// What a client reads from the API served with an event loop is what it reads from the API
// served without one, byte for byte but the Date: for any bytes it sends — hits, misses, other
// requests, pipelines, requests cut short, garbage — followed by a last request that asks the
// server to close the connection. Both servers serve one API (one node, one state), one after
// the other; a header or a body not sent whole is cut off by a timeout of a second.
func FuzzLoopMatchesFront(f *testing.F) {
	ta := newTestAPI(f, func(c *apiSetup) {
		c.Limits.ReadHeaderTimeout, c.Limits.ReadBodyTimeout = time.Second, time.Second
	})
	g, err := ta.groups.Group(ta.a.cfg.Node, "g")
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	for key, v := range map[string]objects.Object{
		"k":   hitValue,
		"big": {Body: bytes.Repeat([]byte("b"), 20<<10), Type: "text/plain"},
	} {
		if err := g.Set(ctx, key, v); err != nil {
			f.Fatal(err)
		}
	}
	if err := g.SetWithTags(ctx, "tagged", hitValue, "t1", "t2"); err != nil {
		f.Fatal(err)
	}
	_, loop := serveAPI(f, ta, 1)
	_, front := serveAPI(f, ta, 0)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if volatile(raw) {
			return // answers that differ from one request to the next: a lease's token, the metrics
		}
		got := roundTrip(t, loop, raw)
		want := roundTrip(t, front, raw)
		if !bytes.Equal(got, want) {
			t.Fatalf("to %q\n with a loop the client reads %q\n without one %q", raw, got, want)
		}
	})
}

// volatile reports whether raw, unescaped, may ask for an answer that changes from one
// request to the next.
func volatile(raw []byte) bool {
	s := string(raw)
	if u, err := url.PathUnescape(s); err == nil {
		s = u
	}
	s = strings.ToLower(s)
	return strings.Contains(s, "lease") || strings.Contains(s, "metrics") || strings.Contains(s, "debug")
}

var dateHeader = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r\n`)

// lastRequest ends every input of FuzzLoopMatchesFront: the server closes the connection
// after it. (A client that closes its writing half instead is told so by net/http as soon as
// it sees it, which makes a request's answer depend on how fast it came.)
const lastRequest = "GET /healthz HTTP/1.1\r\nHost: corral\r\nConnection: close\r\n\r\n"

// roundTrip sends raw and lastRequest on a new connection to addr, and returns what the
// server sent until it closed the connection, its Date headers blanked.
func roundTrip(t *testing.T, addr string, raw []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(append(raw[:len(raw):len(raw)], lastRequest...)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("to %q the server did not close the connection within 20 s", raw)
	}
	return dateHeader.ReplaceAll(got, []byte("Date: -\r\n"))
}

// TestLoopFuzzCorpus keeps FuzzLoopMatchesFront's seeds in testdata/fuzz (see package
// fuzzcorpus).
func TestLoopFuzzCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzLoopMatchesFront", loopFuzzSeeds())
}

// loopFuzzSeeds are FuzzLoopMatchesFront's seeds.
func loopFuzzSeeds() []fuzzcorpus.Seed {
	get := func(path string, header ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: corral\r\n" + strings.Join(header, "") + "\r\n"
	}
	seed := func(name, in string) fuzzcorpus.Seed { return fuzzcorpus.Seed{Name: name, Values: []any{[]byte(in)}} }
	return []fuzzcorpus.Seed{
		seed("hit", get("/v1/groups/g/keys/k")),
		seed("hits", get("/v1/groups/g/keys/k")+get("/v1/groups/g/keys/tagged")+get("/v1/groups/g/keys/big")),
		seed("miss-between-hits", get("/v1/groups/g/keys/k")+get("/v1/groups/g/keys/missing")+get("/v1/groups/g/keys/k")),
		seed("new-group", get("/v1/groups/other/keys/k")),
		seed("hit-then-other", get("/v1/groups/g/keys/k")+get("/healthz")+get("/v1/groups/g/keys/k")),
		seed("cut-short", get("/v1/groups/g/keys/k")+"GET /v1/groups/g/keys/k HTTP/1.1\r\nHo"),
		seed("connection-close", get("/v1/groups/g/keys/k", "Connection: close\r\n")+get("/v1/groups/g/keys/k")),
		seed("put-then-get", "PUT /v1/groups/g/keys/p HTTP/1.1\r\nHost: corral\r\nContent-Length: 1\r\n\r\nx"+get("/v1/groups/g/keys/p")),
		seed("http-1.0", "GET /v1/groups/g/keys/k HTTP/1.0\r\n\r\n"),
		seed("bare-lf", "GET /v1/groups/g/keys/k HTTP/1.1\nHost: corral\n\n"),
		seed("garbage", "\x00\x01GET / HTTP/9.9\r\n\r\n"),
	}
}
