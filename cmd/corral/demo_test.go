package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
