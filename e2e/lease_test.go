package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The lease protocol (FILLGET / FILLSET) through real clients nobody here wrote: go-redis,
// redis-cli (Debian's redis-tools) and Python's redis (Debian's python3-redis), against
// real `corral serve` processes on loopback.

// leaseNode is a `corral serve` with the Redis protocol on.
type leaseNode struct {
	*proc
	RESP string // "127.0.0.1:port"
}

// startLeaseCluster starts size nodes with --resp-port and waits until each sees all.
func startLeaseCluster(tb testing.TB, size int, extra ...string) []*leaseNode {
	tb.Helper()
	var nodes []*leaseNode
	for i := range size {
		port := freePort(tb)
		var join []string
		if i > 0 {
			join = []string{nodes[0].Gossip}
		}
		p := startNode(tb, fmt.Sprint("node-", i), join, append(slices.Clone(extra), "--resp-port", strconv.Itoa(port))...)
		nodes = append(nodes, &leaseNode{proc: p, RESP: "127.0.0.1:" + strconv.Itoa(port)})
	}
	for _, n := range nodes {
		waitFor(tb, n.Name+" sees the cluster", 20*time.Second, func() bool { return len(n.cluster(tb, "").Members) == size })
	}
	return nodes
}

// goRedis is a go-redis client of n that retries nothing: every answer is the server's.
// The pool is as large as the callers, because a FILLGET with WAIT holds its connection.
func goRedis(tb testing.TB, n *leaseNode, pool int) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: n.RESP, PoolSize: pool, MaxRetries: -1,
		ReadTimeout: 30 * time.Second, WriteTimeout: 5 * time.Second, PoolTimeout: 30 * time.Second,
	})
	tb.Cleanup(func() { c.Close() })
	return c
}

// fillAnswer is one FILLGET answer.
type fillAnswer struct {
	state string // HIT, FILL, BUSY, STALE
	value string
	token string
}

func fillget(ctx context.Context, c *redis.Client, key string, fillMS, waitMS int) (fillAnswer, error) {
	args := []any{"FILLGET", key, fillMS}
	if waitMS > 0 {
		args = append(args, "WAIT", waitMS)
	}
	reply, err := c.Do(ctx, args...).Slice()
	if err != nil {
		return fillAnswer{}, err
	}
	var a fillAnswer
	a.state, _ = reply[0].(string)
	switch a.state {
	case "HIT":
		a.value, _ = reply[1].(string)
	case "FILL":
		a.token, _ = reply[1].(string)
	case "STALE":
		a.value, _ = reply[1].(string)
		a.token, _ = reply[2].(string)
	}
	return a, nil
}

func fillset(ctx context.Context, c *redis.Client, key, value string, ttlMS int, token string, swrMS int) (int64, error) {
	args := []any{"FILLSET", key, value, ttlMS, token}
	if swrMS > 0 {
		args = append(args, "SWR", swrMS)
	}
	return c.Do(ctx, args...).Int64()
}

// metricSum sums a counter over the nodes' /metrics.
func metricSum[N interface{ url(string) string }](tb testing.TB, nodes []N, name string) int {
	tb.Helper()
	total := 0
	for _, n := range nodes {
		resp, err := http.Get(n.url("/metrics"))
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += int(v)
			}
		}
		resp.Body.Close()
	}
	return total
}

// burst is the outcome of many concurrent FILLGETs.
type burst struct {
	mu      sync.Mutex
	answers map[string]int
	values  map[string]int
	tokens  []string
	waited  []time.Duration // from the burst's start to each non-filler's answer
	errs    []error
	filled  time.Duration // from the burst's start to the answer of the filler's FILLSET
}

func (b *burst) add(a fillAnswer, took time.Duration, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.errs = append(b.errs, err)
		return
	}
	if b.answers == nil {
		b.answers, b.values = map[string]int{}, map[string]int{}
	}
	b.answers[a.state]++
	if a.value != "" {
		b.values[a.value]++
	}
	if a.token != "" {
		b.tokens = append(b.tokens, a.token)
	} else {
		b.waited = append(b.waited, took)
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// stampede sends callers FILLGETs at once, spread over the clients, for key, each waiting
// up to 20 s; the caller that gets FILL "builds" the value for build (a sleep standing for
// the filler's work) and stores it with FILLSET.
func stampede(t *testing.T, clients []*redis.Client, key string, callers int, fillMS int, build time.Duration) *burst {
	t.Helper()
	ctx := withTimeout(t, 2*time.Minute)
	b := &burst{}
	start := make(chan struct{})
	var t0 time.Time // written before start is closed
	var wg sync.WaitGroup
	for i := range callers {
		c := clients[i%len(clients)]
		wg.Go(func() {
			<-start
			a, err := fillget(ctx, c, key, fillMS, 20_000)
			took := time.Since(t0)
			if err == nil && a.state == "FILL" {
				time.Sleep(build) // the filler's work
				var n int64
				if n, err = fillset(ctx, c, key, "built by a filler", 60_000, a.token, 0); err == nil && n != 1 {
					err = fmt.Errorf("FILLSET answered %d", n)
				}
				b.mu.Lock()
				b.filled = time.Since(t0)
				b.mu.Unlock()
			}
			b.add(a, took, err)
		})
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	if len(b.errs) > 0 {
		t.Fatalf("%d callers failed, the first: %v", len(b.errs), b.errs[0])
	}
	return b
}

// warm opens n connections in each client's pool (HELLO and all), so that a burst measures
// the answers and not the dials.
func warm(t *testing.T, clients []*redis.Client, n int) {
	t.Helper()
	ctx := withTimeout(t, time.Minute)
	var wg sync.WaitGroup
	for _, c := range clients {
		for range n {
			// A blocking command holds its connection, so n of them need n connections.
			// Its lease (one, cluster-wide, of --max-lease: a minute) outlasts the burst after.
			wg.Go(func() { c.Do(ctx, "FILLGET", "warm-up", 60_000, "WAIT", 200) })
		}
	}
	wg.Wait()
}

func clientsOf(t *testing.T, nodes []*leaseNode, pool int) []*redis.Client {
	var cs []*redis.Client
	for _, n := range nodes {
		cs = append(cs, goRedis(t, n, pool))
	}
	return cs
}

// 3 nodes, 300 concurrent callers across them on one expired key: exactly 1 FILL in the
// cluster, and every other caller is answered hit when the value lands, without retrying.
func TestLeaseStampedeGoRedis(t *testing.T) {
	nodes := startLeaseCluster(t, 3)
	clients := clientsOf(t, nodes, 110)
	ctx := withTimeout(t, time.Minute)
	const key = "product:42"
	// The key was filled once and has expired since.
	first, err := fillget(ctx, clients[0], key, 5000, 0)
	if err != nil || first.state != "FILL" {
		t.Fatalf("first FILLGET = %+v, %v", first, err)
	}
	if n, err := fillset(ctx, clients[1], key, "old", 1, first.token, 0); n != 1 || err != nil {
		t.Fatalf("FILLSET = %d, %v", n, err)
	}
	waitFor(t, key+" to expire", 10*time.Second, func() bool {
		return errors.Is(clients[2].Get(ctx, key).Err(), redis.Nil)
	})
	const callers, build = 300, 100 * time.Millisecond
	warm(t, clients, callers/len(clients)+1)
	granted := metricSum(t, nodes, "corral_lease_granted_total")
	b := stampede(t, clients, key, callers, 10_000, build)
	if b.answers["FILL"] != 1 || b.answers["HIT"] != callers-1 || b.values["built by a filler"] != callers-1 {
		t.Fatalf("answers %v, values %v; want 1 FILL and %d HIT of the filler's value", b.answers, b.values, callers-1)
	}
	if got := metricSum(t, nodes, "corral_lease_granted_total") - granted; got != 1 {
		t.Fatalf("corral_lease_granted_total grew by %d over the cluster, want 1", got)
	}
	p50, p99 := percentile(b.waited, 0.5), percentile(b.waited, 0.99)
	t.Logf("%d callers on 3 nodes: 1 FILL, %d HIT; the filler's FILLSET (build %v) was answered %v after the burst began; waiters answered at p50 %v, p99 %v = the filler's time %+v",
		callers, b.answers["HIT"], build, b.filled.Round(100*time.Microsecond), p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), (p99 - b.filled).Round(100*time.Microsecond))
	for _, c := range clients {
		if v, err := c.Get(ctx, key).Result(); v != "built by a filler" || err != nil {
			t.Fatalf("GET = %q, %v", v, err)
		}
	}
}

// A filler that crashes (never FILLSETs): its lease lapses after fill_ms and exactly one of
// the waiting callers gets FILL; when it stores, the rest are answered hit.
func TestLeaseCrashedFillerLapses(t *testing.T) {
	nodes := startLeaseCluster(t, 3)
	clients := clientsOf(t, nodes, 110)
	ctx := withTimeout(t, time.Minute)
	const key = "crash:1"
	warm(t, clients, 101)
	lapsed := metricSum(t, nodes, "corral_lease_lapsed_total")

	// The crashing filler has its own connection, closed without a FILLSET.
	crasher := goRedis(t, nodes[1], 1)
	a, err := fillget(ctx, crasher, key, 500, 0)
	if err != nil || a.state != "FILL" {
		t.Fatalf("crasher's FILLGET = %+v, %v", a, err)
	}
	crasher.Close()

	const callers = 300
	b := stampede(t, clients, key, callers, 10_000, 20*time.Millisecond)
	if b.answers["FILL"] != 1 || b.answers["HIT"] != callers-1 {
		t.Fatalf("answers %v; want 1 FILL (after the lapse) and %d HIT", b.answers, callers-1)
	}
	if got := metricSum(t, nodes, "corral_lease_lapsed_total") - lapsed; got != 1 {
		t.Fatalf("corral_lease_lapsed_total grew by %d, want 1", got)
	}
	// The crashed filler's token, used late, stores nothing.
	if n, err := fillset(ctx, clients[2], key, "late", 60_000, a.token, 0); n != 0 || err != nil {
		t.Fatalf("late FILLSET = %d, %v", n, err)
	}
	if got := metricSum(t, nodes, "corral_lease_rejected_total"); got != 1 {
		t.Fatalf("corral_lease_rejected_total = %d, want 1", got)
	}
}

// Past its TTL, within its SWR: 300 callers across 3 nodes all get the stale value at once,
// and exactly one of them a token to refresh it.
func TestLeaseStaleOneRefreshToken(t *testing.T) {
	nodes := startLeaseCluster(t, 3)
	clients := clientsOf(t, nodes, 110)
	ctx := withTimeout(t, time.Minute)
	const key = "stale:1"
	first, err := fillget(ctx, clients[0], key, 5000, 0)
	if err != nil || first.state != "FILL" {
		t.Fatalf("FILLGET = %+v, %v", first, err)
	}
	if n, err := fillset(ctx, clients[0], key, "old", 100, first.token, 60_000); n != 1 || err != nil {
		t.Fatalf("FILLSET = %d, %v", n, err)
	}
	// A plain GET on the owner says when the value went stale, without taking the token.
	owner := nodes[0]
	for _, n := range nodes {
		if n.Name == n.cluster(t, escapeKey(key)).Owner {
			owner = n
		}
	}
	waitFor(t, key+" to go stale", 10*time.Second, func() bool {
		_, src, _ := owner.get(t, "/v1/groups/resp/keys/"+escapeKey(key))
		return src == "stale"
	})
	var wg sync.WaitGroup
	b := &burst{}
	for i := range 300 {
		wg.Go(func() {
			a, err := fillget(ctx, clients[i%3], key, 5000, 1000)
			b.add(a, 0, err)
		})
	}
	wg.Wait()
	if len(b.errs) > 0 || b.answers["STALE"] != 300 || b.values["old"] != 300 || len(b.tokens) != 1 {
		t.Fatalf("answers %v, values %v, %d tokens, errors %v; want 300 STALE \"old\", 1 token", b.answers, b.values, len(b.tokens), b.errs)
	}
	if n, err := fillset(ctx, clients[1], key, "new", 60_000, b.tokens[0], 0); n != 1 || err != nil {
		t.Fatalf("refresh FILLSET = %d, %v", n, err)
	}
	if a, err := fillget(ctx, clients[2], key, 5000, 0); a.state != "HIT" || a.value != "new" || err != nil {
		t.Fatalf("after the refresh: %+v, %v", a, err)
	}
}

func escapeKey(key string) string { return strings.ReplaceAll(key, ":", "%3A") }

// requireTool finds a tool the tests need: .ci/run installs it; elsewhere the test skips.
func requireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s is not installed (.ci/run installs it)", name)
	}
	tb.Skipf("%s is not installed (Debian: redis-tools, python3-redis; .ci/run installs them)", name)
	return ""
}

// redisCLI runs redis-cli against addr and returns its output (raw: not a terminal).
func redisCLI(tb testing.TB, addr string, args ...string) string {
	tb.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command(requireTool(tb, "redis-cli"), append([]string{"-h", host, "-p", port, "--no-auth-warning"}, args...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli %q: %v\n%s", args, err, out)
	}
	return strings.TrimRight(string(out), "\n")
}

// The seed's example, as written for redis-cli, on a cluster: one node hands out the lease,
// another answers busy, a FILLSET after a DELETE answers 0 and changes nothing.
func TestLeaseRedisCLI(t *testing.T) {
	requireTool(t, "redis-cli")
	nodes := startLeaseCluster(t, 2)
	a, b := nodes[0].RESP, nodes[1].RESP
	if got := redisCLI(t, a, "PING"); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
	fill := strings.Split(redisCLI(t, a, "FILLGET", "product:42", "5000"), "\n")
	if len(fill) != 2 || fill[0] != "FILL" || fill[1] == "" {
		t.Fatalf("FILLGET = %q", fill)
	}
	token := fill[1]
	if got := redisCLI(t, b, "FILLGET", "product:42", "5000"); got != "BUSY" { // and a nil
		t.Fatalf("FILLGET on the other node = %q", got)
	}
	if got := redisCLI(t, b, "-3", "FILLGET", "product:42", "5000", "WAIT", "50"); got != "BUSY" {
		t.Fatalf("FILLGET in RESP3 = %q", got)
	}
	if got := redisCLI(t, b, "FILLSET", "product:42", `{"id":42}`, "60000", token, "SWR", "30000"); got != "1" {
		t.Fatalf("FILLSET = %q", got)
	}
	if got := redisCLI(t, a, "FILLGET", "product:42", "5000"); got != "HIT\n{\"id\":42}" {
		t.Fatalf("FILLGET after = %q", got)
	}
	if got := redisCLI(t, b, "GET", "product:42"); got != `{"id":42}` {
		t.Fatalf("GET = %q", got)
	}

	// A FILLSET after a DELETE answers 0 and changes nothing.
	token = strings.Split(redisCLI(t, a, "FILLGET", "deleted:1", "5000"), "\n")[1]
	if got := redisCLI(t, b, "DEL", "deleted:1"); got != "1" {
		t.Fatalf("DEL = %q", got)
	}
	if got := redisCLI(t, a, "FILLSET", "deleted:1", "stale", "60000", token); got != "0" {
		t.Fatalf("FILLSET after DEL = %q", got)
	}
	for _, n := range nodes {
		if got := redisCLI(t, n.RESP, "GET", "deleted:1"); got != "" {
			t.Fatalf("GET on %s after the refused FILLSET = %q", n.Name, got)
		}
	}
	if got := redisCLI(t, b, "FILLGET", "deleted:1", "5000"); !strings.HasPrefix(got, "FILL\n") || strings.HasSuffix(got, token) {
		t.Fatalf("FILLGET after = %q: want a new lease", got)
	}

	// Errors a Redis user knows, and SET with EX.
	if got := redisCLI(t, a, "NOSUCH", "x"); !strings.HasPrefix(got, "ERR unknown command 'NOSUCH'") {
		t.Fatalf("unknown command = %q", got)
	}
	if got := redisCLI(t, a, "SET", "k", "v", "EX", "60"); got != "OK" {
		t.Fatalf("SET EX = %q", got)
	}
	if got := redisCLI(t, b, "GET", "k"); got != "v" {
		t.Fatalf("GET = %q", got)
	}
}

// AUTH maps to --api-token-file: redis-cli -a, and HTTP's Bearer token, are the same token.
func TestLeaseAuth(t *testing.T) {
	requireTool(t, "redis-cli")
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startLeaseCluster(t, 1, "--api-token-file", file)[0]
	if got := redisCLI(t, n.RESP, "SET", "k", "v"); !strings.HasPrefix(got, "NOAUTH") {
		t.Fatalf("SET without AUTH = %q", got)
	}
	if got := redisCLI(t, n.RESP, "-a", "wrong", "SET", "k", "v"); !strings.Contains(got, "WRONGPASS") {
		t.Fatalf("SET with a wrong password = %q", got)
	}
	if got := redisCLI(t, n.RESP, "-a", "s3cret", "SET", "k", "v"); got != "OK" {
		t.Fatalf("SET with AUTH = %q", got)
	}
	if code, _ := n.do(t, "DELETE", "/v1/groups/resp/keys/k", ""); code != http.StatusUnauthorized {
		t.Fatalf("DELETE without the token = %d", code)
	}
	if got := redisCLI(t, n.RESP, "GET", "k"); got != "v" {
		t.Fatalf("GET (reads are open) = %q", got)
	}
	if log := n.log.String(); strings.Contains(log, "s3cret") {
		t.Fatal("the token is in the log")
	}
}

// The Python example of docs/serve.md, run by Python's redis package against a 2-node cluster.
func TestLeasePython(t *testing.T) {
	py := "/usr/bin/python3" // Debian's, where python3-redis installs the package
	if _, err := os.Stat(py); err != nil || exec.Command(py, "-c", "import redis").Run() != nil {
		requireTool(t, "python3-redis (import redis)")
	}
	nodes := startLeaseCluster(t, 2)
	cmd := exec.Command(py, "testdata/lease_client.py", nodes[0].RESP, nodes[1].RESP)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lease_client.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "lease_client: ok") {
		t.Fatalf("lease_client.py said:\n%s", out)
	}
	t.Logf("lease_client.py:\n%s", out)
}

// HTTP's lease flow across nodes: a lease on one, a waiter held on another, the PUT on a
// third; the waiter is answered hit.
func TestLeaseHTTPAcrossNodes(t *testing.T) {
	nodes := startLeaseCluster(t, 3)
	const key = "/v1/groups/pages/keys/p1"
	resp, err := http.Get(nodes[0].url(key + "?lease=5s"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	token := resp.Header.Get("X-Corral-Lease")
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Corral-Lease-State") != "fill" || token == "" {
		t.Fatalf("lease: %d %v", resp.StatusCode, resp.Header)
	}
	type answer struct {
		code  int
		state string
		body  string
	}
	waiter := make(chan answer, 1)
	go func() {
		code, state, body := leaseGet(nodes[1], key+"?lease=5s&wait=20s")
		waiter <- answer{code, state, body}
	}()
	waitFor(t, "a busy answer elsewhere", 10*time.Second, func() bool {
		code, state, _ := leaseGet(nodes[2], key+"?lease=5s")
		return code == http.StatusConflict && state == "busy"
	})
	req, _ := http.NewRequest("PUT", nodes[2].url(key+"?ttl=60s&swr=30s"), strings.NewReader("page 1"))
	req.Header.Set("X-Corral-Lease", token)
	put, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	put.Body.Close()
	if put.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT = %d", put.StatusCode)
	}
	if a := <-waiter; a.code != http.StatusOK || a.state != "hit" || a.body != "page 1" {
		t.Fatalf("waiter = %+v", a)
	}
}

func leaseGet(n *leaseNode, path string) (int, string, string) {
	resp, err := http.Get(n.url(path))
	if err != nil {
		return 0, "", err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, resp.Header.Get("X-Corral-Lease-State"), b.String()
}
