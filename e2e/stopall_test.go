package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM to every node at once (helm uninstall, a scale to zero): each process exits 0 within
// --shutdown-timeout, as docs/serve.md promises. The last nodes to leave find nobody left to
// tell; before the fix one of them waited 10 s for its leave broadcast and exited 1 with
// "leave: peer: Leave: broadcast leave: timeout waiting for leave broadcast".
func TestServeStopEveryNodeAtOnce(t *testing.T) {
	const shutdownTimeout = 8 * time.Second
	origin := newOrigin(t, 0)
	nodes := startCluster(t, 3, "--origin", origin.template(), "--shutdown-timeout", shutdownTimeout.String())
	for i := range 30 { // values on every member, so each one has keys to hand off
		if code, _, _ := nodes[i%3].get(t, fmt.Sprintf("/v1/groups/items/keys/k%d", i)); code != 200 {
			t.Fatalf("GET k%d: %d", i, code)
		}
	}

	start := time.Now()
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	exited := make(chan *proc, len(nodes))
	for _, n := range nodes {
		go func() { <-n.done; exited <- n }()
	}
	for range nodes {
		var n *proc
		select {
		case n = <-exited:
		case <-time.After(shutdownTimeout + 5*time.Second): // room past the bound, to report it
			t.Fatalf("a node is still running %v after SIGTERM", time.Since(start).Round(time.Millisecond))
		}
		took := time.Since(start)
		switch {
		case n.err != nil:
			t.Errorf("%s exited after %v with %v; want 0\n%s", n.Name, took.Round(time.Millisecond), n.err, lastLines(n.log.String(), 5))
		case took > shutdownTimeout:
			t.Errorf("%s exited 0 after %v, past --shutdown-timeout %v", n.Name, took.Round(time.Millisecond), shutdownTimeout)
		default:
			t.Logf("%s exited 0 %v after SIGTERM", n.Name, took.Round(time.Millisecond))
		}
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
