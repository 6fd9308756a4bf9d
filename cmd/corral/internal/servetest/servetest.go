package servetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/internal/clustertest"
)

// Node starts a one-node corral on 127.0.0.1 (gossip and peer ports free ones, no drain)
// whose metrics go to reg, and which takes objects of bodies up to maxBodyBytes. tb's
// cleanup closes it.
func Node(tb testing.TB, reg prometheus.Registerer, maxBodyBytes int) *corral.Node {
	tb.Helper()
	return JoiningNode(tb, reg, maxBodyBytes, "test")
}

// JoiningNode is Node named name, joining the members at seeds (gossip addresses).
func JoiningNode(tb testing.TB, reg prometheus.Registerer, maxBodyBytes int, name string, seeds ...string) *corral.Node {
	tb.Helper()
	n, err := corral.New(corral.Config{
		Name: name, BindAddr: "127.0.0.1", DrainTimeout: -1, Join: seeds,
		Registerer: reg, Logger: slog.New(slog.DiscardHandler),
		MaxValueBytes: maxBodyBytes + objects.Overhead,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
}

// OwnerElsewhere starts a second node, "owner", joined to self, with the group named group
// made as corral serve makes groups, waits until both see each other, and returns that group
// and a key the owner owns: a key self reads through a peer, and keeps a near copy of once
// hot. tb's cleanup closes the node.
func OwnerElsewhere(tb testing.TB, self *corral.Node, maxBodyBytes int, group string) (*corral.Group[objects.Object], string) {
	tb.Helper()
	owner := JoiningNode(tb, prometheus.NewRegistry(), maxBodyBytes, "owner", self.GossipAddr())
	groups, err := objects.NewGroups(objects.GroupsConfig{MaxGroups: 1})
	if err != nil {
		tb.Fatal(err)
	}
	g, err := groups.Group(owner, group)
	if err != nil {
		tb.Fatal(err)
	}
	clustertest.Eventually(tb, "both nodes to see each other", func() bool {
		return len(self.Members()) == 2 && len(owner.Members()) == 2
	})
	for i := 0; ; i++ {
		if k := fmt.Sprint("elsewhere", i); self.Owner(k).Name == owner.Name() {
			return g, k
		}
	}
}

// Leases returns what both fronts share as corral serve makes it: the counter of the limits'
// hits, registered with reg, and the leases, within the default limits.
func Leases(tb testing.TB, reg prometheus.Registerer) (*limithits.Counter, *clientlease.Leases) {
	tb.Helper()
	hits, err := limithits.New(reg)
	if err != nil {
		tb.Fatal(err)
	}
	leases, err := clientlease.New(clientlease.DefaultLimits(), hits)
	if err != nil {
		tb.Fatal(err)
	}
	return hits, leases
}

// Token returns the API token secret.
func Token(tb testing.TB, secret string) *apitoken.Token {
	tb.Helper()
	tok, err := apitoken.New(secret)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// Do sends an HTTP request to addr ("host:port") with header's name, value pairs, and
// returns the response with its body read.
func Do(tb testing.TB, addr, method, path, body string, header ...string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
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

// RESPClient speaks raw RESP: the replies are compared byte for byte.
type RESPClient struct {
	Conn net.Conn
	r    *bufio.Reader
}

// DialRESP connects to addr, with a deadline of 30 s on the connection; tb's cleanup
// closes it.
func DialRESP(tb testing.TB, addr string) *RESPClient {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &RESPClient{Conn: c, r: bufio.NewReader(c)}
}

// Do sends a command and returns its reply's raw bytes.
func (rc *RESPClient) Do(tb testing.TB, args ...string) string {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := rc.Conn.Write([]byte(b.String())); err != nil {
		tb.Fatal(err)
	}
	reply, err := rc.Reply()
	if err != nil {
		tb.Fatalf("%q: %v", args, err)
	}
	return reply
}

// Reply reads one whole reply.
func (rc *RESPClient) Reply() (string, error) {
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
			s, err := rc.Reply()
			out += s
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// Bulk is s as a RESP bulk string.
func Bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// FuzzToken is the API token of the fuzz targets' fronts: writes need it.
const FuzzToken = "fuzz-token"

// Sentinel is a key a fuzz target writes before every input and reads after it: an input
// that does not write it must leave its value as it was.
type Sentinel struct {
	seq atomic.Int64 // makes each value new
}

// SentinelKey is the Sentinel's key, in every group it is written to.
const SentinelKey = "sentinel"

// Write writes a new value of the sentinel in g and returns it.
func (s *Sentinel) Write(tb testing.TB, ctx context.Context, g *corral.Group[objects.Object]) objects.Object {
	tb.Helper()
	v := objects.Object{Body: fmt.Appendf(nil, "sentinel-%d", s.seq.Add(1)), Type: "text/plain"}
	if err := g.Set(ctx, SentinelKey, v); err != nil {
		tb.Fatalf("set the sentinel: %v", err)
	}
	return v
}

// Check fails tb unless g's sentinel holds want; what names the input that ran between.
func (s *Sentinel) Check(tb testing.TB, ctx context.Context, g *corral.Group[objects.Object], what string, want objects.Object) {
	tb.Helper()
	if got, err := g.Get(ctx, SentinelKey); err != nil || !bytes.Equal(got.Body, want.Body) || got.Type != want.Type {
		tb.Fatalf("%s changed the sentinel, which it does not name: %q %q, %v; want %q", what, got.Body, got.Type, err, want.Body)
	}
}
