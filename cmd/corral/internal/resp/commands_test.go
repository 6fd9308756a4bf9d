package resp

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/fill"
)

func TestRESPCommands(t *testing.T) {
	td := startTestServer(t, nil)
	rc := servetest.DialRESP(t, td.addr)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"ping", "hi"}, servetest.Bulk("hi")},
		{[]string{"GET", "k"}, "$-1\r\n"},
		{[]string{"SET", "k", "v"}, "+OK\r\n"},
		{[]string{"GET", "k"}, servetest.Bulk("v")},
		{[]string{"SET", "k", "v2", "PX", "60000"}, "+OK\r\n"},
		{[]string{"GET", "k"}, servetest.Bulk("v2")},
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
		{[]string{"CLIENT", "TRACKING", "ON", "OPTIN"}, "-ERR CLIENT TRACKING is not supported: corral pushes no invalidations for client-side caching (rueidis: set ClientOption.DisableCache)\r\n"},
		{[]string{"SELECT", "0"}, "+OK\r\n"},
	} {
		if got := rc.Do(t, tt.args...); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
		}
	}

	// The lease flow, in RESP2 and then RESP3.
	fill := rc.Do(t, "FILLGET", "p", "5000")
	token := strings.TrimSuffix(fill[strings.LastIndex(fill[:len(fill)-2], "\n")+1:], "\r\n")
	if want := "*2\r\n+FILL\r\n" + servetest.Bulk(token); fill != want || len(token) != 16 {
		t.Fatalf("FILLGET = %q", fill)
	}
	if got := rc.Do(t, "FILLGET", "p", "5000"); got != "*2\r\n+BUSY\r\n$-1\r\n" {
		t.Fatalf("FILLGET busy = %q", got)
	}
	hello := rc.Do(t, "HELLO", "3")
	if !strings.HasPrefix(hello, "%7\r\n"+servetest.Bulk("server")+servetest.Bulk("corral")) || !strings.Contains(hello, servetest.Bulk("proto")+":3\r\n") {
		t.Fatalf("HELLO 3 = %q", hello)
	}
	if got := rc.Do(t, "FILLGET", "p", "5000", "WAIT", "0"); got != "*2\r\n+BUSY\r\n_\r\n" {
		t.Fatalf("FILLGET busy in RESP3 = %q", got)
	}
	if got := rc.Do(t, "FILLSET", "p", "page", "60", token, "SWR", "60000"); got != ":1\r\n" {
		t.Fatalf("FILLSET = %q", got)
	}
	if got := rc.Do(t, "FILLSET", "p", "page", "60", token); got != ":0\r\n" {
		t.Fatalf("second FILLSET = %q", got)
	}
	// Past its 60 ms, within its SWR: stale, one refresh token.
	var stale string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasPrefix(stale, "*3\r\n+STALE\r\n") && time.Now().Before(deadline) {
		stale = rc.Do(t, "FILLGET", "p", "5000")
	}
	if !strings.HasPrefix(stale, "*3\r\n+STALE\r\n"+servetest.Bulk("page")+"$16\r\n") {
		t.Fatalf("FILLGET stale = %q", stale)
	}
	if got := rc.Do(t, "FILLGET", "p", "5000"); got != "*3\r\n+STALE\r\n"+servetest.Bulk("page")+"_\r\n" {
		t.Fatalf("second stale FILLGET = %q", got)
	}
	if got := rc.Do(t, "HELLO", "4"); got != "-NOPROTO unsupported protocol version\r\n" {
		t.Fatalf("HELLO 4 = %q", got)
	}
	if got := rc.Do(t, "QUIT"); got != "+OK\r\n" {
		t.Fatalf("QUIT = %q", got)
	}
}

func TestRESPAuth(t *testing.T) {
	td := startTestServer(t, func(c *Config) { c.Token = servetest.Token(t, "s3cret") })
	rc := servetest.DialRESP(t, td.addr)
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
		{[]string{"GET", "k"}, servetest.Bulk("v")},
	} {
		if got := rc.Do(t, tt.args...); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
		}
	}
	// HELLO with AUTH, as RESP3 clients authenticate.
	rc2 := servetest.DialRESP(t, td.addr)
	if got := rc2.Do(t, "HELLO", "3", "AUTH", "default", "wrong"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("HELLO AUTH wrong = %q", got)
	}
	if got := rc2.Do(t, "HELLO", "3", "AUTH", "default", "s3cret"); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO AUTH = %q", got)
	}
	if got := rc2.Do(t, "DEL", "k"); got != ":1\r\n" {
		t.Fatalf("DEL after HELLO AUTH = %q", got)
	}
}

// A client that sends more than a value's worth without completing a command is cut off
// with an error; the daemon goes on serving others.
func TestRESPCommandTooLarge(t *testing.T) {
	td := startTestServer(t, func(c *Config) { c.MaxValueBytes = 1 << 10 })
	rc := servetest.DialRESP(t, td.addr)
	if _, err := rc.Conn.Write([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$999999\r\n")); err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("x", 4096))
	var reply string
	for i := 0; i < 64; i++ {
		if _, err := rc.Conn.Write(chunk); err != nil {
			break // the server closed the connection
		}
	}
	reply, _ = rc.Reply()
	if !strings.HasPrefix(reply, "-ERR Protocol error: command exceeds") {
		t.Fatalf("reply = %q", reply)
	}
	if got := td.limitHits("resp_command"); got != 1 {
		t.Fatalf("resp_command hits = %v, want 1", got)
	}
	if got := servetest.DialRESP(t, td.addr).Do(t, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after = %q", got)
	}
}

// A waiter whose client hangs up is never handed the lease: when the holder's lease lapses,
// a caller that is still there gets it. A command pipelined behind a waiting FILLGET is
// answered after it.
func TestRESPWaiterThatHangsUp(t *testing.T) {
	td := startTestServer(t, nil)
	holder := servetest.DialRESP(t, td.addr)
	// The holder's lease lapses after 1.5 s: time enough, on a busy machine, for the node to
	// read the hung-up waiter's request while the lease is held, and see it gone.
	if got := holder.Do(t, "FILLGET", "k", "1500"); !strings.HasPrefix(got, "*2\r\n+FILL\r\n") {
		t.Fatalf("holder = %q", got)
	}
	gone := servetest.DialRESP(t, td.addr)
	if _, err := gone.Conn.Write([]byte("*5\r\n$7\r\nFILLGET\r\n$1\r\nk\r\n$4\r\n5000\r\n$4\r\nWAIT\r\n$5\r\n20000\r\n")); err != nil {
		t.Fatal(err)
	}
	gone.Conn.Close()
	// The hung-up waiter asked for 5 s: had it been handed the lease, this caller, waiting 3 s,
	// would be answered busy.
	if got := servetest.DialRESP(t, td.addr).Do(t, "FILLGET", "k", "5000", "WAIT", "3000"); !strings.HasPrefix(got, "*2\r\n+FILL\r\n") {
		t.Fatalf("after the lapse, the caller still there got %q", got)
	}

	p := servetest.DialRESP(t, td.addr)
	if _, err := p.Conn.Write([]byte("*5\r\n$7\r\nFILLGET\r\n$1\r\nk\r\n$4\r\n5000\r\n$4\r\nWAIT\r\n$2\r\n50\r\n*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"*2\r\n+BUSY\r\n$-1\r\n", "+PONG\r\n"} {
		if got, err := p.Reply(); got != want || err != nil {
			t.Fatalf("pipelined reply = %q, %v; want %q", got, err, want)
		}
	}
}

// Over the Redis protocol, SET and FILLSET take TAGS and DELTAG purges.
func TestRESPTags(t *testing.T) {
	td := startTestServer(t, nil)
	rc := servetest.DialRESP(t, td.addr)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "a", "A", "TAGS", "t1", "t2"}, "+OK\r\n"},
		{[]string{"SET", "b", "B", "PX", "60000", "TAGS", "t2"}, "+OK\r\n"},
		{[]string{"SET", "c", "C"}, "+OK\r\n"},
		{[]string{"SET", "tags", "TAGS"}, "+OK\r\n"}, // a key and a value spelled tags are no option
		{[]string{"SET", "d", "D", "TAGS"}, "-ERR syntax error: TAGS takes at least one tag\r\n"},
		{[]string{"SET", "d", "D", "TAGS", "a b"}, "-ERR tag \"a b\": a space or control character\r\n"},
		{[]string{"DELTAG", "t2"}, ":1\r\n"},
		{[]string{"GET", "a"}, "$-1\r\n"},
		{[]string{"GET", "b"}, "$-1\r\n"},
		{[]string{"GET", "c"}, servetest.Bulk("C")},
		{[]string{"GET", "tags"}, servetest.Bulk("TAGS")},
		{[]string{"DELTAG"}, "-ERR wrong number of arguments for 'deltag' command\r\n"},
	} {
		if got := rc.Do(t, tt.args...); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
		}
	}
	fill := rc.Do(t, "FILLGET", "p", "5000")
	token := strings.TrimSuffix(fill[strings.LastIndex(fill[:len(fill)-2], "\n")+1:], "\r\n")
	if got := rc.Do(t, "FILLSET", "p", "P", "60000", token, "SWR", "1000", "TAGS", "page"); got != ":1\r\n" {
		t.Fatalf("FILLSET … TAGS = %q", got)
	}
	if got := rc.Do(t, "GET", "p"); got != servetest.Bulk("P") {
		t.Fatalf("GET p = %q", got)
	}
	rc.Do(t, "DELTAG", "page")
	if got := rc.Do(t, "GET", "p"); got != "$-1\r\n" {
		t.Fatalf("GET p after DELTAG page = %q", got)
	}
}

// EXISTS, TTL and PTTL answer as Redis does, from what the key's owner holds.
func TestRESPExistsAndTTL(t *testing.T) {
	td := startTestServer(t, nil)
	rc := servetest.DialRESP(t, td.addr)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "forever", "v"}, "+OK\r\n"}, // the group's TTL: none
		{[]string{"SET", "minute", "v", "EX", "60"}, "+OK\r\n"},
		{[]string{"EXISTS", "forever"}, ":1\r\n"},
		{[]string{"EXISTS", "forever", "forever", "missing", "minute"}, ":3\r\n"},
		{[]string{"EXISTS", "missing"}, ":0\r\n"},
		{[]string{"TTL", "forever"}, ":-1\r\n"},
		{[]string{"PTTL", "forever"}, ":-1\r\n"},
		{[]string{"TTL", "missing"}, ":-2\r\n"},
		{[]string{"PTTL", "missing"}, ":-2\r\n"},
		{[]string{"DEL", "minute"}, ":1\r\n"},
		{[]string{"EXISTS", "minute"}, ":0\r\n"},
		{[]string{"TTL", "minute"}, ":-2\r\n"},
		{[]string{"EXISTS"}, "-ERR wrong number of arguments for 'exists' command\r\n"},
		{[]string{"TTL"}, "-ERR wrong number of arguments for 'ttl' command\r\n"},
		{[]string{"PTTL", "a", "b"}, "-ERR wrong number of arguments for 'pttl' command\r\n"},
		{[]string{"TTL", strings.Repeat("k", 5000)}, "-ERR key of 5000 bytes exceeds the key limit of 4096 bytes\r\n"},
	} {
		if got := rc.Do(t, tt.args...); got != tt.want {
			t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
		}
	}
	// 59.99… s, rounded as Redis rounds (TestRedisTTL: the rounding's edges).
	if got := rc.Do(t, "SET", "minute", "v", "EX", "60") + rc.Do(t, "TTL", "minute"); got != "+OK\r\n:60\r\n" && got != "+OK\r\n:59\r\n" {
		t.Errorf("TTL after EX 60 = %q", got)
	}
	pttl := rc.Do(t, "SET", "k", "v", "PX", "60000") + rc.Do(t, "PTTL", "k")
	if ms, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(pttl, "+OK\r\n:"), "\r\n")); err != nil || ms <= 50_000 || ms > 60_000 {
		t.Errorf("PTTL after PX 60000 = %q", pttl)
	}

	// A value past its freshness, still served within its grace: it exists, with 0 left.
	granted := rc.Do(t, "FILLGET", "stale", "5000")
	token := strings.TrimSuffix(granted[strings.LastIndex(granted[:len(granted)-2], "\n")+1:], "\r\n")
	if got := rc.Do(t, "FILLSET", "stale", "v", "20", token, "SWR", "600000"); got != ":1\r\n" {
		t.Fatalf("FILLSET = %q", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rc.Do(t, "PTTL", "stale") != ":0\r\n" {
		if time.Now().After(deadline) {
			t.Fatal("PTTL of a stale value never reached 0")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := rc.Do(t, "TTL", "stale") + rc.Do(t, "EXISTS", "stale"); got != ":0\r\n:1\r\n" {
		t.Errorf("TTL and EXISTS of a stale value = %q", got)
	}
}

// TTL rounds to the nearest second, half up, and PTTL truncates to the millisecond, as
// Redis's ttlGenericCommand does.
func TestRedisTTL(t *testing.T) {
	tests := []struct {
		fresh   time.Duration
		found   bool
		ttl, ms int64
	}{
		{0, false, -2, -2},
		{fill.Never, true, -1, -1},
		{0, true, 0, 0},
		{-time.Second, true, 0, 0},
		{499 * time.Millisecond, true, 0, 499},
		{500 * time.Millisecond, true, 1, 500},
		{1499*time.Millisecond + 999*time.Microsecond, true, 1, 1499},
		{1500 * time.Millisecond, true, 2, 1500},
		{time.Hour, true, 3600, 3_600_000},
	}
	for _, tt := range tests {
		if got := redisTTL(tt.fresh, tt.found, false); got != tt.ttl {
			t.Errorf("TTL of %v (found %v) = %d, want %d", tt.fresh, tt.found, got, tt.ttl)
		}
		if got := redisTTL(tt.fresh, tt.found, true); got != tt.ms {
			t.Errorf("PTTL of %v (found %v) = %d, want %d", tt.fresh, tt.found, got, tt.ms)
		}
	}
}
