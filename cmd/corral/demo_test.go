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
// single-flight.
func TestDemoShowsOneFill(t *testing.T) {
	cfg := demoConfig{nodes: 3, callers: 30, latency: 20 * time.Millisecond, ttl: 80 * time.Millisecond,
		key: "product:42", progress: io.Discard}
	res, err := runDemo(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.corral != [2]int64{1, 1} {
		t.Errorf("corral backend calls = %v, want [1 1]", res.corral)
	}
	if res.naive != [2]int64{90, 60} {
		t.Errorf("naive backend calls = %v, want [90 60]", res.naive)
	}
	if res.perReplica != [2]int64{3, 2} {
		t.Errorf("per-replica backend calls = %v, want [3 2]", res.perReplica)
	}
	// The fill may have been started by a peer's request rather than an HTTP one, so at most
	// one answer says "fill"; the others waited on it, asked the owner, or came late enough
	// to find the value stored or copied near. Every request got an answer.
	if s := res.sources; s["fill"] > 1 || s["fill"]+s["coalesced"]+s["peer"]+s["near"]+s["hit"] != 90 {
		t.Errorf("sources of burst 1 = %v", s)
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

func TestObjectCodec(t *testing.T) {
	for _, o := range []object{{}, {Body: []byte("x")}, {Body: []byte("\x00\xff"), Type: "application/json"}} {
		b, _ := objectCodec{}.Encode(o)
		got, err := objectCodec{}.Decode(b)
		if err != nil || string(got.Body) != string(o.Body) || got.Type != o.Type {
			t.Fatalf("round trip of %+v = %+v, %v", o, got, err)
		}
	}
	if _, err := (objectCodec{}).Decode([]byte{0x05, 'a'}); err == nil {
		t.Fatal("a truncated object decoded")
	}
}
