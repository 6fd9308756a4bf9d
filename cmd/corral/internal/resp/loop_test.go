//go:build linux

package resp

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/clustertest"
)

// loopGets, toGoroutine and toLoop read the loops' counters.
func (ts *testServer) loopGets() float64 { return testutil.ToFloat64(ts.s.cfg.Metrics.loopGets) }
func (ts *testServer) toGoroutine() float64 {
	return testutil.ToFloat64(ts.s.cfg.Metrics.toConn)
}
func (ts *testServer) toLoop() float64 { return testutil.ToFloat64(ts.s.cfg.Metrics.toLoop) }

// A pipeline of GETs of held values is answered on the loop, whole, in order; the
// connection never goes to a goroutine.
func TestLoopAnswersHeldGets(t *testing.T) {
	ts := startTestServer(t, nil)
	w := servetest.DialRESP(t, ts.addr)
	for i := range 10 {
		if got := w.Do(t, "SET", fmt.Sprint("k", i), fmt.Sprint("v", i)); got != "+OK\r\n" {
			t.Fatalf("SET = %q", got)
		}
	}
	moved := ts.toGoroutine() // the writer's connection went to a goroutine at its SET
	gets := ts.loopGets()
	c := servetest.DialRESP(t, ts.addr)
	var cmds, want strings.Builder
	for i := range 30 {
		cmds.WriteString(command("GET", fmt.Sprint("k", i%10)))
		want.WriteString(servetest.Bulk(fmt.Sprint("v", i%10)))
	}
	if _, err := c.Conn.Write([]byte(cmds.String())); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for range 30 {
		r, err := c.Reply()
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(r)
	}
	if got.String() != want.String() {
		t.Fatalf("replies = %q, want %q", got.String(), want.String())
	}
	if n := ts.loopGets() - gets; n != 30 {
		t.Fatalf("the loop answered %v GETs, want 30", n)
	}
	if n := ts.toGoroutine() - moved; n != 0 {
		t.Fatalf("%v connections went to a goroutine", n)
	}
}

// A command the loop does not answer moves the connection to its goroutine in the middle of
// a pipeline: every reply comes, in order, each command seeing the ones before it. After 16
// GETs of held values in a row the connection is back on the loop.
func TestLoopMovesInOrder(t *testing.T) {
	ts := startTestServer(t, nil)
	c := servetest.DialRESP(t, ts.addr)
	if got := c.Do(t, "SET", "a", "1"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	clustertest.Eventually(t, "the connection back on its loop", func() bool {
		c.Do(t, "GET", "a")
		return ts.toLoop() >= 1
	})
	moved, back := ts.toGoroutine(), ts.toLoop()
	replies := pipelineReplies(t, c, [][]string{
		{"GET", "a"}, {"SET", "a", "2"}, {"GET", "a"}, {"GET", "nothing"}, {"PING"}, {"GET", "a"},
	})
	want := []string{servetest.Bulk("1"), "+OK\r\n", servetest.Bulk("2"), "$-1\r\n", "+PONG\r\n", servetest.Bulk("2")}
	if strings.Join(replies, "") != strings.Join(want, "") {
		t.Fatalf("replies = %q, want %q", replies, want)
	}
	if n := ts.toGoroutine() - moved; n != 1 {
		t.Fatalf("the connection moved to a goroutine %v times, want once (at the SET)", n)
	}
	for range handBackAfter {
		if got := c.Do(t, "GET", "a"); got != servetest.Bulk("2") {
			t.Fatal(got)
		}
	}
	clustertest.Eventually(t, "the connection back on its loop", func() bool { return ts.toLoop() == back+1 })
	gets := ts.loopGets()
	if got := c.Do(t, "GET", "a"); got != servetest.Bulk("2") {
		t.Fatal(got)
	}
	if ts.loopGets() != gets+1 {
		t.Fatalf("loop GETs went from %v to %v: the GET was not answered on the loop", gets, ts.loopGets())
	}
}

// pipelineReplies sends cmds in one write and reads a reply for each.
func pipelineReplies(t *testing.T, c *servetest.RESPClient, cmds [][]string) []string {
	t.Helper()
	var b strings.Builder
	for _, cmd := range cmds {
		b.WriteString(command(cmd...))
	}
	if _, err := c.Conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	var out []string
	for range cmds {
		r, err := c.Reply()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// A GET that arrives in pieces is answered once it is whole, whether it was cut in its
// header, its name or its key.
func TestLoopCommandInPieces(t *testing.T) {
	ts := startTestServer(t, nil)
	servetest.DialRESP(t, ts.addr).Do(t, "SET", "key", "value")
	full := command("GET", "key")
	for cut := 1; cut < len(full); cut++ {
		c := servetest.DialRESP(t, ts.addr)
		if _, err := io.WriteString(c.Conn, full[:cut]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // let the first piece be read alone, most of the time
		if _, err := io.WriteString(c.Conn, full[cut:]); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Reply(); err != nil || got != servetest.Bulk("value") {
			t.Fatalf("cut at %d: %q, %v", cut, got, err)
		}
	}
}

// A client that sends GETs of a large value and reads nothing fills its socket: the loop
// moves it to its goroutine with the replies not yet written, and the client, reading at
// last, gets every reply whole and in order.
func TestLoopSlowReader(t *testing.T) {
	ts := startTestServer(t, nil)
	big := strings.Repeat("x", 256<<10)
	servetest.DialRESP(t, ts.addr).Do(t, "SET", "big", big)
	moved := ts.toGoroutine()
	c := servetest.DialRESP(t, ts.addr)
	const n = 64 // 16 MiB of replies, more than the socket buffers hold
	var b strings.Builder
	for i := range n {
		b.WriteString(command("GET", "big"))
		if i == n/2 {
			b.WriteString(command("ECHO", "middle"))
		}
	}
	if _, err := c.Conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, "the connection on its goroutine", func() bool { return ts.toGoroutine() > moved })
	for i := range n + 1 {
		got, err := c.Reply()
		want := servetest.Bulk(big)
		if i == n/2+1 {
			want = servetest.Bulk("middle")
		}
		if err != nil || got != want {
			t.Fatalf("reply %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// A connection idle on its loop past --resp-idle-timeout is told so and closed, as any idle
// connection is, and counted.
func TestLoopIdle(t *testing.T) {
	ts := startTestServer(t, func(c *Config) { c.Limits.IdleTimeout = 300 * time.Millisecond })
	servetest.DialRESP(t, ts.addr).Do(t, "SET", "k", "v")
	c := servetest.DialRESP(t, ts.addr)
	gets := ts.loopGets()
	if got := c.Do(t, "GET", "k"); got != servetest.Bulk("v") {
		t.Fatal(got)
	}
	if ts.loopGets() != gets+1 {
		t.Fatal("the GET was not answered on the loop")
	}
	if got := readAll(t, c.Conn); !strings.HasPrefix(got, "-ERR idle for 300ms (--resp-idle-timeout)") {
		t.Fatalf("an idle connection got %q", got)
	}
	if got := ts.limitHits("resp_idle_timeout"); got < 1 {
		t.Fatalf("resp_idle_timeout hits = %v", got)
	}
}

// Clients that leave, and a server that stops, end the connections on the loops: the gauge
// comes back to 0, and Close returns with the clients' connections closed.
func TestLoopConnectionsEnd(t *testing.T) {
	ts := startTestServer(t, nil)
	w := servetest.DialRESP(t, ts.addr)
	w.Do(t, "SET", "k", "v")
	w.Conn.Close()
	var conns []*servetest.RESPClient
	for range 20 {
		c := servetest.DialRESP(t, ts.addr)
		if got := c.Do(t, "GET", "k"); got != servetest.Bulk("v") {
			t.Fatal(got)
		}
		conns = append(conns, c)
	}
	for _, c := range conns[:10] {
		c.Conn.Close()
	}
	clustertest.Eventually(t, "the 10 that left, and the writer, gone", func() bool { return counterGauge(ts) == 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns[10:] {
		c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Conn.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("a connection of a stopped server: read %v, want EOF", err)
		}
	}
	if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		t.Fatal("the stopped server still accepts")
	}
}

// With a token for reads, a GET before AUTH is refused even of a held value, on the loop as
// on a goroutine; after AUTH it is answered.
func TestLoopAuth(t *testing.T) {
	ts := startTestServer(t, func(c *Config) {
		c.Token = servetest.Token(t, "sesame")
		c.TokenReads = true
	})
	w := servetest.DialRESP(t, ts.addr)
	w.Do(t, "AUTH", "sesame")
	w.Do(t, "SET", "k", "v")
	c := servetest.DialRESP(t, ts.addr)
	if got := c.Do(t, "GET", "k"); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("GET before AUTH = %q", got)
	}
	if got := c.Do(t, "AUTH", "sesame"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := c.Do(t, "GET", "k"); got != servetest.Bulk("v") {
		t.Fatalf("GET after AUTH = %q", got)
	}
}

// A loop whose epoll instance fails gives its connections to goroutines of their own, and
// so are those given to it later, for good: every client is served still, none is closed,
// and none goes back to the loop.
func TestLoopBroken(t *testing.T) {
	ts := startTestServer(t, nil)
	if len(ts.s.loops) != 1 {
		t.Fatalf("%d loops, want 1", len(ts.s.loops))
	}
	l := ts.s.loops[0]
	w := servetest.DialRESP(t, ts.addr) // on a goroutine after its SET
	w.Do(t, "SET", "k", "v")
	a := servetest.DialRESP(t, ts.addr) // on the loop
	gets := ts.loopGets()
	if got := a.Do(t, "GET", "k"); got != servetest.Bulk("v") || ts.loopGets() != gets+1 {
		t.Fatalf("GET = %q, answered on the loop: %v", got, ts.loopGets()-gets)
	}
	l.failNext.Store(true)
	l.mu.Lock()
	l.poke()
	l.mu.Unlock()
	clustertest.Eventually(t, "the loop broken", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.broken
	})
	gets, back := ts.loopGets(), ts.toLoop()
	b := servetest.DialRESP(t, ts.addr) // given to the broken loop
	for _, c := range []*servetest.RESPClient{w, a, b} {
		for i := range 2 * handBackAfter {
			if got := c.Do(t, "GET", "k"); got != servetest.Bulk("v") {
				t.Fatalf("GET %d after the loop broke = %q", i, got)
			}
		}
	}
	if got := a.Do(t, "SET", "k", "w"); got != "+OK\r\n" {
		t.Fatalf("SET after the loop broke = %q", got)
	}
	if got := b.Do(t, "GET", "k"); got != servetest.Bulk("w") {
		t.Fatalf("GET after the SET = %q", got)
	}
	if n := ts.loopGets() - gets; n != 0 {
		t.Errorf("the broken loop answered %v GETs", n)
	}
	if n := ts.toLoop() - back; n != 0 {
		t.Errorf("%v connections went back to the broken loop", n)
	}
	if n := counterGauge(ts); n != 3 {
		t.Errorf("%v connections counted, want 3", n)
	}
}

// A GET of a near copy of a hot key another node owns is answered on the loop: a new
// connection's, with no move to a goroutine. (A near copy lives a second: each try reads the
// key until it is kept near again, then asks on a new connection.)
func TestLoopAnswersNearCopies(t *testing.T) {
	ts := startTestServer(t, nil)
	g, key := servetest.OwnerElsewhere(t, ts.s.cfg.Node, ts.s.cfg.MaxValueBytes, "resp")
	if err := g.Set(context.Background(), key, objects.Object{Body: []byte("owned elsewhere")}); err != nil {
		t.Fatal(err)
	}
	ts.nearCopyOnLoop(t, key, servetest.Bulk("owned elsewhere"))
}

// A purge drops the near copies the loops answer: once RemoveByTag has returned, no GET
// through the node gets a near copy of a value stored with the tag before it.
func TestLoopDropsPurgedNearCopies(t *testing.T) {
	ts := startTestServer(t, nil)
	g, key := servetest.OwnerElsewhere(t, ts.s.cfg.Node, ts.s.cfg.MaxValueBytes, "resp")
	if err := g.SetWithTags(context.Background(), key, objects.Object{Body: []byte("owned elsewhere")}, "page-7"); err != nil {
		t.Fatal(err)
	}
	ts.nearCopyOnLoop(t, key, servetest.Bulk("owned elsewhere"))
	if err := ts.s.cfg.Node.RemoveByTag(context.Background(), "page-7"); err != nil {
		t.Fatal(err)
	}
	// The owner lost the value too, and the group has no origin: the key is not found now.
	for i := range 3 {
		if got := servetest.DialRESP(t, ts.addr).Do(t, "GET", key); got != "$-1\r\n" {
			t.Fatalf("GET %d after the purge, on a new connection = %q, want a null bulk string", i, got)
		}
	}
}

// nearCopyOnLoop waits until a GET of key, which another node owns and holds, on a new
// connection is answered on the loop (want) from the node's near copy.
func (ts *testServer) nearCopyOnLoop(t *testing.T, key, want string) {
	t.Helper()
	reader := servetest.DialRESP(t, ts.addr)
	clustertest.Eventually(t, "a near copy answered on the loop", func() bool {
		for range 3 { // the second read through the owner keeps a near copy
			if got := reader.Do(t, "GET", key); got != want {
				t.Fatalf("GET through the owner = %q", got)
			}
		}
		c := servetest.DialRESP(t, ts.addr)
		gets, moved := ts.loopGets(), ts.toGoroutine()
		if got := c.Do(t, "GET", key); got != want {
			t.Fatalf("GET on a new connection = %q", got)
		}
		return ts.loopGets() == gets+1 && ts.toGoroutine() == moved
	})
}
