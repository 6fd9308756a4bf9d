package resp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// fuzzConn is a connection whose replies are kept in out. Commands are handed to
// serveCommand directly; FuzzRESPReader fuzzes the framing, and the Redis protocol tests
// (commands_test.go, e2e) drive both with redis-cli, go-redis and Python's client.
func fuzzConn(tb testing.TB, s *Server, out *bytes.Buffer) *conn {
	nc, peer := net.Pipe() // nothing is written to peer: a watch reads nothing
	tb.Cleanup(func() { nc.Close(); peer.Close() })
	c := &conn{s: s, nc: nc, proto: 2, client: "127.0.0.1"}
	c.w = bufio.NewWriter(out)
	return c
}

// fuzzLiveToken is the argument FuzzRESPCommand replaces, in the token position of a
// FILLSET, with a live lease token of the FILLSET's key: a fuzzer cannot guess one.
const fuzzLiveToken = "$token"

// FuzzRESPCommand feeds argument vectors, as the request reader hands them over, to the Redis protocol
// front's command dispatch, on a connection in RESP2 or RESP3 (HELLO 3), authenticated or
// not. Whatever the arguments, no command panics, each answers with exactly one well-formed
// reply, a write (SET, DEL, FILLSET) on a connection that has not authenticated is refused,
// and the sentinel key keeps its value unless the command writes it.
func FuzzRESPCommand(f *testing.F) {
	fs := newFuzzServer(f)
	g := fs.cfg.Group
	f.Fuzz(func(t *testing.T, conn, argc byte, a0, a1, a2, a3, a4, a5, a6 string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		args := []string{a0, a1, a2, a3, a4, a5, a6}[:1+int(argc)%7]
		name := strings.ToLower(args[0])
		if name == "fillset" && len(args) > 4 && args[4] == fuzzLiveToken {
			if l, err := g.Lease(ctx, args[1], corral.LeaseOptions{Fill: 10 * time.Second}); err == nil && l.Token != "" {
				args[4] = l.Token
			}
		}
		want := fs.sentinel.Write(t, ctx, g)

		s := &Server{cfg: fs.cfg, ctx: ctx, cancel: cancel}
		var out bytes.Buffer
		c := fuzzConn(t, s, &out)
		c.authed = conn&2 != 0
		if conn&1 != 0 {
			c.proto = 3
		}
		authed := c.authed
		panics := fs.panicsCounted(t)
		var argv [][]byte
		for _, a := range args {
			argv = append(argv, []byte(a))
		}
		if len(argv[0]) == 0 {
			return // the reader refuses an empty command name; it never reaches serveCommand
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					c.panicked(p)
					c.tellPanicked()
				}
			}()
			s.serveCommand(c, argv)
		}()
		if err := c.w.Flush(); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%q", args)
		if ctx.Err() != nil {
			t.Fatalf("%s did not answer within 20 s", what)
		}
		if fs.panicsCounted(t) != panics {
			t.Fatalf("%s panicked", what)
		}
		reply := out.Bytes()
		if n, err := readReply(reply, 0); err != nil || n != len(reply) {
			t.Fatalf("%s: the reply %q is not one reply: %d bytes read, %v", what, reply, n, err)
		}
		if reply[0] == '-' && !isErrorCode(reply[1:]) {
			t.Fatalf("%s: the error %q has no code", what, reply)
		}
		writes := name == "set" || name == "del" || name == "fillset"
		if writes && !authed && reply[0] != '-' {
			t.Fatalf("%s on a connection that has not authenticated: %q", what, reply)
		}
		named := len(args) > 1 && args[1] == servetest.SentinelKey || name == "del" && slices.Contains(args[1:], servetest.SentinelKey)
		if !(writes && named) {
			fs.sentinel.Check(t, ctx, g, what, want)
		}
		// The next input finds no value nor lease of this one's keys.
		for _, k := range args[1:] {
			var ue *corral.UnreachedError
			if err := g.Remove(ctx, k); err != nil && fill.CheckKey(k) == nil && !errors.As(err, &ue) {
				t.Fatalf("remove %q after %s: %v", k, what, err)
			}
		}
	})
}

// isErrorCode reports whether an error reply starts with a code: an upper-case word.
func isErrorCode(b []byte) bool {
	code, _, _ := bytes.Cut(b, []byte(" "))
	return len(code) > 0 && bytes.Equal(bytes.ToUpper(code), code) && bytes.IndexFunc(code, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}

// readReply returns the length of the RESP2 or RESP3 reply at the start of b (simple string,
// error, integer, bulk string, array, null, map), or an error when there is none.
func readReply(b []byte, depth int) (int, error) {
	if depth > 8 {
		return 0, errors.New("nested too deep")
	}
	line, _, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok || len(line) == 0 {
		return 0, errors.New("no line")
	}
	n := len(line) + 2
	switch line[0] {
	case '+', '-':
		if bytes.ContainsAny(line, "\r\n") {
			return 0, errors.New("a line break in a simple reply")
		}
		return n, nil
	case ':':
		_, err := strconv.ParseInt(string(line[1:]), 10, 64)
		return n, err
	case '_':
		if len(line) != 1 {
			return 0, errors.New("a null with a payload")
		}
		return n, nil
	case '$':
		size, err := strconv.Atoi(string(line[1:]))
		switch {
		case err != nil || size < -1:
			return 0, fmt.Errorf("bulk length %q", line[1:])
		case size == -1:
			return n, nil
		case len(b) < n+size+2 || string(b[n+size:n+size+2]) != "\r\n":
			return 0, errors.New("a bulk string cut short")
		}
		return n + size + 2, nil
	case '*', '%':
		count, err := strconv.Atoi(string(line[1:]))
		if err != nil || count < -1 {
			return 0, fmt.Errorf("count %q", line[1:])
		}
		if line[0] == '%' {
			count *= 2
		}
		for range count {
			m, err := readReply(b[n:], depth+1)
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	}
	return 0, fmt.Errorf("reply type %q", line[0])
}

// respSeeds are FuzzRESPCommand's seed corpus: the commands clients send, and arguments at
// and past the edges of each parser.
func respSeeds() []fuzzcorpus.Seed {
	const authed, resp3 = 2, 1
	seed := func(name string, conn byte, args ...string) fuzzcorpus.Seed {
		vals := []any{conn, byte(len(args) - 1)}
		for i := range 7 {
			a := ""
			if i < len(args) {
				a = args[i]
			}
			vals = append(vals, a)
		}
		return fuzzcorpus.Seed{Name: name, Values: vals}
	}
	return []fuzzcorpus.Seed{
		seed("ping", 0, "PING"),
		seed("ping-message", 0, "ping", "hello"),
		seed("echo", 0, "ECHO", "x\r\ny"),
		seed("hello-3", 0, "HELLO", "3"),
		seed("hello-auth", 0, "HELLO", "3", "AUTH", "default", servetest.FuzzToken, "SETNAME", "app"),
		seed("hello-bad-proto", 0, "HELLO", "4"),
		seed("hello-auth-short", 0, "HELLO", "2", "AUTH", "default"),
		seed("auth", 0, "AUTH", servetest.FuzzToken),
		seed("auth-user", 0, "AUTH", "default", servetest.FuzzToken),
		seed("auth-wrong", 0, "AUTH", "nope"),
		seed("client-setname", resp3, "CLIENT", "SETNAME", "app"),
		seed("client-getname", resp3, "client", "getname"),
		seed("client-unknown", 0, "CLIENT", "KILL", "x"),
		seed("select", 0, "SELECT", "1"),
		seed("command", 0, "COMMAND", "DOCS"),
		seed("quit", 0, "QUIT"),
		seed("get", 0, "GET", "user:42"),
		seed("get-resp3", resp3, "GET", "missing"),
		seed("get-empty-key", 0, "GET", ""),
		seed("mget", 0, "MGET", servetest.SentinelKey, "missing", servetest.SentinelKey),
		seed("mget-resp3", resp3, "MGET", "missing", servetest.SentinelKey),
		seed("mget-empty-key", 0, "MGET", "a", ""),
		seed("mget-long-key", 0, "MGET", strings.Repeat("k", fill.MaxKeyBytes+1)),
		seed("mget-none", 0, "MGET"),
		seed("set", authed, "SET", "user:42", "hello"),
		seed("set-sentinel", authed, "SET", servetest.SentinelKey, "over"),
		seed("set-sentinel-unauthed", 0, "SET", servetest.SentinelKey, "over"),
		seed("set-ex", authed, "SET", "user:42", "hello", "EX", "60"),
		seed("set-px", authed, "set", "user:42", "hello", "px", "1500"),
		seed("set-ex-zero", authed, "SET", "user:42", "hello", "EX", "0"),
		seed("set-ex-negative", authed, "SET", "user:42", "hello", "EX", "-1"),
		seed("set-ex-overflow", authed, "SET", "user:42", "hello", "EX", "9223372036854775807"),
		seed("set-ex-and-px", authed, "SET", "user:42", "hello", "EX", "1", "PX", "1"),
		seed("set-ex-missing", authed, "SET", "user:42", "hello", "EX"),
		seed("set-nx", authed, "SET", "user:42", "hello", "NX"),
		seed("set-long-key", authed, "SET", strings.Repeat("k", fill.MaxKeyBytes+1), "v"),
		seed("set-too-large", authed, "SET", "user:42", strings.Repeat("x", 1<<10+1)),
		seed("del", authed, "DEL", "a", "b", servetest.SentinelKey),
		seed("del-unauthed", 0, "DEL", servetest.SentinelKey),
		seed("exists", 0, "EXISTS", servetest.SentinelKey, "missing", servetest.SentinelKey),
		seed("exists-none", 0, "EXISTS"),
		seed("ttl", resp3, "TTL", servetest.SentinelKey),
		seed("pttl-missing", 0, "PTTL", "missing"),
		seed("ttl-empty-key", 0, "TTL", ""),
		seed("fillget", 0, "FILLGET", "page:7", "5000"),
		seed("fillget-wait", resp3, "FILLGET", "page:7", "5000", "WAIT", "200"),
		seed("fillget-sentinel", 0, "FILLGET", servetest.SentinelKey, "1000"),
		seed("fillget-zero", 0, "FILLGET", "page:7", "0"),
		seed("fillget-too-long", 0, "FILLGET", "page:7", "3600001"),
		seed("fillget-wait-too-long", 0, "FILLGET", "page:7", "1000", "WAIT", "60001"),
		seed("fillget-bad-option", 0, "FILLGET", "page:7", "1000", "WAITS", "1"),
		seed("fillset", authed, "FILLSET", "page:7", "<h1>7</h1>", "60000", fuzzLiveToken),
		seed("fillset-swr", authed|resp3, "FILLSET", "page:7", "v", "60000", fuzzLiveToken, "SWR", "30000"),
		seed("fillset-dead-token", authed, "FILLSET", "page:7", "v", "60000", "0123456789abcdef"),
		seed("fillset-empty-token", authed, "FILLSET", "page:7", "v", "60000", ""),
		seed("fillset-ttl-zero", authed, "FILLSET", "page:7", "v", "0", fuzzLiveToken),
		seed("fillset-sentinel", authed, "FILLSET", servetest.SentinelKey, "v", "1000", fuzzLiveToken),
		seed("unknown", 0, "FLUSHALL", "ASYNC"),
		seed("unknown-crlf", 0, "X\r\n+OK", "\r\n"),
		seed("empty-command", 0, ""),
	}
}
