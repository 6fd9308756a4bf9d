package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testDaemon is a one-node `corral serve` in this process, with the Redis protocol on.
type testDaemon struct {
	d    *daemon
	http string // "127.0.0.1:port"
	resp string
}

func startTestDaemon(tb testing.TB, mod func(*serveConfig)) *testDaemon {
	tb.Helper()
	fs, c := serveFlags(io.Discard)
	if err := fs.Parse([]string{"--bind", "127.0.0.1", "--gossip-port", "0", "--peer-port", "0", "--drain", "0"}); err != nil {
		tb.Fatal(err)
	}
	c.name = "test"
	if mod != nil {
		mod(c)
	}
	if err := c.validate(); err != nil {
		tb.Fatal(err)
	}
	d, err := startDaemon(c, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.startRESP(rl); err != nil {
		tb.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serveOn(ctx, lis) }()
	tb.Cleanup(func() {
		// A connection the client dialed but never used would hold Shutdown for 5 s.
		http.DefaultClient.CloseIdleConnections()
		stop()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return &testDaemon{d: d, http: lis.Addr().String(), resp: rl.Addr().String()}
}

// do sends an HTTP request and returns the response with its body read.
func (td *testDaemon) do(tb testing.TB, method, path, body string, header ...string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(method, "http://"+td.http+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHTTPLeases(t *testing.T) {
	td := startTestDaemon(t, nil)
	const key = "/v1/groups/pages/keys/p42"

	resp, _ := td.do(t, "GET", key+"?lease=5s", "")
	token := resp.Header.Get(leaseTokenHeader)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get(leaseStateHeader) != "fill" || token == "" {
		t.Fatalf("first lease: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = td.do(t, "GET", key+"?lease=5000", "")
	if resp.StatusCode != http.StatusConflict || resp.Header.Get(leaseStateHeader) != "busy" || resp.Header.Get(leaseTokenHeader) != "" {
		t.Fatalf("second lease: %d %v", resp.StatusCode, resp.Header)
	}
	type answer struct {
		status int
		state  string
		body   string
	}
	waiter := make(chan answer, 1)
	go func() {
		resp, body := td.do(t, "GET", key+"?lease=5s&wait=30s", "")
		waiter <- answer{resp.StatusCode, resp.Header.Get(leaseStateHeader), body}
	}()
	if resp, body := td.do(t, "PUT", key+"?ttl=60s&swr=30s", "<h1>42</h1>", leaseTokenHeader, token, "Content-Type", "text/html"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT with the lease: %d %s", resp.StatusCode, body)
	}
	if a := <-waiter; a.status != http.StatusOK || a.state != "hit" || a.body != "<h1>42</h1>" {
		t.Fatalf("waiter: %+v", a)
	}
	if resp, _ := td.do(t, "PUT", key+"?ttl=60s", "again", leaseTokenHeader, token); resp.StatusCode != http.StatusConflict {
		t.Fatalf("PUT with a used lease: %d", resp.StatusCode)
	}
	if resp, body := td.do(t, "GET", key, ""); resp.StatusCode != http.StatusOK || body != "<h1>42</h1>" || resp.Header.Get("Content-Type") != "text/html" {
		t.Fatalf("plain GET: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	// A PUT under a lease after a DELETE answers 409 and changes nothing.
	td.do(t, "DELETE", key, "")
	resp, _ = td.do(t, "GET", key+"?lease=5s", "")
	token = resp.Header.Get(leaseTokenHeader)
	td.do(t, "DELETE", key, "")
	if resp, _ := td.do(t, "PUT", key+"?ttl=60s", "late", leaseTokenHeader, token); resp.StatusCode != http.StatusConflict {
		t.Fatalf("PUT after DELETE: %d", resp.StatusCode)
	}
	if resp, _ := td.do(t, "GET", key, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after the refused PUT: %d", resp.StatusCode)
	}

	// A plain PUT with a ttl of its own.
	if resp, _ := td.do(t, "PUT", "/v1/groups/pages/keys/short?ttl=1h", "x"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT ?ttl: %d", resp.StatusCode)
	}

	for _, q := range []string{"?lease=abc", "?lease=0", "?lease=5s&wait=-1s", "?lease=5s&wait=2h", "?lease=99999999999999999999"} {
		if resp, body := td.do(t, "GET", key+q, ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s", q, resp.StatusCode, body)
		}
	}
	if resp, _ := td.do(t, "PUT", key+"?ttl=soon", "x", leaseTokenHeader, "t"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT ?ttl=soon: %d", resp.StatusCode)
	}
}

func writeTokenFile(tb testing.TB, token string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestAPIToken(t *testing.T) {
	for _, reads := range []bool{false, true} {
		t.Run(fmt.Sprint("reads=", reads), func(t *testing.T) {
			file := writeTokenFile(t, "s3cret")
			td := startTestDaemon(t, func(c *serveConfig) { c.apiTokenFile, c.apiTokenReads = file, reads })
			const key = "/v1/groups/g/keys/k"
			for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic s3cret"}, {"Authorization", "Bearer s3cret2"}} {
				resp, _ := td.do(t, "PUT", key, "v", h...)
				if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("PUT with %q: %d %v", h, resp.StatusCode, resp.Header)
				}
			}
			if resp, _ := td.do(t, "DELETE", key, ""); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("DELETE without the token: %d", resp.StatusCode)
			}
			if resp, _ := td.do(t, "GET", key, "", "Authorization", "Bearer s3cret"); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("the refused PUT stored something: %d", resp.StatusCode)
			}
			if resp, _ := td.do(t, "PUT", key, "v", "Authorization", "bearer s3cret"); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("PUT with the token: %d", resp.StatusCode)
			}
			wantRead := http.StatusOK
			if reads {
				wantRead = http.StatusUnauthorized
			}
			for _, p := range []string{key, "/v1/cluster", "/debug/corral"} {
				if resp, _ := td.do(t, "GET", p, ""); resp.StatusCode != wantRead {
					t.Errorf("GET %s without the token: %d, want %d", p, resp.StatusCode, wantRead)
				}
			}
			for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
				if resp, _ := td.do(t, "GET", p, ""); resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s: %d, want open", p, resp.StatusCode)
				}
			}
		})
	}
}

func TestAPITokenFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(c *serveConfig)
	}{
		{"reads without a file", func(c *serveConfig) { c.apiTokenReads = true }},
		{"resp port out of range", func(c *serveConfig) { c.respPort = 70000 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, c := serveFlags(io.Discard)
			tt.mod(c)
			if err := c.validate(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := loadToken(writeTokenFile(t, "  ")); err == nil {
		t.Fatal("an empty token file was accepted")
	}
	if _, err := loadToken(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}

// respClient speaks raw RESP: the replies are compared byte for byte.
type respClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(tb testing.TB, addr string) *respClient {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &respClient{c: c, r: bufio.NewReader(c)}
}

// do sends a command and returns its reply's raw bytes.
func (rc *respClient) do(tb testing.TB, args ...string) string {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := rc.c.Write([]byte(b.String())); err != nil {
		tb.Fatal(err)
	}
	reply, err := rc.reply()
	if err != nil {
		tb.Fatalf("%q: %v", args, err)
	}
	return reply
}

// reply reads one whole reply.
func (rc *respClient) reply() (string, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return line, err
	}
	out := line
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$':
		if n >= 0 {
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(rc.r, buf); err != nil {
				return out, err
			}
			out += string(buf)
		}
	case '*', '%':
		if line[0] == '%' {
			n *= 2
		}
		for range n {
			s, err := rc.reply()
			out += s
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

func TestRESPCommands(t *testing.T) {
	td := startTestDaemon(t, nil)
	rc := dialRESP(t, td.resp)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"ping", "hi"}, bulk("hi")},
		{[]string{"GET", "k"}, "$-1\r\n"},
		{[]string{"SET", "k", "v"}, "+OK\r\n"},
		{[]string{"GET", "k"}, bulk("v")},
		{[]string{"SET", "k", "v2", "PX", "60000"}, "+OK\r\n"},
		{[]string{"GET", "k"}, bulk("v2")},
		{[]string{"SET", "k", "v", "EX", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
		{[]string{"SET", "k", "v", "NX"}, "-ERR syntax error\r\n"},
		{[]string{"DEL", "k", "other"}, ":2\r\n"},
		{[]string{"GET", "k"}, "$-1\r\n"},
		{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n"},
		{[]string{"FLUSHALL", "ASYNC"}, "-ERR unknown command 'FLUSHALL', with args beginning with: 'ASYNC'\r\n"},
		{[]string{"FILLGET", "f", "0"}, "-ERR fill_ms is not a positive integer\r\n"},
		{[]string{"FILLGET", "f", "5000", "WAIT", "x"}, "-ERR WAIT is not a non-negative integer\r\n"},
		{[]string{"FILLSET", "f", "v", "0", "tok"}, "-ERR invalid expire time in 'fillset' command\r\n"},
		{[]string{"FILLSET", "f", "v", "1000", "tok"}, ":0\r\n"},
		{[]string{"GET", strings.Repeat("k", 5000)}, "-ERR key of 5000 bytes exceeds the key limit of 4096 bytes\r\n"},
		{[]string{"AUTH", "x"}, "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"},
		{[]string{"CLIENT", "SETINFO", "LIB-NAME", "test"}, "+OK\r\n"},
		{[]string{"SELECT", "0"}, "+OK\r\n"},
	} {
		if got := rc.do(t, tt.args...); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
		}
	}

	// The lease flow, in RESP2 and then RESP3.
	fill := rc.do(t, "FILLGET", "p", "5000")
	token := strings.TrimSuffix(fill[strings.LastIndex(fill[:len(fill)-2], "\n")+1:], "\r\n")
	if want := "*2\r\n+FILL\r\n" + bulk(token); fill != want || len(token) != 16 {
		t.Fatalf("FILLGET = %q", fill)
	}
	if got := rc.do(t, "FILLGET", "p", "5000"); got != "*2\r\n+BUSY\r\n$-1\r\n" {
		t.Fatalf("FILLGET busy = %q", got)
	}
	hello := rc.do(t, "HELLO", "3")
	if !strings.HasPrefix(hello, "%7\r\n"+bulk("server")+bulk("corral")) || !strings.Contains(hello, bulk("proto")+":3\r\n") {
		t.Fatalf("HELLO 3 = %q", hello)
	}
	if got := rc.do(t, "FILLGET", "p", "5000", "WAIT", "0"); got != "*2\r\n+BUSY\r\n_\r\n" {
		t.Fatalf("FILLGET busy in RESP3 = %q", got)
	}
	if got := rc.do(t, "FILLSET", "p", "page", "60", token, "SWR", "60000"); got != ":1\r\n" {
		t.Fatalf("FILLSET = %q", got)
	}
	if got := rc.do(t, "FILLSET", "p", "page", "60", token); got != ":0\r\n" {
		t.Fatalf("second FILLSET = %q", got)
	}
	// Past its 60 ms, within its SWR: stale, one refresh token.
	var stale string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(stale, "*3\r\n+STALE\r\n") && time.Now().Before(deadline) {
		stale = rc.do(t, "FILLGET", "p", "5000")
	}
	if !strings.HasPrefix(stale, "*3\r\n+STALE\r\n"+bulk("page")+"$16\r\n") {
		t.Fatalf("FILLGET stale = %q", stale)
	}
	if got := rc.do(t, "FILLGET", "p", "5000"); got != "*3\r\n+STALE\r\n"+bulk("page")+"_\r\n" {
		t.Fatalf("second stale FILLGET = %q", got)
	}
	if got := rc.do(t, "HELLO", "4"); got != "-NOPROTO unsupported protocol version\r\n" {
		t.Fatalf("HELLO 4 = %q", got)
	}
	if got := rc.do(t, "QUIT"); got != "+OK\r\n" {
		t.Fatalf("QUIT = %q", got)
	}
}

func TestRESPAuth(t *testing.T) {
	file := writeTokenFile(t, "s3cret")
	td := startTestDaemon(t, func(c *serveConfig) { c.apiTokenFile = file })
	rc := dialRESP(t, td.resp)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "k", "v"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"GET", "k"}, "$-1\r\n"}, // reads are open without --api-token-reads, as over HTTP
		{[]string{"FILLSET", "k", "v", "1000", "t"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"SET", "k", "v"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "default", "s3cret"}, "+OK\r\n"},
		{[]string{"SET", "k", "v"}, "+OK\r\n"},
		{[]string{"GET", "k"}, bulk("v")},
	} {
		if got := rc.do(t, tt.args...); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
		}
	}
	// HELLO with AUTH, as RESP3 clients authenticate.
	rc2 := dialRESP(t, td.resp)
	if got := rc2.do(t, "HELLO", "3", "AUTH", "default", "wrong"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("HELLO AUTH wrong = %q", got)
	}
	if got := rc2.do(t, "HELLO", "3", "AUTH", "default", "s3cret"); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO AUTH = %q", got)
	}
	if got := rc2.do(t, "DEL", "k"); got != ":1\r\n" {
		t.Fatalf("DEL after HELLO AUTH = %q", got)
	}
}

// A client that sends more than a value's worth without completing a command is cut off
// with an error; the daemon goes on serving others.
func TestRESPCommandTooLarge(t *testing.T) {
	td := startTestDaemon(t, func(c *serveConfig) { c.maxValueBytes = 1 << 10 })
	rc := dialRESP(t, td.resp)
	if _, err := rc.c.Write([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$999999\r\n")); err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("x", 4096))
	var reply string
	for i := 0; i < 64; i++ {
		if _, err := rc.c.Write(chunk); err != nil {
			break // the server closed the connection
		}
	}
	reply, _ = rc.reply()
	if !strings.HasPrefix(reply, "-ERR Protocol error: command exceeds") {
		t.Fatalf("reply = %q", reply)
	}
	if got := td.limitHits("resp_command"); got != 1 {
		t.Fatalf("resp_command hits = %v, want 1", got)
	}
	if got := dialRESP(t, td.resp).do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after = %q", got)
	}
}

// A waiter whose client hangs up is never handed the lease: when the holder's lease lapses,
// a caller that is still there gets it. A command pipelined behind a waiting FILLGET is
// answered after it.
func TestRESPWaiterThatHangsUp(t *testing.T) {
	td := startTestDaemon(t, nil)
	holder := dialRESP(t, td.resp)
	// The holder's lease lapses after 1.5 s: time enough, on a busy machine, for the node to
	// read the hung-up waiter's request while the lease is held, and see it gone.
	if got := holder.do(t, "FILLGET", "k", "1500"); !strings.HasPrefix(got, "*2\r\n+FILL\r\n") {
		t.Fatalf("holder = %q", got)
	}
	gone := dialRESP(t, td.resp)
	if _, err := gone.c.Write([]byte("*5\r\n$7\r\nFILLGET\r\n$1\r\nk\r\n$4\r\n5000\r\n$4\r\nWAIT\r\n$5\r\n20000\r\n")); err != nil {
		t.Fatal(err)
	}
	gone.c.Close()
	// The hung-up waiter asked for 5 s: had it been handed the lease, this caller, waiting 3 s,
	// would be answered busy.
	if got := dialRESP(t, td.resp).do(t, "FILLGET", "k", "5000", "WAIT", "3000"); !strings.HasPrefix(got, "*2\r\n+FILL\r\n") {
		t.Fatalf("after the lapse, the caller still there got %q", got)
	}

	p := dialRESP(t, td.resp)
	if _, err := p.c.Write([]byte("*5\r\n$7\r\nFILLGET\r\n$1\r\nk\r\n$4\r\n5000\r\n$4\r\nWAIT\r\n$2\r\n50\r\n*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"*2\r\n+BUSY\r\n$-1\r\n", "+PONG\r\n"} {
		if got, err := p.reply(); got != want || err != nil {
			t.Fatalf("pipelined reply = %q, %v; want %q", got, err, want)
		}
	}
}

// With an API token, a lease needs it: without it, ?lease is a plain read and FILLGET is
// refused, and neither holds the key up for a caller with the token. A lease past
// --max-lease is refused; a client's leases are bounded by --max-client-leases (429, -BUSY)
// while another client is still granted one; a group without the token is not created by
// a read.
func TestLeaseBounds(t *testing.T) {
	file := writeTokenFile(t, "s3cret")
	td := startTestDaemon(t, func(c *serveConfig) {
		c.apiTokenFile = file
		c.leases.MaxLease = 10 * time.Second
		c.leases.MaxClientLeases = 2
		c.groups = listFlag{"pages"}
	})
	auth := []string{"Authorization", "Bearer s3cret"}

	// Without the token: a plain read, no lease.
	resp, _ := td.do(t, "GET", "/v1/groups/pages/keys/k?lease=5s", "")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(leaseTokenHeader) != "" || resp.Header.Get(leaseStateHeader) != "" {
		t.Fatalf("?lease without the token: %d %v, want a plain read (404)", resp.StatusCode, resp.Header)
	}
	rc := dialRESP(t, td.resp)
	if got := rc.do(t, "FILLGET", "k", "5000"); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("FILLGET without AUTH = %q", got)
	}
	// The caller with the token is granted the lease: nobody took it.
	resp, _ = td.do(t, "GET", "/v1/groups/pages/keys/k?lease=5s", "", auth...)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get(leaseTokenHeader) == "" {
		t.Fatalf("?lease with the token: %d %v", resp.StatusCode, resp.Header)
	}
	if got := rc.do(t, "AUTH", "s3cret"); got != "+OK\r\n" {
		t.Fatalf("AUTH = %q", got)
	}
	fill := rc.do(t, "FILLGET", "k", "5000")
	if !strings.HasPrefix(fill, "*2\r\n+FILL\r\n") {
		t.Fatalf("FILLGET after AUTH = %q", fill)
	}
	token := strings.TrimSuffix(fill[strings.LastIndex(fill[:len(fill)-2], "\n")+1:], "\r\n")

	// Past --max-lease.
	if resp, body := td.do(t, "GET", "/v1/groups/pages/keys/long?lease=11s", "", auth...); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "--max-lease") {
		t.Fatalf("?lease=11s: %d %s", resp.StatusCode, body)
	}
	if got := rc.do(t, "FILLGET", "long", "3600000"); !strings.HasPrefix(got, "-ERR ") || !strings.Contains(got, "--max-lease") {
		t.Fatalf("FILLGET long 3600000 = %q", got)
	}

	// 127.0.0.1 holds two leases: pages/k over HTTP, resp/k over RESP.
	if got := td.d.leases.Held("127.0.0.1"); got != 2 {
		t.Fatalf("127.0.0.1 holds %d leases, want 2", got)
	}
	if got := rc.do(t, "FILLGET", "third", "5000"); !strings.HasPrefix(got, "-BUSY ") || !strings.Contains(got, "--max-client-leases") {
		t.Fatalf("a third lease over RESP = %q", got)
	}
	if resp, body := td.do(t, "GET", "/v1/groups/pages/keys/third?lease=5s", "", auth...); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "--max-client-leases") {
		t.Fatalf("a third lease over HTTP: %d %s", resp.StatusCode, body)
	}
	if got := td.limitHits("client_leases"); got != 2 {
		t.Fatalf("client_leases hits = %v, want 2", got)
	}
	// Another client is granted one.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	defer other.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+td.http+"/v1/groups/pages/keys/third?lease=5s", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	r2, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusAccepted {
		t.Fatalf("another client's lease: %d", r2.StatusCode)
	}
	// A FILLSET through this node gives the client's slot back.
	if got := rc.do(t, "FILLSET", "k", "v", "60000", token); got != ":1\r\n" {
		t.Fatalf("FILLSET = %q", got)
	}
	if got := rc.do(t, "FILLGET", "third", "5000"); !strings.HasPrefix(got, "*2\r\n+FILL\r\n") {
		t.Fatalf("a lease after a FILLSET gave a slot back = %q", got)
	}

	// Without the token, a read never creates a group; with it, it does.
	if resp, body := td.do(t, "GET", "/v1/groups/junk/keys/k", ""); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no group") {
		t.Fatalf("a read of a new group without the token: %d %s", resp.StatusCode, body)
	}
	if _, ok := td.d.groups.Existing("junk"); ok {
		t.Fatal("a read without the token created a group")
	}
	if resp, _ := td.do(t, "GET", "/v1/groups/junk/keys/k", "", auth...); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a read of a new group with the token: %d", resp.StatusCode)
	}
	if _, ok := td.d.groups.Existing("junk"); !ok {
		t.Fatal("a read with the token did not create the group")
	}
}
