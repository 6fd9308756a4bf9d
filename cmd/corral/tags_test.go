package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// An origin's Surrogate-Key tags what corral serve fills from it; a PUT's Surrogate-Key tags
// what it writes; a GET answers the entry's tags in Surrogate-Key, and ?peek its lifetime
// without filling; DELETE /v1/tags/{tag} purges them (204), with a token like every write.
func TestHTTPTags(t *testing.T) {
	var gen atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/items/")
		w.Header().Set("Surrogate-Key", "customer:"+key[:1]+" all")
		fmt.Fprintf(w, "%s@%d", key, gen.Load())
	}))
	defer origin.Close()
	tokenFile := writeTokenFile(t, "s3cret")
	td := startTestDaemon(t, func(c *serveConfig) {
		c.origin = origin.URL + "/items/{key}"
		c.apiTokenFile = tokenFile
	})
	auth := []string{"Authorization", "Bearer s3cret"}
	resp, body := td.do(t, "GET", "/v1/groups/items/keys/7a", "", auth...)
	if resp.StatusCode != 200 || body != "7a@0" || resp.Header.Get("Surrogate-Key") != "customer:7 all" {
		t.Fatalf("GET 7a = %d %q, Surrogate-Key %q", resp.StatusCode, body, resp.Header.Get("Surrogate-Key"))
	}
	td.do(t, "GET", "/v1/groups/items/keys/8a", "", auth...)
	// The debug page lists a hot key's tags.
	for range 3 {
		td.do(t, "GET", "/v1/groups/items/keys/7a", "", auth...)
	}
	if _, state := td.do(t, "GET", "/debug/corral/state", "", auth...); !strings.Contains(state, `"hot_tags":{"7a":["customer:7","all"]`) {
		t.Fatalf("the debug page's state lists no tags of hot key 7a: %s", state)
	}
	var out strings.Builder
	if err := inspectEntry(t.Context(), td.http, "items", "7a", &out); err != nil || !strings.Contains(out.String(), "tags: customer:7 all") {
		t.Fatalf("corral inspect --key 7a --group items: %v\n%s", err, out.String())
	}
	resp, body = td.do(t, "GET", "/v1/groups/items/keys/7a?peek", "", auth...)
	if resp.StatusCode != 200 || body != "7a@0" || resp.Header.Get("Surrogate-Key") != "customer:7 all" || resp.Header.Get("X-Corral-Fresh-For") == "" {
		t.Fatalf("GET ?peek = %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ := td.do(t, "GET", "/v1/groups/items/keys/9z?peek", "", auth...); resp.StatusCode != 404 {
		t.Fatalf("GET ?peek of a key nobody holds = %d, want 404 (and no fill)", resp.StatusCode)
	}
	if resp, _ := td.do(t, "PUT", "/v1/groups/items/keys/put7", "written", append(auth, "Surrogate-Key", "customer:7")...); resp.StatusCode != 204 {
		t.Fatalf("tagged PUT = %d", resp.StatusCode)
	}
	if resp, _ := td.do(t, "DELETE", "/v1/tags/customer:7", ""); resp.StatusCode != 401 {
		t.Fatalf("DELETE /v1/tags without the token = %d, want 401", resp.StatusCode)
	}
	gen.Store(1)
	if resp, body := td.do(t, "DELETE", "/v1/tags/customer:7", "", auth...); resp.StatusCode != 204 {
		t.Fatalf("DELETE /v1/tags/customer:7 = %d %q", resp.StatusCode, body)
	}
	for key, want := range map[string]string{"7a": "7a@1", "8a": "8a@0"} {
		if _, body := td.do(t, "GET", "/v1/groups/items/keys/"+key, "", auth...); body != want {
			t.Fatalf("GET %s after the purge = %q, want %q", key, body, want)
		}
	}
	if _, body := td.do(t, "GET", "/v1/groups/items/keys/put7", "", auth...); body == "written" {
		t.Fatal("the tagged PUT's value survived the purge")
	}
	if resp, body := td.do(t, "DELETE", "/v1/tags/"+strings.Repeat("x", 300), "", auth...); resp.StatusCode != 400 || !strings.Contains(body, "tag") {
		t.Fatalf("DELETE of a 300-byte tag = %d %q, want 400", resp.StatusCode, body)
	}
	if resp, _ := td.do(t, "PUT", "/v1/groups/items/keys/bad", "v", append(auth, "Surrogate-Key", strings.Repeat("t ", 40))...); resp.StatusCode != 400 {
		t.Fatalf("PUT with 40 tags = %d, want 400", resp.StatusCode)
	}
	if resp, _ := td.do(t, "DELETE", "/v1/tags/all", "", auth...); resp.StatusCode != 204 {
		t.Fatalf("DELETE /v1/tags/all = %d", resp.StatusCode)
	}
	if _, body := td.do(t, "GET", "/v1/groups/items/keys/8a", "", auth...); body != "8a@1" {
		t.Fatalf("GET 8a after purging all = %q", body)
	}
}
