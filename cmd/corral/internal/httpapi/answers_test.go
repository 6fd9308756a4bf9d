package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/origin"
)

// What a newcomer's first requests answer: each says what is wrong, once, and changes nothing.
func TestAnswersSayWhatIsWrong(t *testing.T) {
	ts := startTestServer(t, nil)
	tests := []struct {
		name, method, path string
		code               int
		body               string // a part of the answer's body
	}{
		{"GET an empty key", "GET", "/v1/groups/items/keys/", 400, "empty key: the path is /v1/groups/{group}/keys/{key}"},
		{"PUT an empty key", "PUT", "/v1/groups/items/keys/", 400, "empty key"},
		{"DELETE an empty key", "DELETE", "/v1/groups/items/keys/", 400, "empty key"},
		{"no key at all", "GET", "/v1/groups/items/keys", 400, "no keys: name them as ?key=a&key=b"},
		{"an empty tag", "DELETE", "/v1/tags/", 400, "empty tag: the path is /v1/tags/{tag}"},
		{"a key never PUT, without an origin", "GET", "/v1/groups/items/keys/42", 404,
			"not found: nothing is stored under this key, and this node has no --origin"},
		{"a peek at a key never PUT, without an origin", "GET", "/v1/groups/items/keys/42?peek", 404, "has no --origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := ts.do(t, tt.method, tt.path, "v")
			if resp.StatusCode != tt.code || !strings.Contains(body, tt.body) {
				t.Errorf("%s %s: %d %q, want %d and %q", tt.method, tt.path, resp.StatusCode, body, tt.code, tt.body)
			}
			if strings.Count(body, "\n") != 1 {
				t.Errorf("%s %s: the answer is not one line: %q", tt.method, tt.path, body)
			}
		})
	}
	if resp, body := ts.do(t, "GET", "/v1/groups/items/keys/42", ""); resp.StatusCode != 404 {
		t.Errorf("after the bad requests, the key holds %q (%d)", body, resp.StatusCode)
	}
}

// An origin's failure is said once: "origin answered 503 …", not "origin: origin answered …".
func TestOriginFailureSaysOriginOnce(t *testing.T) {
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer o.Close()
	orig, err := origin.New(origin.Config{Template: o.URL + "/items/{key}", FillTimeout: 5 * time.Second, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ts := startTestServer(t, func(s *apiSetup) { s.Origin = orig })
	resp, body := ts.do(t, "GET", "/v1/groups/items/keys/42", "")
	if resp.StatusCode != http.StatusBadGateway || body != "origin answered 503 Service Unavailable\n" {
		t.Errorf("GET of a failing origin: %d %q", resp.StatusCode, body)
	}
	// With an origin, its 404 is the answer; nothing is said of PUT.
	resp, body = ts.do(t, "GET", "/v1/groups/items/keys/missing", "")
	if resp.StatusCode != http.StatusNotFound || body != "not found\n" {
		t.Errorf("GET of a key the origin does not have: %d %q", resp.StatusCode, body)
	}
}

// A PUT stores its body with its Content-Type, which GET answers: what curl sends by default
// (application/x-www-form-urlencoded) is stored as sent, and no type is answered as
// application/octet-stream.
func TestPutKeepsItsContentType(t *testing.T) {
	ts := startTestServer(t, nil)
	tests := []struct {
		name, sent, answered string
	}{
		{"json", "application/json", "application/json"},
		{"curl's default", "application/x-www-form-urlencoded", "application/x-www-form-urlencoded"},
		{"none", "", "application/octet-stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.sent != "" {
				hdr = []string{"Content-Type", tt.sent}
			}
			if resp, body := ts.do(t, "PUT", "/v1/groups/items/keys/"+tt.name, `{"id":42}`, hdr...); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("PUT: %d %q", resp.StatusCode, body)
			}
			resp, body := ts.do(t, "GET", "/v1/groups/items/keys/"+tt.name, "")
			if got := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || body != `{"id":42}` || got != tt.answered {
				t.Errorf("GET: %d %q, Content-Type %q; want 200, the body and %q", resp.StatusCode, body, got, tt.answered)
			}
		})
	}
}

// A client that closes only its writing half while its request waits still reads: it is told
// that the request ended with its connection (503), never sent an empty 200 as if the key
// held nothing.
func TestHalfClosedClientIsNotSentAnEmpty200(t *testing.T) {
	ts := startTestServer(t, nil)
	// This test's first request takes the key's lease: the second waits for its fill.
	if resp, _ := ts.do(t, "GET", "/v1/groups/g/keys/held?lease=10s", ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the lease: %d", resp.StatusCode)
	}
	c, err := net.Dial("tcp", ts.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/groups/g/keys/held?lease=10s&wait=20s HTTP/1.1\r\nHost: corral\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the half-closed client read no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "canceled") {
		t.Fatalf("a request that ended with its client's writing half: %d %q, want 503 and why", resp.StatusCode, body)
	}
}
