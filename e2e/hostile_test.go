package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 22's attacks, each against real `corral serve` processes over raw sockets: the
// process stays up, other clients are served, memory and CPU stay bounded, and nothing is
// written that should not be. Run against an older binary (CORRAL_E2E_BIN) to see them fail.

// procStat reads a process's resident memory and the CPU time it has used.
func procStat(tb testing.TB, p *proc) (rss int64, cpu time.Duration) {
	tb.Helper()
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatalf("%s: %v (has it exited?)", p.Name, err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command's ")": state is the 3rd field of the whole line, utime the
	// 14th and stime the 15th, in clock ticks of 1/100 s (USER_HZ on Linux).
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, time.Duration(utime+stime) * 10 * time.Millisecond
}

// serving fails tb unless p is running and answers HTTP and, if addr is set, the Redis
// protocol.
func serving(tb testing.TB, p *proc, respAddr string) {
	tb.Helper()
	select {
	case <-p.done:
		tb.Fatalf("%s exited: %v", p.Name, p.err)
	default:
	}
	if code := p.status("/healthz"); code != http.StatusOK {
		tb.Fatalf("%s: /healthz = %d", p.Name, code)
	}
	if respAddr != "" {
		if got := respDo(tb, respAddr, "PING"); got != "+PONG\r\n" {
			tb.Fatalf("%s: PING = %q", p.Name, got)
		}
	}
}

// respDo sends one command on a new connection and returns its reply.
func respDo(tb testing.TB, addr string, args ...string) string {
	tb.Helper()
	replies := respPipeline(tb, addr, "", [][]string{args})
	return replies[0]
}

// respPipeline sends cmds on one connection (from the address from, "" = any) without
// waiting, and reads one reply for each.
func respPipeline(tb testing.TB, addr, from string, cmds [][]string) []string {
	tb.Helper()
	d := net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		for _, args := range cmds {
			fmt.Fprintf(w, "*%d\r\n", len(args))
			for _, a := range args {
				fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		w.Flush()
	}()
	r := bufio.NewReader(c)
	replies := make([]string, 0, len(cmds))
	for range cmds {
		reply, err := readRESPReply(r)
		if err != nil {
			tb.Fatalf("reply %d of %d: %v (so far %q)", len(replies)+1, len(cmds), err, reply)
		}
		replies = append(replies, reply)
	}
	return replies
}

// readRESPReply reads one reply, raw.
func readRESPReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil || len(line) < 3 {
		return line, fmt.Errorf("reading a reply: %w", err)
	}
	out := line
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$':
		if n >= 0 {
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				return out, err
			}
			out += string(buf)
		}
	case '*', '%':
		if line[0] == '%' {
			n *= 2
		}
		for range n {
			s, err := readRESPReply(r)
			out += s
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// rawSend writes in to a new connection and returns what the node sends back until it
// closes the connection (at most within 10 s).
func rawSend(tb testing.TB, addr, in string) string {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, in)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

func tokenFile(tb testing.TB) string {
	tb.Helper()
	file := tb.TempDir() + "/token"
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return file
}

// A length of 2^63-1 before AUTH, and counts of 2^40 whose senders hang up: the node
// answers each with an error and goes on, and no core spins. (redcon's reader panicked on
// the first, on a goroutine nothing recovered, and looped for good on the second.)
func TestHostileRESPHeaders(t *testing.T) {
	n := startLeaseCluster(t, 1, "--api-token-file", tokenFile(t))[0]
	if got := rawSend(t, n.RESP, "*1\r\n$9223372036854775807\r\n"); !strings.HasPrefix(got, "-ERR Protocol error") {
		t.Fatalf("a length of 2^63-1 got %q", got)
	}
	serving(t, n.proc, n.RESP)

	for range 4 {
		c, err := net.Dial("tcp", n.RESP)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "*1099511627776\r\n")
		c.Close()
	}
	serving(t, n.proc, n.RESP)
	// Four spinning connections would burn both cores; an idle -race node uses a few percent.
	_, cpu0 := procStat(t, n.proc)
	start := time.Now()
	time.Sleep(2 * time.Second)
	_, cpu1 := procStat(t, n.proc)
	if used := cpu1 - cpu0; used > time.Since(start)/2 {
		t.Fatalf("the node used %v of CPU in %v after four hung-up counts of 2^40", used, time.Since(start).Round(time.Millisecond))
	}
	if got := n.metric(t, "corral_http_limit_hits_total", `limit="resp_command"`); got != 4 {
		t.Errorf(`corral_http_limit_hits_total{limit="resp_command"} = %v, want 4`, got)
	}
}

// An incomplete command sent a byte per write costs what it costs whole: the bytes of a
// 100,000-byte argument, one per read for 8 s, grow the node by far less than redcon's
// recursion took (29 MiB for 9 KB here, 63 MiB for 48 KB in the issue).
func TestHostileRESPSlowBytes(t *testing.T) {
	n := startLeaseCluster(t, 1)[0]
	c, err := net.Dial("tcp", n.RESP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rss0, _ := procStat(t, n.proc)
	io.WriteString(c, "*2\r\n$3\r\nGET\r\n$100000\r\n")
	deadline := time.Now().Add(8 * time.Second) // under --resp-command-timeout's 10 s
	sent := 0
	for sent < 48_000 && time.Now().Before(deadline) {
		if _, err := c.Write([]byte{'x'}); err != nil {
			t.Fatalf("write %d: %v", sent, err)
		}
		sent++
		time.Sleep(40 * time.Microsecond) // a read per byte on the node, as an attacker paces it
	}
	rss1, _ := procStat(t, n.proc)
	t.Logf("%d bytes sent one per write: RSS %d MiB → %d MiB", sent, rss0>>20, rss1>>20)
	if grew := rss1 - rss0; grew > 16<<20 {
		t.Fatalf("RSS grew by %d MiB for %d bytes sent a byte at a time", grew>>20, sent)
	}
	serving(t, n.proc, n.RESP)
}

// FILLGET floods: without AUTH on a node with a token, 65,536 pipelined FILLGETs of an hour
// are each refused and hold nothing up; on a node without a token they are refused past
// --max-lease, and a client's leases stop at --max-client-leases while another client is
// served; a full lease table answers -BUSY and 503, never a client error.
func TestHostileLeases(t *testing.T) {
	const flood = 65_536
	fillgets := func(prefix string, n int, ms string) [][]string {
		cmds := make([][]string, n)
		for i := range cmds {
			cmds[i] = []string{"FILLGET", prefix + strconv.Itoa(i), ms}
		}
		return cmds
	}
	count := func(replies []string, prefix string) int {
		n := 0
		for _, r := range replies {
			if strings.HasPrefix(r, prefix) {
				n++
			}
		}
		return n
	}
	t.Run("token", func(t *testing.T) {
		n := startLeaseCluster(t, 1, "--api-token-file", tokenFile(t))[0]
		replies := respPipeline(t, n.RESP, "", fillgets("j", flood, "3600000"))
		if got := count(replies, "-NOAUTH"); got != flood {
			t.Fatalf("%d of %d FILLGETs without AUTH refused, want all; the first reply %q", got, flood, replies[0])
		}
		got := respPipeline(t, n.RESP, "", [][]string{{"AUTH", "s3cret"}, {"FILLGET", "j1", "5000"}})
		if !strings.HasPrefix(got[1], "*2\r\n+FILL\r\n") {
			t.Fatalf("an authorized FILLGET of j1 after the flood = %q", got[1])
		}
		code, state, _ := leaseGetAuth(t, n, "/v1/groups/resp/keys/j2?lease=5s", "s3cret")
		if code != http.StatusAccepted || state != "fill" {
			t.Fatalf("an authorized ?lease of j2 after the flood = %d %q", code, state)
		}
		serving(t, n.proc, n.RESP)
	})
	t.Run("no token", func(t *testing.T) {
		n := startLeaseCluster(t, 1)[0]
		replies := respPipeline(t, n.RESP, "", fillgets("j", flood, "3600000"))
		if got := count(replies, "-ERR a lease of 1h0m0s exceeds the limit of 1m0s (--max-lease)"); got != flood {
			t.Fatalf("%d of %d FILLGETs of an hour refused, want all; the first reply %q", got, flood, replies[0])
		}
		replies = respPipeline(t, n.RESP, "", fillgets("k", 1100, "60000"))
		if fills, busy := count(replies, "*2\r\n+FILL\r\n"), count(replies, "-BUSY this client holds 1024 leases"); fills != 1024 || busy != 1100-1024 {
			t.Fatalf("1100 FILLGETs from one client: %d FILL, %d BUSY; want 1024 and %d", fills, busy, 1100-1024)
		}
		if got := respPipeline(t, n.RESP, "127.0.0.2", [][]string{{"FILLGET", "k1099", "5000"}}); !strings.HasPrefix(got[0], "*2\r\n+FILL\r\n") {
			t.Fatalf("another client's FILLGET = %q", got[0])
		}
		if got := n.metric(t, "corral_http_limit_hits_total", `limit="client_leases"`); got != 1100-1024 {
			t.Errorf(`corral_http_limit_hits_total{limit="client_leases"} = %v, want %d`, got, 1100-1024)
		}
		serving(t, n.proc, n.RESP)
	})
	t.Run("full table", func(t *testing.T) {
		n := startLeaseCluster(t, 1, "--max-client-leases", "0", "--max-lease", "1h")[0]
		replies := respPipeline(t, n.RESP, "", append(fillgets("j", flood, "3600000"), []string{"FILLGET", "one-more", "5000"}))
		if got := count(replies[:flood], "*2\r\n+FILL\r\n"); got != flood {
			t.Fatalf("%d of %d FILLGETs granted, want all", got, flood)
		}
		if last := replies[flood]; !strings.HasPrefix(last, "-BUSY too many leases held: 65536") {
			t.Fatalf("a FILLGET past the full table = %q, want -BUSY naming the limit", last)
		}
		code, _, body := leaseGet(n, "/v1/groups/resp/keys/one-more?lease=5s")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "too many leases held") {
			t.Fatalf("?lease past the full table = %d %q, want 503", code, body)
		}
		serving(t, n.proc, n.RESP)
	})
}

func leaseGetAuth(tb testing.TB, n *leaseNode, path, token string) (int, string, string) {
	tb.Helper()
	req, _ := http.NewRequest("GET", n.url(path), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Corral-Lease-State"), string(b)
}

// Token-less reads of new groups create none when writes need the token, on the node nor on
// its peers: an authorized PUT to a new group is stored everywhere. Without a token, groups
// a read made hold nothing and keep no other group out.
func TestHostileGroups(t *testing.T) {
	do := func(n *proc, method, path, body, token string) (int, string) {
		req, _ := http.NewRequest(method, n.url(path), strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tt := range []struct {
		name  string
		token string
	}{{"token", "s3cret"}, {"no token", ""}} {
		t.Run(tt.name, func(t *testing.T) {
			flags := []string{"--max-groups", "8"}
			if tt.token != "" {
				flags = append(flags, "--api-token-file", tokenFile(t))
			}
			nodes := startCluster(t, 2, flags...)
			for i := range 8 {
				if code, body := do(nodes[i%2], "GET", fmt.Sprintf("/v1/groups/junk%d/keys/k", i), "", ""); code != http.StatusNotFound {
					t.Fatalf("GET junk%d = %d %s", i, code, body)
				}
			}
			if code, body := do(nodes[0], "PUT", "/v1/groups/real/keys/k", "v", tt.token); code != http.StatusNoContent {
				t.Fatalf("a PUT to a new group after 8 token-less reads = %d %s", code, body)
			}
			for _, n := range nodes {
				if code, body := do(n, "GET", "/v1/groups/real/keys/k", "", tt.token); code != http.StatusOK || body != "v" {
					t.Fatalf("GET real/k on %s = %d %q", n.Name, code, body)
				}
				if got := n.metric(t, "corral_http_limit_hits_total", `limit="groups"`); got != 0 {
					t.Errorf("%s refused %v groups", n.Name, got)
				}
			}
		})
	}
}

// The origin is asked for exactly the key: a key that would be a dot segment is refused,
// never sent (its "/" page is never cached under it); a redirect is not followed, and its
// target never asked.
func TestHostileOrigin(t *testing.T) {
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.WriteString(w, "the redirect's target")
	}))
	defer target.Close()
	var mu sync.Mutex
	var paths []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		switch r.URL.EscapedPath() {
		case "/", "/items", "/items/":
			io.WriteString(w, "the origin's index page")
		case "/items/moved":
			http.Redirect(w, r, target.URL+"/secret", http.StatusFound)
		default:
			io.WriteString(w, "value of "+r.URL.EscapedPath())
		}
	}))
	defer origin.Close()
	n := startNode(t, "solo", nil, "--origin", origin.URL+"/items/{key}")

	for _, key := range []string{"%2E%2E", "%2E", "..%2Fadmin", "%2E%2E%5Cadmin", "a%2F..%2F..%2Fb"} {
		code, _, body := n.get(t, "/v1/groups/g/keys/"+key)
		if code != http.StatusBadRequest || !strings.Contains(body, "dot segment") {
			t.Errorf("GET key %s = %d %q, want 400", key, code, body)
		}
	}
	if code, _, body := n.get(t, "/v1/groups/g/keys/a%2Fb"); code != http.StatusOK || body != "value of /items/a%2Fb" {
		t.Errorf("GET a/b = %d %q", code, body)
	}
	code, _, body := n.get(t, "/v1/groups/g/keys/moved")
	if code != http.StatusBadGateway || !strings.Contains(body, "302") {
		t.Errorf("GET of a key the origin redirects = %d %q, want 502 naming the 302", code, body)
	}
	if got := elsewhere.Load(); got != 0 {
		t.Errorf("the redirect's target was asked %d times", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		if p != "/items/a%2Fb" && p != "/items/moved" {
			t.Errorf("the origin was asked for %s", p)
		}
	}
}

// A PUT of exactly --max-value-bytes is stored and read back whole.
func TestHostileValueLimit(t *testing.T) {
	n := startNode(t, "solo", nil, "--max-value-bytes", "1000")
	body := strings.Repeat("v", 1000)
	if code, msg := n.do(t, "PUT", "/v1/groups/g/keys/k", body); code != http.StatusNoContent {
		t.Fatalf("PUT of exactly --max-value-bytes = %d %s", code, msg)
	}
	if code, _, got := n.get(t, "/v1/groups/g/keys/k"); code != http.StatusOK || got != body {
		t.Fatalf("GET = %d, %d bytes", code, len(got))
	}
	if code, _ := n.do(t, "PUT", "/v1/groups/g/keys/k", body+"v"); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("PUT of one byte more = %d", code)
	}
}

// A stampede of 300 concurrent GETs from one IP is served whole by the defaults, with one
// origin call; a client at its --max-client-requests bound is still answered on /healthz,
// /readyz and /metrics (a kubelet probes from the node's IP).
func TestHostileStampedeFromOnePod(t *testing.T) {
	origin := newOrigin(t, 300*time.Millisecond)
	n := startNode(t, "solo", nil, "--origin", origin.template())
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 300}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	codes := make(chan int, 300)
	for range 300 {
		wg.Go(func() {
			resp, err := client.Get(n.url("/v1/groups/items/keys/hot"))
			if err != nil {
				codes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	bad := map[int]int{}
	for c := range codes {
		if c != http.StatusOK {
			bad[c]++
		}
	}
	if len(bad) > 0 || origin.count("hot") != 1 {
		t.Fatalf("300 concurrent GETs from one IP: not 200: %v; origin calls %d", bad, origin.count("hot"))
	}

	capped := startNode(t, "capped", nil, "--origin", origin.template(), "--max-client-requests", "4", "--fill-timeout", "20s")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	held := make(chan struct{}, 4)
	defer func() {
		cancel()
		for range 4 {
			<-held
		}
	}()
	for i := range 4 {
		go func() {
			defer func() { held <- struct{}{} }()
			// A probe below may take this one's place for a moment: ask again until held.
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", capped.url(fmt.Sprintf("/v1/groups/items/keys/hang-%d", i)), nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusTooManyRequests {
					return
				}
			}
		}()
	}
	waitFor(t, "four requests held", 20*time.Second, func() bool {
		code, _, _ := capped.get(t, "/v1/groups/items/keys/probe")
		return code == http.StatusTooManyRequests
	})
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code := capped.status(p); code != http.StatusOK {
			t.Errorf("%s from a capped IP = %d", p, code)
		}
	}
}

// The Redis port has a connection cap and an idle timeout, each told to the client and
// counted; a hung-up pipeline ends its connection without a flood of warnings.
func TestHostileRESPConnections(t *testing.T) {
	n := startLeaseCluster(t, 1, "--resp-max-conns", "8", "--resp-idle-timeout", "2s")[0]
	connections := func() string {
		for _, line := range strings.Split(scrape(t, n.proc), "\n") {
			if strings.HasPrefix(line, "corral_resp_connections ") {
				return strings.TrimPrefix(line, "corral_resp_connections ")
			}
		}
		return ""
	}
	var idle []net.Conn
	for range 8 {
		c, err := net.Dial("tcp", n.RESP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "*1\r\n$4\r\nPING\r\n")
		if line, err := bufio.NewReader(c).ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("PING = %q, %v", line, err)
		}
		idle = append(idle, c)
	}
	if got := rawSend(t, n.RESP, "*1\r\n$4\r\nPING\r\n"); !strings.HasPrefix(got, "-ERR max number of clients reached") {
		t.Fatalf("a ninth connection got %q", got)
	}
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if b, _ := io.ReadAll(c); !strings.HasPrefix(string(b), "-ERR idle for 2s (--resp-idle-timeout)") {
			t.Fatalf("an idle connection got %q", b)
		}
		c.Close() // as a client does at an error
	}
	waitFor(t, "the idle connections to close", 10*time.Second, func() bool { return connections() == "0" })
	serving(t, n.proc, n.RESP)
	if got := n.metric(t, "corral_http_limit_hits_total", `limit="resp_connections"`); got != 1 {
		t.Errorf("resp_connections hits = %v, want 1", got)
	}
	if got := n.metric(t, "corral_http_limit_hits_total", `limit="resp_idle_timeout"`); got != 8 {
		t.Errorf("resp_idle_timeout hits = %v, want 8", got)
	}

	// A pipeline of waiting FILLGETs whose client hangs up.
	if got := respDo(t, n.RESP, "FILLGET", "held", "30000"); !strings.HasPrefix(got, "*2\r\n+FILL\r\n") {
		t.Fatalf("holder = %q", got)
	}
	c, err := net.Dial("tcp", n.RESP)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for range 300 {
		b.WriteString("*5\r\n$7\r\nFILLGET\r\n$4\r\nheld\r\n$4\r\n5000\r\n$4\r\nWAIT\r\n$5\r\n20000\r\n")
	}
	io.WriteString(c, b.String())
	c.Close()
	waitFor(t, "the hung-up connection to end", 20*time.Second, func() bool { return connections() == "0" })
	if warned := strings.Count(n.log.String(), "Redis protocol: command failed"); warned > 10 {
		t.Fatalf("a hung-up pipeline logged %d warnings", warned)
	}
	serving(t, n.proc, n.RESP)
}

func scrape(tb testing.TB, p *proc) string {
	tb.Helper()
	_, _, body := p.get(tb, "/metrics")
	return body
}

// A PUT whose body trickles in — a byte every 0.5 s, as a slow-body attack sends it — is cut
// at --read-body-timeout: answered 408, its connection closed, counted, nothing stored, and
// the node goes on serving.
func TestHostileSlowBody(t *testing.T) {
	n := startNode(t, "node-0", nil, "--read-body-timeout", "2s")
	c, err := net.Dial("tcp", n.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "PUT /v1/groups/items/keys/slow HTTP/1.1\r\nHost: corral\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
	answered := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		k := 0
		defer func() { sent <- k }()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-answered:
				return
			case <-t.C:
			}
			if _, err := c.Write([]byte{'x'}); err != nil {
				return
			}
			k++
		}
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	close(answered)
	if err != nil {
		t.Fatalf("no answer to the trickled PUT: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	t.Logf("answered %d after %v, %d bytes trickled: %s", resp.StatusCode, took.Round(time.Millisecond), <-sent, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "--read-body-timeout") || !resp.Close {
		t.Fatalf("answer %d %q (close %v), want 408 naming --read-body-timeout, and the connection closed", resp.StatusCode, body, resp.Close)
	}
	if took < 2*time.Second || took > 20*time.Second {
		t.Errorf("answered after %v, want at the bound of 2s", took)
	}
	if m := scrape(t, n); !strings.Contains(m, `corral_http_limit_hits_total{limit="read_body_timeout"} 1`) {
		t.Errorf("read_body_timeout not counted once")
	}
	if code, _, _ := n.get(t, "/v1/groups/items/keys/slow"); code != http.StatusNotFound {
		t.Errorf("the cut PUT stored something: GET answers %d", code)
	}
	serving(t, n, "")
}
