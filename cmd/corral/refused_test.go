package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corralcache/corral/peer"
)

// A daemon whose seed has another label shows the refusal where its operator looks: the debug
// page's state and `corral inspect` (e2e's TestServeJoinerNamesTheRefusal drives the same
// through real processes, with the log and the metric).
func TestJoinRefusalIsShown(t *testing.T) {
	seed := startTestDaemon(t, func(c *serveConfig) { c.name, c.label = "seed", "shop" })
	joiner := startTestDaemon(t, func(c *serveConfig) {
		c.name, c.label = "joiner", "shop-staging"
		c.join = listFlag{seed.d.node.GossipAddr()}
	})

	deadline := time.Now().Add(20 * time.Second)
	for len(joiner.d.debugState().JoinRefusals) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the debug page's state shows no refusal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := joiner.d.debugState().JoinRefusals[0]
	if r.Seed != seed.d.node.GossipAddr() || r.Reason != peer.RefusedLabel || !strings.Contains(r.Diagnosis, `likely another cluster label (this member's is "shop-staging")`) {
		t.Errorf("debug state's refusal: %+v", r)
	}
	if rs := seed.d.debugState().JoinRefusals; len(rs) != 0 {
		t.Errorf("the seed, refused nothing, shows %+v", rs)
	}

	var out bytes.Buffer
	if err := inspect(context.Background(), []string{"--addr", joiner.http}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if want := "join refused by seed " + seed.d.node.GossipAddr() + " (label, "; !strings.Contains(out.String(), want) {
		t.Errorf("corral inspect says\n%s\nwant %q", out.String(), want)
	}
}
