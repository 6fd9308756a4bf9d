package resp

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/clustertest"
)

// readAll reads what the server sends until it closes the connection (or 10 s pass).
func readAll(tb testing.TB, c net.Conn) string {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		tb.Fatalf("the server kept the connection open 10 s; it sent %q", b)
	}
	return string(b)
}

// Requests whose numbers are out of every bound are answered with an error and the
// connection closes at once, before AUTH; the node serves the next client. (redcon's reader
// panicked on the first, and spun a core on the second.)
func TestRESPHostileHeaders(t *testing.T) {
	td := startTestServer(t, func(c *Config) { c.Token = servetest.Token(t, "s3cret") })
	tests := []struct {
		name, in, want, limit string
	}{
		{"length 2^63-1", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length\r\n", "resp_protocol"},
		{"length 2^59", "*1\r\n$576460752303423488\r\n", "-ERR Protocol error: command exceeds the", "resp_command"},
		{"count 2^40", "*1099511627776\r\n", "-ERR Protocol error: a command of 1099511627776 arguments exceeds the limit of 10001\r\n", "resp_command"},
		{"4 GiB", "*2\r\n$3\r\nSET\r\n$4294967296\r\n", "-ERR Protocol error: command exceeds the", "resp_command"},
		{"not a bulk", "*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n", "resp_protocol"},
		{"inline too long", strings.Repeat("A", maxInlineBytes+10) + "\r\n", "-ERR Protocol error: an inline command exceeds", "resp_command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := td.limitHits(tt.limit)
			c, err := net.Dial("tcp", td.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.in)
			if got := readAll(t, c); !strings.HasPrefix(got, tt.want) {
				t.Fatalf("reply %q, want %q and the connection closed", got, tt.want)
			}
			if got := td.limitHits(tt.limit); got != before+1 {
				t.Fatalf("%s hits grew by %v, want 1", tt.limit, got-before)
			}
			if got := servetest.DialRESP(t, td.addr).Do(t, "PING"); got != "+PONG\r\n" {
				t.Fatalf("PING after = %q", got)
			}
		})
	}
}

// --resp-max-conns, --resp-idle-timeout and --resp-command-timeout: each refusal is told,
// counted, and leaves the node serving.
func TestRESPConnectionBounds(t *testing.T) {
	td := startTestServer(t, func(c *Config) {
		c.Limits.MaxConns = 2
		c.Limits.IdleTimeout = 500 * time.Millisecond
		c.Limits.CommandTimeout = 500 * time.Millisecond
	})
	t.Run("max conns", func(t *testing.T) {
		a, b := servetest.DialRESP(t, td.addr), servetest.DialRESP(t, td.addr)
		a.Do(t, "PING")
		b.Do(t, "PING") // both are being served
		c, err := net.Dial("tcp", td.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := readAll(t, c); got != "-ERR max number of clients reached (2, --resp-max-conns)\r\n" {
			t.Fatalf("a third connection got %q", got)
		}
		if got := td.limitHits("resp_connections"); got != 1 {
			t.Fatalf("resp_connections hits = %v", got)
		}
		a.Conn.Close()
		clustertest.Eventually(t, "a place to free", func() bool { return counterGauge(td) < 2 })
		if got := servetest.DialRESP(t, td.addr).Do(t, "PING"); got != "+PONG\r\n" {
			t.Fatalf("PING after a connection closed = %q", got)
		}
		b.Conn.Close()
		clustertest.Eventually(t, "the connections to close", func() bool { return counterGauge(td) == 0 })
	})
	t.Run("idle", func(t *testing.T) {
		c := servetest.DialRESP(t, td.addr)
		c.Do(t, "PING")
		if got := readAll(t, c.Conn); !strings.HasPrefix(got, "-ERR idle for 500ms (--resp-idle-timeout)") {
			t.Fatalf("an idle connection got %q", got)
		}
		clustertest.Eventually(t, "resp_idle_timeout counted", func() bool { return td.limitHits("resp_idle_timeout") >= 1 })
	})
	t.Run("slow command", func(t *testing.T) {
		c, err := net.Dial("tcp", td.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "*2\r\n$3\r\nGET\r\n$100\r\nabc") // and never the rest
		if got := readAll(t, c); !strings.HasPrefix(got, "-ERR Protocol error: the command did not arrive whole within 500ms") {
			t.Fatalf("a slow command got %q", got)
		}
		if got := td.limitHits("resp_command_timeout"); got != 1 {
			t.Fatalf("resp_command_timeout hits = %v", got)
		}
	})
}

func counterGauge(td *testServer) float64 {
	td.s.mu.Lock()
	defer td.s.mu.Unlock()
	return float64(len(td.s.conns))
}

// A panic while a command runs ends that connection alone: the client is told, it is
// counted and logged, and the server goes on.
func TestRESPPanicEndsTheConnection(t *testing.T) {
	fs := newFuzzServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := fs.cfg
	cfg.Group = nil // No group: a GET dereferences nil.
	s := &Server{cfg: cfg, ctx: ctx, cancel: cancel,
		lim: requestLimits{command: 1 << 20, args: maxArgs, inline: maxInlineBytes, step: bulkStep}, conns: map[*conn]struct{}{}}
	server, client := net.Pipe()
	defer client.Close()
	c := s.newConn(server, nil)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.cfg.Metrics.conns.Inc()
	go c.serve()
	go io.WriteString(client, "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n")
	if got := readAll(t, client); got != "+PONG\r\n-ERR internal error\r\n" {
		t.Fatalf("the client got %q, want PONG, the error, and the end", got)
	}
	s.wg.Wait()
	if got := fs.panicsCounted(t); got != 1 {
		t.Fatalf("corral_resp_panics_total = %v", got)
	}
	if got := fs.panics.Load(); got != 1 {
		t.Fatalf("%d panics logged, want 1", got)
	}
}

// A connection keeps its name as long as it lives: a name is bounded.
func TestRESPClientNameIsBounded(t *testing.T) {
	td := startTestServer(t, nil)
	rc := servetest.DialRESP(t, td.addr)
	long := strings.Repeat("n", maxClientName+1)
	for _, args := range [][]string{{"CLIENT", "SETNAME", long}, {"HELLO", "3", "SETNAME", long}} {
		if got := rc.Do(t, args...); !strings.HasPrefix(got, "-ERR a client name of 257 bytes exceeds the limit of 256 bytes") {
			t.Fatalf("%s %s <257 bytes> = %q", args[0], args[1], got)
		}
	}
	if got := rc.Do(t, "CLIENT", "GETNAME"); got != "$-1\r\n" {
		t.Fatalf("CLIENT GETNAME after refused names = %q", got)
	}
	if got := rc.Do(t, "CLIENT", "SETNAME", "app"); got != "+OK\r\n" {
		t.Fatalf("CLIENT SETNAME app = %q", got)
	}
}
