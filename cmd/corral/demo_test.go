package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// The demo's claim, checked: one backend call per expiry with corral, before and after the
// owner is killed; one per request with naive cache-aside; one per replica with per-replica
// single-flight. A burst that outlasts the TTL on a busy machine sees the key expire again
// during it: that call must come a TTL after the one before, never beside it.
func TestDemoShowsOneFill(t *testing.T) {
	// A live owner stalled past the silent-peer timeout (300 ms) by a busy machine would be
	// failed over, and its key filled beside it; the killed owner's connections end at once.
	cfg := demoConfig{nodes: 3, callers: 30, latency: 20 * time.Millisecond, ttl: 80 * time.Millisecond,
		key: "product:42", progress: io.Discard, silentPeerTimeout: 10 * time.Second}
	res, err := runDemo(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, calls := range res.corralCalls {
		n, err := expiries(calls, cfg.ttl)
		if err != nil {
			t.Errorf("burst %d: %v", i+1, err)
		}
		if n < 1 || int64(n) != res.corral[i] {
			t.Errorf("burst %d: %d origin calls, %d spans; want at least one, one span each", i+1, res.corral[i], n)
		}
		if n > 1 {
			t.Logf("burst %d outlasted the TTL: %d expiries, one origin call each", i+1, n)
		}
	}
	// The same judge on per-replica single-flight's calls sees each replica fill for itself
	// (side by side, or one after the other on a machine too busy to start them together).
	if _, err := expiries(res.perReplicaCalls, cfg.ttl); err == nil {
		t.Errorf("per-replica single-flight's %d calls judged one per expiry", len(res.perReplicaCalls))
	}
	if res.naive != [2]int64{90, 60} {
		t.Errorf("naive backend calls = %v, want [90 60]", res.naive)
	}
	if res.perReplica != [2]int64{3, 2} {
		t.Errorf("per-replica backend calls = %v, want [3 2]", res.perReplica)
	}
	// A fill may have been started by a peer's request rather than an HTTP one, so at most one
	// answer per origin call says "fill"; the others waited on it, asked the owner, or came late
	// enough to find the value stored or copied near. Every request got an answer.
	if s := res.sources; int64(s["fill"]) > res.corral[0] || s["fill"]+s["coalesced"]+s["peer"]+s["near"]+s["hit"] != 90 {
		t.Errorf("sources of burst 1 = %v, origin calls %d", s, res.corral[0])
	}
	var out bytes.Buffer
	res.print(&out, cfg)
	if !strings.Contains(out.String(), "corral") {
		t.Fatalf("table: %s", out.String())
	}
}

func TestCLI(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"bogus"}, 2},
		{[]string{"help"}, 0},
		{[]string{"demo", "-nodes", "1"}, 1},
		{[]string{"demo", "-nope"}, 1},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != tt.code {
			t.Errorf("corral %v: exit %d, want %d (stderr %q)", tt.args, code, tt.code, stderr.String())
		}
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	fs, c := serveFlags(io.Discard)
	if err := fs.Parse([]string{"--ttl", "5s"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"CORRAL_TTL":         "9s", // the command line wins
		"CORRAL_GOSSIP_PORT": "17946",
		"CORRAL_JOIN":        "a:7946, dns+b:7946",
	}
	if err := applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.ttl != 5*time.Second || c.gossipPort != 17946 || len(c.join) != 2 || c.join[1] != "dns+b:7946" {
		t.Fatalf("config = ttl %v, gossip %d, join %q", c.ttl, c.gossipPort, c.join)
	}
	env = map[string]string{"CORRAL_HTTP_PORT": "eighty"}
	if err := applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil || !strings.Contains(err.Error(), "CORRAL_HTTP_PORT") {
		t.Fatalf("a bad variable is not named: %v", err)
	}
}

// expiries tells one call per expiry from a second fill of a fresh value and from fills side
// by side.
func TestExpiries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ttl := 80 * time.Millisecond
	tests := []struct {
		name  string
		calls []span
		n     int
		err   string
	}{
		{"none", nil, 0, ""},
		{"one", []span{{at(0), at(20)}}, 1, ""},
		{"one per expiry", []span{{at(0), at(20)}, {at(100), at(120)}, {at(200), at(220)}}, 3, ""},
		{"fresh value filled again", []span{{at(0), at(20)}, {at(99), at(119)}}, 0, "within the TTL"},
		{"side by side", []span{{at(0), at(20)}, {at(10), at(30)}}, 0, "concurrent fills"},
	}
	for _, tt := range tests {
		n, err := expiries(tt.calls, ttl)
		if n != tt.n || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: expiries = %d, %v; want %d, %q", tt.name, n, err, tt.n, tt.err)
		}
	}
}
