package debugui

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sampleState has a key and a member name that would run as script if they were ever
// written as markup, and a key with bytes that are not UTF-8.
func sampleState() State {
	return State{
		Self:      "node-a",
		Epoch:     7,
		Ready:     true,
		StartedAt: time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC),
		Members: []Member{
			{Name: "node-a", GossipAddr: "10.0.0.1:7946", PeerAddr: "10.0.0.1:7947", Share: 0.5, Self: true, Status: "alive"},
			{Name: "node-b<img src=x onerror=alert(1)>", GossipAddr: "10.0.0.2:7946", PeerAddr: "10.0.0.2:7947", Share: 0.25, Status: "suspect"},
			{Name: "node-c", GossipAddr: "10.0.0.3:7946", PeerAddr: "10.0.0.3:7947", Share: 0.25, Status: "leaving"},
		},
		Groups: []Group{{
			Name: "users", Gets: 1000, Fills: 10, Coalesced: 90, StaleServed: 3, NearHits: 40, FillErrors: 1,
			Entries: 10, Bytes: 4096,
			HotKeys: []string{"user:42", "<script>alert(1)</script>", "tab\there"},
		}},
	}
}

func get(tb testing.TB, h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandlerRoutes(t *testing.T) {
	h := Handler("/debug/corral", sampleState)
	tests := []struct {
		name, method, path string
		code               int
		contentType        string // prefix of the Content-Type; "" = not checked
	}{
		{"page", "GET", "/debug/corral", 200, "text/html; charset=utf-8"},
		{"page with slash", "GET", "/debug/corral/", 200, "text/html; charset=utf-8"},
		{"page head", "HEAD", "/debug/corral", 200, "text/html; charset=utf-8"},
		{"state", "GET", "/debug/corral/state", 200, "application/json"},
		{"script", "GET", "/debug/corral/assets/debug.js", 200, "text/javascript; charset=utf-8"},
		{"style", "GET", "/debug/corral/assets/debug.css", 200, "text/css; charset=utf-8"},
		{"icon", "GET", "/debug/corral/assets/favicon.svg", 200, "image/svg+xml"},
		{"no such asset", "GET", "/debug/corral/assets/nope.js", 404, ""},
		{"template is not an asset", "GET", "/debug/corral/assets/page.html", 404, ""},
		{"no such path", "GET", "/debug/corral/other", 404, ""},
		{"outside prefix", "GET", "/debug/corralx", 404, ""},
		{"post state", "POST", "/debug/corral/state", 405, ""},
		{"delete page", "DELETE", "/debug/corral", 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(t, h, tt.method, tt.path)
			if rec.Code != tt.code {
				t.Fatalf("%s %s: status %d, want %d; body %q", tt.method, tt.path, rec.Code, tt.code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); tt.contentType != "" && ct != tt.contentType {
				t.Errorf("%s %s: Content-Type %q, want %q", tt.method, tt.path, ct, tt.contentType)
			}
			if tt.code == 200 {
				if got := rec.Header().Get("Content-Security-Policy"); got != csp {
					t.Errorf("Content-Security-Policy %q, want %q", got, csp)
				}
				if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
					t.Errorf("X-Content-Type-Options %q, want nosniff", got)
				}
			}
			if tt.code == 405 && rec.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("405 without Allow: GET, HEAD; got %q", rec.Header().Get("Allow"))
			}
		})
	}
}

var assetRef = regexp.MustCompile(`(?:src|href)="([^"]+)"`)

// The page's every script, style and icon is served by the handler itself from the embedded
// files, byte for byte, and none of the files points anywhere else.
func TestAssetsEmbedded(t *testing.T) {
	h := Handler("/debug/corral", sampleState)
	page := get(t, h, "GET", "/debug/corral").Body.String()

	var refs []string
	for _, m := range assetRef.FindAllStringSubmatch(page, -1) {
		refs = append(refs, m[1])
	}
	want := []string{
		"/debug/corral/assets/favicon.svg", "/debug/corral/assets/debug.css",
		"/debug/corral/assets/debug.js", "/debug/corral/state", "/debug/corral/state",
	}
	if !reflect.DeepEqual(refs, want) {
		t.Fatalf("page references %q, want %q", refs, want)
	}
	for _, ref := range refs[:3] {
		rec := get(t, h, "GET", ref)
		name := strings.TrimPrefix(ref, "/debug/corral/assets/")
		embedded, err := staticFS.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code != 200 || rec.Body.String() != string(embedded) {
			t.Errorf("GET %s: status %d, %d bytes; want 200 and the %d embedded bytes", ref, rec.Code, rec.Body.Len(), len(embedded))
		}
	}
	if len(assets) != 3 {
		t.Errorf("%d embedded assets, want 3 (favicon.svg, debug.css, debug.js): %v", len(assets), assets)
	}

	// Nothing from the network: no URL but the SVG namespace, no @import, no web font.
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|@font-face`)
	files := map[string]string{"page.html": pageHTML}
	for name, a := range assets {
		files[name] = string(a.body)
	}
	for name, body := range files {
		for _, m := range external.FindAllString(body, -1) {
			if m != "http://www.w3.org" {
				t.Errorf("%s refers to %q: the page must work with no network", name, m)
			}
		}
	}
}

func TestPrefix(t *testing.T) {
	tests := []struct {
		name, prefix, page, script, state string
	}{
		{"trailing slash ignored", "/x/y/", "/x/y", "/x/y/assets/debug.js", "/x/y/state"},
		{"root", "", "/", "/assets/debug.js", "/state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Handler(tt.prefix, sampleState)
			page := get(t, h, "GET", tt.page)
			if page.Code != 200 {
				t.Fatalf("GET %s: %d", tt.page, page.Code)
			}
			body := page.Body.String()
			if !strings.Contains(body, `src="`+tt.script+`"`) || !strings.Contains(body, `data-state="`+tt.state+`"`) {
				t.Errorf("page does not point at %s and %s:\n%s", tt.script, tt.state, body)
			}
			for _, p := range []string{tt.script, tt.state} {
				if rec := get(t, h, "GET", p); rec.Code != 200 {
					t.Errorf("GET %s: %d", p, rec.Code)
				}
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	var calls atomic.Int64
	want := sampleState()
	h := Handler("/debug/corral", func() State { calls.Add(1); return want })

	for i := 1; i <= 2; i++ {
		rec := get(t, h, "GET", "/debug/corral/state")
		if rec.Code != 200 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", cc)
		}
		// encoding/json escapes <, > and &, so the body holds no markup even as text.
		if strings.Contains(rec.Body.String(), "<script>") {
			t.Errorf("state JSON holds a literal <script>: %s", rec.Body)
		}
		var got State
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("decode: %v\n%s", err, rec.Body)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
		if n := calls.Load(); n != int64(i) {
			t.Errorf("after %d requests state was called %d times; want once per request", i, n)
		}
	}
}

// The JSON names are the contract with the script (and with anyone scripting /state).
func TestStateJSONNames(t *testing.T) {
	b, err := json.Marshal(sampleState())
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	var nested struct {
		Members []map[string]json.RawMessage `json:"members"`
		Groups  []map[string]json.RawMessage `json:"groups"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &nested); err != nil {
		t.Fatal(err)
	}
	js := string(scriptJS(t))
	tests := []struct {
		name string
		got  map[string]json.RawMessage
		want []string
	}{
		{"state", top, []string{"self", "epoch", "ready", "started_at", "members", "groups"}},
		{"member", nested.Members[0], []string{"name", "gossip_addr", "peer_addr", "share", "self", "status"}},
		{"group", nested.Groups[0], []string{"name", "gets", "fills", "coalesced", "stale_served", "near_hits", "fill_errors", "entries", "bytes", "hot_keys"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for k := range tt.got {
				got = append(got, k)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("JSON fields %q, want %q", got, want)
			}
			for _, f := range tt.want {
				if !strings.Contains(js, f) {
					t.Errorf("debug.js never reads %q", f)
				}
			}
		})
	}
}

func scriptJS(tb testing.TB) []byte {
	tb.Helper()
	b, err := staticFS.ReadFile("static/debug.js")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestStateUnencodable(t *testing.T) {
	st := sampleState()
	st.Members[1].Share = math.NaN()
	rec := get(t, Handler("/debug/corral", func() State { return st }), "GET", "/debug/corral/state")
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "encode state") {
		t.Fatalf("NaN share: status %d body %q; want 500 naming the encoding", rec.Code, rec.Body)
	}
}

// A key such as "<script>…" must be shown, not run. The browser test checks it in a real
// page; here the script is held to writing text only, and the page to running no inline
// script.
func TestScriptWritesTextOnly(t *testing.T) {
	js := string(scriptJS(t))
	if !strings.Contains(js, ".textContent = ") {
		t.Error("debug.js does not write text with textContent")
	}
	// Sinks that parse a string as markup or code, and the one attribute that would carry
	// inline style past the CSP.
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
		"eval(", "new Function", "setAttribute('style'", `setAttribute("style"`, "setAttribute('on"} {
		if strings.Contains(js, sink) {
			t.Errorf("debug.js uses %s", sink)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q must allow this origin's scripts only", csp)
	}
	if regexp.MustCompile(`<script>|<script\s[^>]*>[^<]`).MatchString(pageHTML) {
		t.Error("page.html has an inline script; the CSP would block it")
	}
}

func TestAssetRevalidation(t *testing.T) {
	h := Handler("/debug/corral", sampleState)
	first := get(t, h, "GET", "/debug/corral/assets/debug.js")
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("asset headers %v: want an ETag and Cache-Control: no-cache", first.Header())
	}
	if again := get(t, h, "GET", "/debug/corral/assets/debug.js", "If-None-Match", etag); again.Code != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag: %d, want 304", again.Code)
	}
}
