package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/batch"
	"github.com/corralcache/corral/cmd/corral/internal/origin"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/fill"
)

// batchAnswer is the JSON answer of a batch read, as a client decodes it.
type batchAnswer struct {
	Values  map[string]string `json:"values"`
	Missing []string          `json:"missing"`
	Errors  map[string]struct {
		Status int    `json:"status"`
		Error  string `json:"error"`
	} `json:"errors"`
}

// decodeBatch decodes a 200 answer of a batch read, and its values from base64.
func decodeBatch(tb testing.TB, resp *http.Response, body string) (batchAnswer, map[string]string) {
	tb.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		tb.Fatalf("batch read: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var a batchAnswer
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		tb.Fatalf("the answer %q is not the documented JSON: %v", body, err)
	}
	if a.Values == nil || a.Missing == nil || a.Errors == nil {
		tb.Fatalf("the answer %q leaves a member out (or null)", body)
	}
	values := map[string]string{}
	for k, v := range a.Values {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			tb.Fatalf("value of %q, %q, is not standard base64: %v", k, v, err)
		}
		values[k] = string(b)
	}
	return a, values
}

// batchGet is the query of GET …/keys for keys.
func batchGet(group string, keys ...string) string {
	q := url.Values{"key": keys}
	return "/v1/groups/" + group + "/keys?" + q.Encode()
}

// batchPost is the body of POST …/keys:batch for keys.
func batchPost(keys ...string) string {
	b, _ := json.Marshal(map[string][]string{"keys": keys})
	return string(b)
}

// Both forms answer alike: each key found with its bytes exact, in base64; each key not found
// once, in the order asked; nothing failed.
func TestBatchRead(t *testing.T) {
	ts := startTestServer(t, nil)
	stored := map[string]string{"a": "alpha", "b": "\x00\xff\r\n binary \x80", "ü/€ ?&=": `{"id": 7}`}
	for k, v := range stored {
		if resp, _ := ts.do(t, "PUT", "/v1/groups/items/keys/"+url.PathEscape(k), v); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT %q: %d", k, resp.StatusCode)
		}
	}
	keys := []string{"a", "none", "b", "a", "ü/€ ?&=", "gone", "none"}
	getResp, getBody := ts.do(t, "GET", batchGet("items", keys...), "")
	postResp, postBody := ts.do(t, "POST", "/v1/groups/items/keys:batch", batchPost(keys...), "Content-Type", "application/json")
	if getBody != postBody {
		t.Errorf("GET and POST answer differently:\n%s\n%s", getBody, postBody)
	}
	for _, r := range []struct {
		resp *http.Response
		body string
	}{{getResp, getBody}, {postResp, postBody}} {
		a, values := decodeBatch(t, r.resp, r.body)
		if len(values) != len(stored) {
			t.Errorf("values %q, want %q", values, stored)
		}
		for k, v := range stored {
			if values[k] != v {
				t.Errorf("value of %q = %q, want %q", k, values[k], v)
			}
		}
		if want := []string{"none", "gone"}; !slices.Equal(a.Missing, want) || len(a.Errors) != 0 {
			t.Errorf("missing %q, errors %v; want %q and none", a.Missing, a.Errors, want)
		}
	}
	// The values are written in the order first asked.
	if i, j := strings.Index(getBody, `"a":`), strings.Index(getBody, `"b":`); i < 0 || j < i {
		t.Errorf("values out of order: %s", getBody)
	}
	// An empty list is an empty answer.
	resp, body := ts.do(t, "POST", "/v1/groups/items/keys:batch", `{"keys": []}`)
	if a, values := decodeBatch(t, resp, body); len(values) != 0 || len(a.Missing) != 0 {
		t.Errorf("an empty batch: %s", body)
	}
}

// With an origin: each key asked for is fetched once, however often the batch names it; the
// origin's 404 is missing, its failure an error with the status and reason a GET of the key
// would answer; a key the origin cannot be asked for refuses the batch and nothing is fetched.
func TestBatchReadThroughTheOrigin(t *testing.T) {
	var mu sync.Mutex
	fetched := map[string]int{}
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/items/")
		mu.Lock()
		fetched[key]++
		mu.Unlock()
		switch key {
		case "missing":
			http.NotFound(w, r)
		case "down":
			http.Error(w, "down", http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, "item "+key)
		}
	}))
	defer o.Close()
	orig, err := origin.New(origin.Config{Template: o.URL + "/items/{key}", FillTimeout: 5 * time.Second, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ts := startTestServer(t, func(s *apiSetup) { s.Origin = orig })
	resp, body := ts.do(t, "GET", batchGet("items", "1", "missing", "down", "2", "1", "down"), "")
	a, values := decodeBatch(t, resp, body)
	if values["1"] != "item 1" || values["2"] != "item 2" || len(values) != 2 || !slices.Equal(a.Missing, []string{"missing"}) {
		t.Errorf("answer %s", body)
	}
	if e, ok := a.Errors["down"]; !ok || len(a.Errors) != 1 || e.Status != http.StatusBadGateway || e.Error != "origin answered 503 Service Unavailable" {
		t.Errorf("errors %+v, want down: 502, origin answered 503 Service Unavailable", a.Errors)
	}
	mu.Lock()
	for _, k := range []string{"1", "2", "missing", "down"} {
		if fetched[k] != 1 {
			t.Errorf("%q fetched %d times, want once", k, fetched[k])
		}
	}
	mu.Unlock()
	resp, body = ts.do(t, "GET", batchGet("items", "3", ".."), "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `key 2 of 2: key ".." cannot be sent to the origin`) {
		t.Errorf("a dot segment: %d %q", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if fetched["3"] != 0 {
		t.Error("a refused batch fetched its good key")
	}
}

// What a batch read refuses, whole, with a status and a reason that say what is wrong; each
// refusal reads nothing, and counts.
func TestBatchRefusals(t *testing.T) {
	ts := startTestServer(t, func(s *apiSetup) {
		s.MaxValueBytes = 64 << 10
		s.Limits.MaxHeaderBytes = 8 << 10
	})
	if resp, _ := ts.do(t, "PUT", "/v1/groups/items/keys/k", "v"); resp.StatusCode != http.StatusNoContent {
		t.Fatal("PUT k")
	}
	tooMany := make([]string, batch.MaxKeys+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint(i)
	}
	tests := []struct {
		name, method, path, body string
		code                     int
		says                     string
		limit                    string // the limit counted, if any
	}{
		{"no key", "GET", "/v1/groups/items/keys", "", 400, "no keys: name them as ?key=a&key=b", ""},
		{"no key in the query", "GET", "/v1/groups/items/keys?peek", "", 400, "no keys", ""},
		{"no keys member", "POST", "/v1/groups/items/keys:batch", `{}`, 400, "no keys", ""},
		{"an empty key", "GET", "/v1/groups/items/keys?key=k&key=", "", 400, "batch refused: key 2 of 2: empty key", "batch"},
		{"a long key", "POST", "/v1/groups/items/keys:batch", batchPost("k", strings.Repeat("x", fill.MaxKeyBytes+1)), 400, "key of 4097 bytes exceeds the key limit of 4096 bytes", "batch"},
		{"too many keys", "POST", "/v1/groups/items/keys:batch", batchPost(tooMany...), 413, "exceeds the limit of 65536 bytes of a batch read's keys", "body"},
		{"a key that is not UTF-8", "GET", "/v1/groups/items/keys?key=k&key=%FF", "", 400, `key 2 of 2 ("\xff") is not UTF-8`, "batch"},
		{"a body that is not UTF-8", "POST", "/v1/groups/items/keys:batch", "{\"keys\": [\"\xff\"]}", 400, "body is not UTF-8", ""},
		{"a body that is not JSON", "POST", "/v1/groups/items/keys:batch", "k1,k2", 400, `want {"keys": ["a", "b"]}`, ""},
		{"keys that are not strings", "POST", "/v1/groups/items/keys:batch", `{"keys": [1, 2]}`, 400, "cannot unmarshal number", ""},
		{"an unknown member", "POST", "/v1/groups/items/keys:batch", `{"keys": ["k"], "ttl": 5}`, 400, `unknown field "ttl"`, ""},
		{"two values", "POST", "/v1/groups/items/keys:batch", `{"keys": ["k"]} {"keys": ["k"]}`, 400, "more than one JSON value", ""},
		{"a bad query", "GET", "/v1/groups/items/keys?key=%zz", "", 400, "query: invalid URL escape", ""},
		{"a URL past the header limit", "GET", batchGet("items", tooMany[:2000]...), "", 431, "exceed the limit of 8192 bytes", "header"},
		{"a GET of the POST's path", "GET", "/v1/groups/items/keys:batch", "", 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ts.limitHits(tt.limit)
			resp, body := ts.do(t, tt.method, tt.path, tt.body)
			if resp.StatusCode != tt.code || !strings.Contains(body, tt.says) {
				t.Fatalf("%d %q, want %d saying %q", resp.StatusCode, body, tt.code, tt.says)
			}
			if tt.limit != "" {
				if got := ts.limitHits(tt.limit); got != before+1 {
					t.Errorf("%s hits grew by %v, want 1", tt.limit, got-before)
				}
			}
		})
	}
	// The bound itself, in a body that fits: 10001 keys are refused, 10000 read.
	ts2 := startTestServer(t, nil)
	resp, body := ts2.do(t, "POST", "/v1/groups/items/keys:batch", batchPost(tooMany...))
	if resp.StatusCode != 400 || !strings.Contains(body, "10001 keys in one batch read exceed the limit of 10000 keys") {
		t.Fatalf("10001 keys: %d %q", resp.StatusCode, body)
	}
	if got := ts2.limitHits("batch"); got != 1 {
		t.Errorf("batch hits = %v, want 1", got)
	}
	resp, body = ts2.do(t, "POST", "/v1/groups/items/keys:batch", batchPost(tooMany[:batch.MaxKeys]...))
	if a, _ := decodeBatch(t, resp, body); len(a.Missing) != batch.MaxKeys {
		t.Fatalf("10000 keys: %d missing, want all", len(a.Missing))
	}
}

// A batch read is a read, in both forms: with a token it is open but for --api-token-reads,
// and without the token it serves only a group that exists, creating none.
func TestBatchReadToken(t *testing.T) {
	for _, reads := range []bool{false, true} {
		t.Run(fmt.Sprint("reads=", reads), func(t *testing.T) {
			ts := startTestServer(t, func(s *apiSetup) { s.Token, s.TokenReads = servetest.Token(t, "s3cret"), reads })
			auth := []string{"Authorization", "Bearer s3cret"}
			if resp, _ := ts.do(t, "PUT", "/v1/groups/items/keys/k", "v", auth...); resp.StatusCode != http.StatusNoContent {
				t.Fatal("PUT k")
			}
			want := http.StatusOK
			if reads {
				want = http.StatusUnauthorized
			}
			for _, req := range [][3]string{{"GET", batchGet("items", "k"), ""}, {"POST", "/v1/groups/items/keys:batch", batchPost("k")}} {
				if resp, body := ts.do(t, req[0], req[1], req[2]); resp.StatusCode != want {
					t.Errorf("%s %s without the token: %d %q, want %d", req[0], req[1], resp.StatusCode, body, want)
				}
				resp, body := ts.do(t, req[0], req[1], req[2], auth...)
				if _, values := decodeBatch(t, resp, body); values["k"] != "v" {
					t.Errorf("%s %s with the token: %q", req[0], req[1], body)
				}
			}
			if !reads {
				for _, req := range [][3]string{{"GET", batchGet("junk", "k"), ""}, {"POST", "/v1/groups/junk/keys:batch", batchPost("k")}} {
					if resp, body := ts.do(t, req[0], req[1], req[2]); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no group") {
						t.Errorf("%s %s of a new group without the token: %d %q", req[0], req[1], resp.StatusCode, body)
					}
				}
				if _, ok := ts.groups.Existing("junk"); ok {
					t.Error("a batch read without the token created a group")
				}
			}
		})
	}
}
