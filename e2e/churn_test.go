package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A DELETE that answered 204 is never undone by a restart: PUT a key, restart its owner
// gracefully under the same name, DELETE the key through another node; then every node
// serves the origin's value, none the deleted one.
func TestServeDeleteAfterOwnerRestart(t *testing.T) {
	origin := newOrigin(t, 0)
	nodes := startCluster(t, 3, "--origin", origin.template(), "--ttl", "1h")
	const path = "/v1/groups/items/keys/k"
	if code, _ := nodes[0].do(t, "PUT", path, "put value"); code != 204 {
		t.Fatalf("PUT: %d", code)
	}
	for _, n := range nodes {
		if code, _, body := n.get(t, path); code != 200 || body != "put value" {
			t.Fatalf("%s before the restart: %d %q", n.Name, code, body)
		}
	}
	owner := nodes[0].cluster(t, "k").Owner
	var restarted *proc
	var others []*proc
	for i, n := range nodes {
		if n.Name != owner {
			others = append(others, n)
			continue
		}
		if err := n.signal(t, syscall.SIGTERM, 20*time.Second); err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		restarted = startNode(t, n.Name, []string{others0(nodes, n).Gossip}, "--origin", origin.template(), "--ttl", "1h")
		nodes[i] = restarted
	}
	for _, n := range nodes {
		waitFor(t, n.Name+" sees 3 members", 20*time.Second, func() bool { return len(n.cluster(t, "").Members) == 3 })
	}
	if code, body := others[0].do(t, "DELETE", path, ""); code != 204 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	for _, n := range nodes {
		code, src, body := n.get(t, path)
		if code != 200 || strings.Contains(body, "put value") {
			t.Fatalf("%s after the DELETE: %d %q (source %s), want the origin's value", n.Name, code, body, src)
		}
	}
	if c := origin.count("k"); c != 1 {
		t.Fatalf("origin called %d times after the DELETE, want 1", c)
	}
}

// others0 returns the first node other than n.
func others0(nodes []*proc, n *proc) *proc {
	for _, m := range nodes {
		if m != n {
			return m
		}
	}
	return nil
}
