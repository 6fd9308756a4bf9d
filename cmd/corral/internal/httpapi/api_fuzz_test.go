package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// errAfter is a body that ends with an error after its bytes, as a request body cut short
// does.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF && e.err != nil {
		err = e.err
	}
	return n, err
}

// FuzzHTTPAPI feeds raw HTTP/1.1 requests to the API's handler — routing, the
// group and key taken from the escaped path, the lease parameters (?lease=&wait=&ttl=&swr=),
// the batch reads' keys (?key=, a POST …/keys:batch body), the token check, bodies over the
// value limit. Whatever the request, the handler does not panic nor answer 5xx; a write
// (PUT, DELETE) without the token gets 401; a PUT answered 204 is what a Get of its key
// returns; a batch read answered 200 is the documented JSON; and the sentinel key of the
// group "pages" keeps its value unless the request writes it.
func FuzzHTTPAPI(f *testing.F) {
	// An API token, and small limits, so that an input can reach them; no origin: its groups
	// hold what is written.
	fa := newTestAPI(f, func(s *apiSetup) {
		s.Token = servetest.Token(f, servetest.FuzzToken)
		s.MaxGroups = 8
		s.GroupOptions = []corral.GroupOption{corral.WithMaxBytes(1 << 20)}
		s.MaxValueBytes = 1 << 10
	})
	var sentinel servetest.Sentinel
	pages, err := fa.groups.Group(fa.a.cfg.Node, "pages")
	if err != nil {
		f.Fatal(err)
	}
	h := fa.a.authorize(fa.a.routes())
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return // the server answers 400 before any handler runs
		}
		body, bodyErr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(&errAfter{bytes.NewReader(body), bodyErr})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r = r.WithContext(ctx)
		want := sentinel.Write(t, ctx, pages)

		w := httptest.NewRecorder()
		h.ServeHTTP(w, r) // the mux records the group and key it matched in r
		if ctx.Err() != nil {
			t.Fatalf("%s %s did not answer within 20 s", r.Method, r.URL)
		}
		res := w.Result()
		what := fmt.Sprintf("%s %s (%d)", r.Method, r.URL, res.StatusCode)
		if res.StatusCode >= 500 {
			t.Fatalf("%s: %s", what, w.Body)
		}
		if res.StatusCode == http.StatusOK && (isBatchRead(r) || strings.HasSuffix(r.URL.Path, "/keys")) {
			var a struct {
				Values  map[string]string          `json:"values"`
				Missing []string                   `json:"missing"`
				Errors  map[string]json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Values == nil || a.Missing == nil || a.Errors == nil {
				t.Fatalf("%s: the batch answer %q is not the documented JSON: %v", what, w.Body, err)
			}
		}
		group, key := r.PathValue("group"), r.PathValue("key")
		write := r.Method == http.MethodPut || r.Method == http.MethodDelete
		if write && res.StatusCode < 300 && !bearer(r.Header.Get("Authorization")) {
			t.Fatalf("%s without the token", what)
		}
		if !(write && res.StatusCode < 300 && group == "pages" && key == servetest.SentinelKey) {
			sentinel.Check(t, ctx, pages, what, want)
		}
		g, _ := fa.groups.Existing(group)
		if g == nil || fill.CheckKey(key) != nil {
			return
		}
		if r.Method == http.MethodPut && res.StatusCode == http.StatusNoContent && !r.URL.Query().Has("ttl") {
			got, err := g.Get(ctx, key)
			if err != nil || !bytes.Equal(got.Body, body) || got.Type != r.Header.Get("Content-Type") {
				t.Fatalf("%s stored %q %q, but %s/%q reads %q %q, %v", what, body, r.Header.Get("Content-Type"), group, key, got.Body, got.Type, err)
			}
		}
		// The next input finds no value nor lease of this one's key.
		var ue *corral.UnreachedError
		if err := g.Remove(ctx, key); err != nil && !errors.As(err, &ue) {
			t.Fatalf("remove %s/%q after %s: %v", group, key, what, err)
		}
	})
}

// bearer is a plain reading of the token rule: "Bearer" in any case, a space, the token.
func bearer(header string) bool {
	scheme, cred, _ := strings.Cut(header, " ")
	return strings.EqualFold(scheme, "bearer") && strings.TrimSpace(cred) == servetest.FuzzToken
}

// httpSeeds are FuzzHTTPAPI's seed corpus: requests as clients send them, and ones that test
// the edges of the path, the query and the headers.
func httpSeeds() []fuzzcorpus.Seed {
	req := func(name, method, target string, header []string, body string) fuzzcorpus.Seed {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: corral:8080\r\n", method, target)
		for _, h := range header {
			b.WriteString(h + "\r\n")
		}
		if body != "" || method == http.MethodPut {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
		}
		b.WriteString("\r\n" + body)
		return fuzzcorpus.Seed{Name: name, Values: []any{[]byte(b.String())}}
	}
	auth := "Authorization: Bearer " + servetest.FuzzToken
	html := "Content-Type: text/html"
	return []fuzzcorpus.Seed{
		req("get", "GET", "/v1/groups/pages/keys/p42", nil, ""),
		req("get-sentinel", "GET", "/v1/groups/pages/keys/"+servetest.SentinelKey, nil, ""),
		req("get-escaped-key", "GET", "/v1/groups/pages/keys/a%2Fb%20c%25%00%FF", nil, ""),
		req("get-dot-key", "GET", "/v1/groups/pages/keys/..", nil, ""),
		req("get-empty-key", "GET", "/v1/groups/pages/keys/", nil, ""),
		req("get-long-key", "GET", "/v1/groups/pages/keys/"+strings.Repeat("k", fill.MaxKeyBytes+1), nil, ""),
		req("get-bad-group", "GET", "/v1/groups/pa%2Fges/keys/p42", nil, ""),
		req("get-new-group", "GET", "/v1/groups/users.v2/keys/u1", nil, ""),
		req("put", "PUT", "/v1/groups/pages/keys/p42", []string{auth, html}, "<h1>42</h1>"),
		req("put-sentinel", "PUT", "/v1/groups/pages/keys/"+servetest.SentinelKey, []string{auth}, "over"),
		req("put-escaped-key", "PUT", "/v1/groups/pages/keys/%E2%9C%93%2F%3F", []string{auth}, "check"),
		req("put-no-token", "PUT", "/v1/groups/pages/keys/"+servetest.SentinelKey, nil, "over"),
		req("put-wrong-token", "PUT", "/v1/groups/pages/keys/p42", []string{"Authorization: Bearer nope"}, "v"),
		req("put-token-lowercase", "PUT", "/v1/groups/pages/keys/p42", []string{"Authorization: bearer  " + servetest.FuzzToken + " "}, "v"),
		req("put-too-large", "PUT", "/v1/groups/pages/keys/p42", []string{auth}, strings.Repeat("x", 1<<10+1)),
		req("put-short-body", "PUT", "/v1/groups/pages/keys/p42", []string{auth, "Content-Length: 100"}, ""),
		req("put-ttl", "PUT", "/v1/groups/pages/keys/p42?ttl=60s&swr=30s", []string{auth}, "v"),
		req("put-ttl-ms", "PUT", "/v1/groups/pages/keys/p42?ttl=60000&swr=0", []string{auth}, "v"),
		req("put-ttl-negative", "PUT", "/v1/groups/pages/keys/p42?ttl=-1s", []string{auth}, "v"),
		req("put-ttl-overflow", "PUT", "/v1/groups/pages/keys/p42?ttl=9223372036854775807", []string{auth}, "v"),
		req("put-ttl-garbage", "PUT", "/v1/groups/pages/keys/p42?ttl=soon&swr=%zz", []string{auth}, "v"),
		req("put-lease", "PUT", "/v1/groups/pages/keys/p42?ttl=60s", []string{auth, LeaseTokenHeader + ": 0123456789abcdef"}, "v"),
		req("delete", "DELETE", "/v1/groups/pages/keys/p42", []string{auth}, ""),
		req("delete-sentinel", "DELETE", "/v1/groups/pages/keys/"+servetest.SentinelKey, []string{auth}, ""),
		req("delete-no-token", "DELETE", "/v1/groups/pages/keys/"+servetest.SentinelKey, nil, ""),
		req("lease", "GET", "/v1/groups/pages/keys/p42?lease=5s", nil, ""),
		req("lease-wait", "GET", "/v1/groups/pages/keys/p42?lease=5000&wait=200ms", nil, ""),
		req("lease-sentinel", "GET", "/v1/groups/pages/keys/"+servetest.SentinelKey+"?lease=1s", nil, ""),
		req("lease-zero", "GET", "/v1/groups/pages/keys/p42?lease=0", nil, ""),
		req("lease-too-long", "GET", "/v1/groups/pages/keys/p42?lease=2h&wait=2m", nil, ""),
		req("lease-garbage", "GET", "/v1/groups/pages/keys/p42?lease=&wait=-5", nil, ""),
		req("lease-repeated", "GET", "/v1/groups/pages/keys/p42?lease=1s&lease=x&wait=1&wait=y", nil, ""),
		req("batch-get", "GET", "/v1/groups/pages/keys?key=p42&key="+servetest.SentinelKey+"&key=p42&key=none", nil, ""),
		req("batch-get-escaped", "GET", "/v1/groups/pages/keys?key=a%2Fb%20c&key=%E2%9C%93&key=%FF", nil, ""),
		req("batch-get-empty-key", "GET", "/v1/groups/pages/keys?key=", nil, ""),
		req("batch-get-no-key", "GET", "/v1/groups/pages/keys?keys=p42", nil, ""),
		req("batch-get-new-group", "GET", "/v1/groups/users.v2/keys?key=u1", nil, ""),
		req("batch-post", "POST", "/v1/groups/pages/keys:batch", []string{"Content-Type: application/json"}, `{"keys": ["p42", "`+servetest.SentinelKey+`", "none", "p42"]}`),
		req("batch-post-token", "POST", "/v1/groups/users.v2/keys:batch", []string{auth}, `{"keys": ["u1"]}`),
		req("batch-post-escapes", "POST", "/v1/groups/pages/keys:batch", nil, `{"keys": ["\u0000\ud800", "a\"b", "\u00ff"]}`),
		req("batch-post-not-json", "POST", "/v1/groups/pages/keys:batch", nil, `{"keys": "p42"`),
		req("batch-post-too-large", "POST", "/v1/groups/pages/keys:batch", nil, `{"keys": ["`+strings.Repeat("k", 1<<10)+`"]}`),
		req("batch-post-long-key", "POST", "/v1/groups/pages/keys:batch", nil, `{"keys": ["`+strings.Repeat("k", 1000)+`", ""]}`),
		req("cluster", "GET", "/v1/cluster?key=p42", nil, ""),
		req("cluster-empty-key", "GET", "/v1/cluster?key=%20", nil, ""),
		req("readyz", "GET", "/readyz", nil, ""),
		req("debug-state", "GET", "/debug/corral/state", nil, ""),
		req("debug-asset", "GET", "/debug/corral/assets/../../etc/passwd", nil, ""),
		req("post", "POST", "/v1/groups/pages/keys/p42", []string{auth}, "v"),
		req("absolute-form", "GET", "http://corral:8080/v1/groups/pages/keys/p42", nil, ""),
		req("double-slash", "GET", "//v1/groups/pages/keys/p42", nil, ""),
	}
}
