package resp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/clustertest"
)

// command is one command as a client sends it.
func command(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		b.WriteString(servetest.Bulk(a))
	}
	return b.String()
}

// pipeline sends cmds in one write and returns their replies, one each.
func pipeline(tb testing.TB, rc *servetest.RESPClient, cmds ...string) []string {
	tb.Helper()
	if _, err := rc.Conn.Write([]byte(strings.Join(cmds, ""))); err != nil {
		tb.Fatal(err)
	}
	replies := make([]string, len(cmds))
	for i := range cmds {
		r, err := rc.Reply()
		if err != nil {
			tb.Fatalf("reply %d of %d: %q, %v", i+1, len(cmds), r, err)
		}
		replies[i] = r
	}
	return replies
}

// A pipeline of SETs, applied together (pipeline.go), is answered as Redis answers it: a
// reply per command, in order, a SET whose arguments are wrong answered alone in the middle;
// a key named twice takes its last value; a GET, EXISTS or TTL after the SETs in the same
// pipeline sees them.
func TestRESPPipelinedSets(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := servetest.DialRESP(t, ts.addr)
	got := pipeline(t, rc,
		command("SET", "a", "1"),
		command("SET", "b"),
		command("set", "c", "3", "EX", "x"),
		command("SET", "c", "3", "PX", "60000"),
		command("SET", "a", "2"),
		command("SET", "d", "4", "TAGS", "t"),
		command("GET", "a"),
		command("GET", "c"),
		command("PTTL", "d"),
		command("SET", "e", "5"),
		command("EXISTS", "a", "c", "d", "e", "b"),
		command("SET", "big", strings.Repeat("x", ts.s.cfg.MaxValueBytes+1)),
		command("GET", "big"),
	)
	want := []string{
		"+OK\r\n",
		"-ERR wrong number of arguments for 'set' command\r\n",
		"-ERR invalid expire time in 'set' command\r\n",
		"+OK\r\n",
		"+OK\r\n",
		"+OK\r\n",
		"$1\r\n2\r\n",
		"$1\r\n3\r\n",
		"", // PTTL: checked below
		"+OK\r\n",
		":4\r\n",
		fmt.Sprintf("-ERR value of %d bytes exceeds the value limit of %d bytes\r\n", ts.s.cfg.MaxValueBytes+1, ts.s.cfg.MaxValueBytes),
		"$-1\r\n",
	}
	for i := range want {
		if i == 8 {
			if !strings.HasPrefix(got[i], ":") || got[i] == ":-2\r\n" {
				t.Errorf("reply %d = %q, want the TTL of a key held", i+1, got[i])
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("reply %d = %q, want %q", i+1, got[i], want[i])
		}
	}
	if got := rc.Do(t, "GET", "e"); got != "$1\r\n5\r\n" {
		t.Errorf("GET e after the pipeline = %q", got)
	}
	// d was written with its tag: a purge of it removes d.
	if got := rc.Do(t, "DELTAG", "t"); got != ":1\r\n" {
		t.Fatalf("DELTAG = %q", got)
	}
	if got := rc.Do(t, "GET", "d"); got != "$-1\r\n" {
		t.Errorf("GET d after DELTAG t = %q", got)
	}
}

// A pipeline of more SETs than a batch holds, all to distinct keys, and then as many GETs:
// every SET is answered OK, in order, and every GET sees its SET.
func TestRESPLongPipelineOfSets(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := servetest.DialRESP(t, ts.addr)
	const n = 3*maxBatchSets + 5
	var cmds []string
	for i := range n {
		cmds = append(cmds, command("SET", fmt.Sprint("k", i), fmt.Sprint("v", i)))
	}
	for i := range n {
		cmds = append(cmds, command("GET", fmt.Sprint("k", i)))
	}
	got := pipeline(t, rc, cmds...)
	for i := range n {
		if got[i] != "+OK\r\n" {
			t.Fatalf("SET %d = %q", i, got[i])
		}
		if want := servetest.Bulk(fmt.Sprint("v", i)); got[n+i] != want {
			t.Fatalf("GET %d = %q, want %q", i, got[n+i], want)
		}
	}
}

// Without AUTH, a pipeline's SETs are refused one by one, in order, and none is written;
// after AUTH in the same pipeline they are written.
func TestRESPPipelinedSetsNeedAuth(t *testing.T) {
	ts := startTestServer(t, func(c *Config) { c.Token = servetest.Token(t, "s3cret") })
	rc := servetest.DialRESP(t, ts.addr)
	got := pipeline(t, rc,
		command("SET", "a", "1"),
		command("SET", "b", "2"),
		command("AUTH", "s3cret"),
		command("SET", "a", "3"),
		command("SET", "b", "4"),
		command("GET", "a"),
		command("GET", "b"),
	)
	want := []string{"-NOAUTH Authentication required.\r\n", "-NOAUTH Authentication required.\r\n", "+OK\r\n",
		"+OK\r\n", "+OK\r\n", "$1\r\n3\r\n", "$1\r\n4\r\n"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d = %q, want %q", i+1, got[i], want[i])
		}
	}
}

// A client that sends a pipeline of SETs and hangs up, the last command cut short, reads no
// reply: the SETs that arrived whole are written, the connection ends, and the server
// serves the next client.
func TestRESPPipelineHungUp(t *testing.T) {
	ts := startTestServer(t, nil)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	var b strings.Builder
	for i := range n {
		b.WriteString(command("SET", fmt.Sprint("h", i), fmt.Sprint("v", i)))
	}
	b.WriteString("*3\r\n$3\r\nSET\r\n$2\r\nzz\r\n$5\r\nab") // cut short
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ctx := context.Background()
	// The gauge is 0 before the server has taken the connection too: first the SETs.
	clustertest.Eventually(t, "the last whole SET written", func() bool {
		_, _, err := ts.s.cfg.Group.Peek(ctx, fmt.Sprint("h", n-1))
		return err == nil
	})
	clustertest.Eventually(t, "the connection ended", func() bool { return counterGauge(ts) == 0 })
	for i := range n {
		v, err := ts.s.cfg.Group.Get(ctx, fmt.Sprint("h", i))
		if err != nil || string(v.Body) != fmt.Sprint("v", i) {
			t.Fatalf("h%d = %q, %v", i, v.Body, err)
		}
	}
	if _, _, err := ts.s.cfg.Group.Peek(ctx, "zz"); err == nil {
		t.Fatal("the SET cut short was written")
	}
	if got := servetest.DialRESP(t, ts.addr).Do(t, "GET", "h0"); got != "$2\r\nv0\r\n" {
		t.Fatalf("GET h0 from the next client = %q", got)
	}
}

// On a cluster of three, a pipeline's SETs of keys owned by the other members are written
// at once, each through its owner: every member then reads each key's new value, near copies
// it held before included, and the replies come in order.
func TestRESPPipelinedSetsCluster(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, reg)
	var nodes []*corral.Node
	var groups []*corral.Group[objects.Object]
	for i := range 3 {
		ncfg := corral.Config{Name: fmt.Sprint("n", i), BindAddr: "127.0.0.1", DrainTimeout: -1,
			Logger: slog.New(slog.DiscardHandler), MaxValueBytes: cfg.MaxValueBytes + objects.Overhead,
			GossipInterval: 20 * time.Millisecond, PushPullInterval: time.Second}
		if i == 0 {
			ncfg.Registerer = reg
		} else {
			ncfg.Join = []string{nodes[0].GossipAddr()}
		}
		n, err := corral.New(ncfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.Close(ctx)
		})
		gs, err := objects.NewGroups(objects.GroupsConfig{MaxGroups: 1})
		if err != nil {
			t.Fatal(err)
		}
		g, err := gs.Group(n, "resp")
		if err != nil {
			t.Fatal(err)
		}
		nodes, groups = append(nodes, n), append(groups, g)
	}
	clustertest.Eventually(t, "3 members everywhere", func() bool {
		for _, n := range nodes {
			if len(n.Members()) != 3 {
				return false
			}
		}
		return true
	})
	cfg.Node, cfg.Group = nodes[0], groups[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	ctx := context.Background()
	const n = 48
	owners := map[string]int{}
	for i := range n {
		key := fmt.Sprint("key", i)
		owners[nodes[0].Owner(key).Name]++
		// Every member reads the old value first: a near copy that the SET must drop.
		if err := groups[0].Set(ctx, key, objects.Object{Body: []byte("old")}); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if v, err := g.Get(ctx, key); err != nil || string(v.Body) != "old" {
				t.Fatalf("%s before: %q, %v", key, v.Body, err)
			}
		}
	}
	if len(owners) != 3 {
		t.Fatalf("the keys' owners: %v, want all three members", owners)
	}
	rc := servetest.DialRESP(t, s.ln.Addr().String())
	var cmds []string
	for i := range n {
		set := []string{"SET", fmt.Sprint("key", i), fmt.Sprint("new", i)}
		if i%2 == 1 {
			set = append(set, "PX", "600000") // a write with its own lifetime (SetWithExpiry)
		}
		cmds = append(cmds, command(set...))
	}
	// key1 again: written after its first SET, whichever member owns it.
	cmds = append(cmds, command("SET", "key1", "again"), command("SET", "key0"), command("GET", "key1"))
	got := pipeline(t, rc, cmds...)
	for i := range n + 1 {
		if got[i] != "+OK\r\n" {
			t.Fatalf("SET %d = %q", i, got[i])
		}
	}
	if got[n+1] != "-ERR wrong number of arguments for 'set' command\r\n" || got[n+2] != servetest.Bulk("again") {
		t.Fatalf("after the SETs: %q", got[n+1:])
	}
	for i := range n {
		key, want := fmt.Sprint("key", i), fmt.Sprint("new", i)
		if i == 1 {
			want = "again"
		}
		for j, g := range groups {
			if v, err := g.Get(ctx, key); err != nil || string(v.Body) != want {
				t.Fatalf("%s on n%d after the pipeline: %q, %v", key, j, v.Body, err)
			}
		}
	}
}
