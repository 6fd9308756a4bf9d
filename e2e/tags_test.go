package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// taggingOrigin answers /items/<key> with "<key>@<generation>" and a Surrogate-Key naming the
// customer the key belongs to (the digits after "c", up to "-") and the key's own tag;
// bump moves every key to the next generation.
type taggingOrigin struct {
	*httptest.Server
	mu  sync.Mutex
	gen int
}

func newTaggingOrigin(tb testing.TB) *taggingOrigin {
	o := &taggingOrigin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.EscapedPath(), "/items/")
		customer, _, _ := strings.Cut(key, "-")
		o.mu.Lock()
		gen := o.gen
		o.mu.Unlock()
		w.Header().Set("Surrogate-Key", "customer:"+customer+" item:"+key)
		fmt.Fprintf(w, "%s@%d", key, gen)
	}))
	tb.Cleanup(o.Close)
	return o
}

func (o *taggingOrigin) bump() {
	o.mu.Lock()
	o.gen++
	o.mu.Unlock()
}

// getTagged returns a GET's status, body and Surrogate-Key.
func getTagged(tb testing.TB, p *proc, path string) (int, string, string) {
	tb.Helper()
	resp, err := http.Get(p.url(path))
	if err != nil {
		tb.Fatalf("GET %s on %s: %v", path, p.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Surrogate-Key")
}

// An origin tags its answers with Surrogate-Key; DELETE /v1/tags/{tag} on any node then
// removes, on every node, every entry stored with the tag before it — and nothing else — and
// the next reads fetch the origin's new values. A PUT tagged with Surrogate-Key is purged the
// same way, and a value tagged after the purge is served.
func TestServeTags(t *testing.T) {
	origin := newTaggingOrigin(t)
	nodes := startCluster(t, 3, "--origin", origin.URL+"/items/{key}", "--ttl", "1h")
	keys := []string{"c7-a", "c7-b", "c7-c", "c8-a", "c8-b"}
	// Read every key on every node, twice: owners fill, the others keep near copies.
	for range 2 {
		for _, n := range nodes {
			for _, k := range keys {
				code, body, tags := getTagged(t, n, "/v1/groups/items/keys/"+k)
				if code != 200 || body != k+"@0" {
					t.Fatalf("GET %s on %s = %d %q", k, n.Name, code, body)
				}
				if want := "customer:" + strings.Split(k, "-")[0] + " item:" + k; tags != want {
					t.Fatalf("GET %s on %s: Surrogate-Key %q, want %q", k, n.Name, tags, want)
				}
			}
		}
	}
	if code, _ := nodes[0].do(t, "PUT", "/v1/groups/items/keys/put-1", "written"); code != 204 {
		t.Fatalf("untagged PUT = %d", code)
	}
	req, _ := http.NewRequest("PUT", nodes[1].url("/v1/groups/items/keys/put-7"), strings.NewReader("written"))
	req.Header.Set("Surrogate-Key", "customer:c7")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("tagged PUT = %v, %v", resp, err)
	}
	origin.bump()
	if code, body := nodes[2].do(t, "DELETE", "/v1/tags/customer:c7", ""); code != 204 {
		t.Fatalf("DELETE /v1/tags/customer:c7 = %d %q", code, body)
	}
	for _, n := range nodes {
		for _, k := range keys {
			want := k + "@0" // not purged
			if strings.HasPrefix(k, "c7-") {
				want = k + "@1"
			}
			if code, body, _ := getTagged(t, n, "/v1/groups/items/keys/"+k); code != 200 || body != want {
				t.Fatalf("after the purge, GET %s on %s = %d %q, want %q", k, n.Name, code, body, want)
			}
		}
		if _, body, _ := getTagged(t, n, "/v1/groups/items/keys/put-7"); body == "written" {
			t.Fatalf("after the purge, %s serves the tagged PUT's value", n.Name)
		}
		if _, body, _ := getTagged(t, n, "/v1/groups/items/keys/put-1"); body != "written" {
			t.Fatalf("after the purge, %s lost the untagged PUT's value: %q", n.Name, body)
		}
	}
	// Filled again after the purge, with the tag: served, and purged by the next purge.
	origin.bump()
	for _, n := range nodes {
		if _, body, _ := getTagged(t, n, "/v1/groups/items/keys/c7-a"); body != "c7-a@1" {
			t.Fatalf("the value filled after the purge is not kept on %s: %q", n.Name, body)
		}
	}
	if code, _ := nodes[0].do(t, "DELETE", "/v1/tags/customer:c7", ""); code != 204 {
		t.Fatalf("second purge = %d", code)
	}
	if _, body, _ := getTagged(t, nodes[1], "/v1/groups/items/keys/c7-a"); body != "c7-a@2" {
		t.Fatalf("after the second purge: %q", body)
	}
	// A malformed tag is refused with its reason.
	if code, body := nodes[0].do(t, "DELETE", "/v1/tags/"+strings.Repeat("x", 300), ""); code != 400 {
		t.Fatalf("DELETE of a 300-byte tag = %d %q, want 400", code, body)
	}
}

// The Redis protocol: SET and FILLSET take TAGS, DELTAG purges; redis-cli drives it.
func TestServeTagsRESP(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed (Debian: redis-tools)")
	}
	nodes := startLeaseCluster(t, 2)
	_, port, _ := strings.Cut(nodes[1].RESP, ":")
	redis := func(args ...string) string {
		out, err := exec.Command(cli, append([]string{"-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := redis("SET", "k1", "v1", "TAGS", "team:a", "x"); got != "OK" {
		t.Fatalf("SET … TAGS = %q", got)
	}
	if got := redis("SET", "k2", "v2", "EX", "3600", "TAGS", "team:b"); got != "OK" {
		t.Fatalf("SET … EX … TAGS = %q", got)
	}
	if got := redis("DELTAG", "team:a"); got != "1" {
		t.Fatalf("DELTAG = %q", got)
	}
	waitFor(t, "k1 purged", 10*time.Second, func() bool { return redis("GET", "k1") == "" })
	if got := redis("GET", "k2"); got != "v2" {
		t.Fatalf("GET k2 after purging another tag = %q", got)
	}
}
