package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/clustertest"
)

// countingOrigin is an HTTP origin that counts its fetches by key: /items/{key} answers
// "item {key}", and 404 for a key that begins with "gone".
type countingOrigin struct {
	*httptest.Server
	mu      sync.Mutex
	fetched map[string]int
}

func startCountingOrigin(tb testing.TB) *countingOrigin {
	tb.Helper()
	o := &countingOrigin{fetched: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/items/")
		o.mu.Lock()
		o.fetched[key]++
		o.mu.Unlock()
		if strings.HasPrefix(key, "gone") {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "item "+key)
	}))
	tb.Cleanup(o.Close)
	return o
}

// fetches returns how often each of keys was fetched, and the fetches of all keys.
func (o *countingOrigin) fetches(keys []string) (each map[string]int, total int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	each = map[string]int{}
	for _, k := range keys {
		each[k] = o.fetched[k]
	}
	for _, n := range o.fetched {
		total += n
	}
	return each, total
}

// startServeCluster starts size corral serve daemons in this process, each with mod's
// changes, joined to the first, and waits until each sees them all.
func startServeCluster(tb testing.TB, size int, mod func(*serveConfig)) []*testDaemon {
	tb.Helper()
	var ds []*testDaemon
	for i := range size {
		ds = append(ds, startTestDaemon(tb, func(c *serveConfig) {
			c.name = fmt.Sprint("n", i)
			if i > 0 {
				c.join = listFlag{ds[0].d.node.GossipAddr()}
			}
			mod(c)
		}))
	}
	for _, d := range ds {
		clustertest.Eventually(tb, d.d.node.Name()+" to see the cluster", func() bool { return len(d.d.node.Members()) == size })
	}
	return ds
}

// mgetReply is the RESP2 reply of an MGET of keys from countingOrigin: each value, or nil for
// a key that is gone.
func mgetReply(keys []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(keys))
	for _, k := range keys {
		if strings.HasPrefix(k, "gone") {
			b.WriteString("$-1\r\n")
		} else {
			b.WriteString(servetest.Bulk("item " + k))
		}
	}
	return b.String()
}

// On a 3-node corral serve cluster in front of an origin (--negative-ttl on): one MGET of 100 keys through one
// node fetches each key from the origin once (the keys the node does not own asked of their
// owners in one batch request per owner); an HTTP batch read of them and 50 more through
// another node fetches only the 50; and MGETs of 100 cold keys from every node at once, and a
// POST …/keys:batch of them, still fetch each key once in the cluster.
func TestServeBatchReadsFetchEachKeyOnce(t *testing.T) {
	o := startCountingOrigin(t)
	ds := startServeCluster(t, 3, func(c *serveConfig) {
		c.origin = o.URL + "/items/{key}"
		c.negativeTTL = time.Minute // a 404 is remembered, as a value is: fetched once too
	})

	page := make([]string, 100)
	for i := range page {
		page[i] = fmt.Sprint("p1-", i)
	}
	page[7], page[42] = "gone-7", "gone-42"
	rc := servetest.DialRESP(t, ds[0].resp)
	if got, want := rc.Do(t, append([]string{"MGET"}, page...)...), mgetReply(page); got != want {
		t.Fatalf("MGET of 100 keys = %.200q…, want %.200q…", got, want)
	}
	each, total := o.fetches(page)
	for k, n := range each {
		if n != 1 {
			t.Errorf("%q fetched %d times, want once", k, n)
		}
	}
	if total != len(page) {
		t.Errorf("the origin was asked %d times for one MGET of %d keys", total, len(page))
	}
	batches := clustertest.MetricWithLabel(t, ds[0].d.reg, "corral_batch_requests_total", "resp")
	keysSent := clustertest.MetricWithLabel(t, ds[0].d.reg, "corral_batch_request_keys_total", "resp")
	t.Logf("node 0 sent %v batch requests of %v keys for the MGET", batches, keysSent)
	if batches < 1 || batches > 2 || keysSent < 1 {
		t.Errorf("node 0 sent %v batch requests (%v keys) for one MGET: want one per other owner", batches, keysSent)
	}

	// The page again and 50 more keys, over HTTP through another node: only the 50 are fetched.
	more := append([]string(nil), page...)
	for i := range 50 {
		more = append(more, fmt.Sprint("p2-", i))
	}
	q := "key=" + strings.Join(more, "&key=")
	resp, body := servetest.Do(t, ds[1].http, "GET", "/v1/groups/resp/keys?"+q, "")
	var ans struct {
		Values  map[string]string `json:"values"`
		Missing []string          `json:"missing"`
		Errors  map[string]any    `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &ans); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET …/keys?key=…: %d %.300q %v", resp.StatusCode, body, err)
	}
	if len(ans.Values) != len(more)-2 || len(ans.Missing) != 2 || len(ans.Errors) != 0 {
		t.Fatalf("%d values, missing %q, errors %v; want %d, the 2 gone, none", len(ans.Values), ans.Missing, ans.Errors, len(more)-2)
	}
	for k, v := range ans.Values {
		if b, err := base64.StdEncoding.DecodeString(v); err != nil || string(b) != "item "+k {
			t.Fatalf("value of %q = %q (%v)", k, b, err)
		}
	}
	each, total = o.fetches(more)
	for k, n := range each {
		if n != 1 {
			t.Errorf("%q fetched %d times, want once", k, n)
		}
	}
	if total != len(more) {
		t.Errorf("the origin was asked %d times for %d keys", total, len(more))
	}

	// 100 cold keys, asked at once by an MGET on every node and a POST on one.
	cold := make([]string, 100)
	for i := range cold {
		cold[i] = fmt.Sprint("p3-", i)
	}
	var wg sync.WaitGroup
	replies := make([]string, len(ds))
	for i, d := range ds {
		c := servetest.DialRESP(t, d.resp)
		wg.Go(func() { replies[i] = c.Do(t, append([]string{"MGET"}, cold...)...) })
	}
	post, _ := json.Marshal(map[string][]string{"keys": cold})
	var postResp *http.Response
	wg.Go(func() { postResp, _ = servetest.Do(t, ds[2].http, "POST", "/v1/groups/resp/keys:batch", string(post)) })
	wg.Wait()
	for i, r := range replies {
		if r != mgetReply(cold) {
			t.Errorf("node %d's MGET = %.200q…", i, r)
		}
	}
	if postResp.StatusCode != 200 {
		t.Errorf("POST …/keys:batch: %d", postResp.StatusCode)
	}
	each, total = o.fetches(cold)
	for k, n := range each {
		if n != 1 {
			t.Errorf("%q fetched %d times by 4 batch reads at once on 3 nodes, want once", k, n)
		}
	}
	if want := len(more) + len(cold); total != want {
		t.Errorf("the origin was asked %d times in all, want %d", total, want)
	}
}
