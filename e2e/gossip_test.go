package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// viewWatch polls /v1/cluster on every running node, all the time, and records every moment
// a node's view lacks a member that is not being restarted.
type viewWatch struct {
	mu         sync.Mutex // guards the fields below
	nodes      map[string]*proc
	down       map[string]bool // being restarted: neither asked nor required
	step       string
	polls      int
	violations []string

	stop chan struct{}
	wg   sync.WaitGroup
}

func watchViews(t *testing.T, nodes []*proc) *viewWatch {
	w := &viewWatch{nodes: map[string]*proc{}, down: map[string]bool{}, stop: make(chan struct{})}
	for _, n := range nodes {
		w.nodes[n.Name] = n
	}
	w.wg.Go(func() {
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			w.mu.Lock()
			var up []*proc
			for name, p := range w.nodes {
				if !w.down[name] {
					up = append(up, p)
				}
			}
			step := w.step
			w.mu.Unlock()
			for _, p := range up {
				v := p.cluster(t, "")
				var seen []string
				for _, m := range v.Members {
					seen = append(seen, m.Name)
				}
				for _, q := range up {
					if slices.Contains(seen, q.Name) {
						continue
					}
					// A restart may have begun while the view was asked for: only a node
					// still up, missing from the view of a node still up, counts.
					w.mu.Lock()
					if !w.down[p.Name] && !w.down[q.Name] && w.nodes[p.Name] == p && len(w.violations) < 20 {
						w.violations = append(w.violations, fmt.Sprintf("%s: %s sees %v, without %s", step, p.Name, seen, q.Name))
					}
					w.mu.Unlock()
				}
			}
			w.mu.Lock()
			w.polls++
			w.mu.Unlock()
		}
	})
	t.Cleanup(w.end)
	return w
}

func (w *viewWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

func (w *viewWatch) set(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

// The rolling sequence of SECURITY.md on three `corral serve` processes: plaintext gossip,
// then encrypted (three rolling restarts: a key with both verify switches off, then
// --gossip-verify-outgoing on, then --gossip-verify-incoming on), then a new key (three
// rewrites of every node's key file, read while running: new key accepted, new key primary,
// old key removed). Every running node's view holds every running node all the time: a node
// is missing only from the others' views while it restarts itself. After each step a
// newcomer shows that the step took effect: one that only the new settings admit joins, or
// one that they refuse cannot.
func TestServeGossipEncryptionRollingSequence(t *testing.T) {
	const (
		oldKey = "OLD-gossip-key-0123456789abcdefg" // 32 bytes: AES-256
		newKey = "NEW-gossip-key-0123456789abcdefg"
	)
	dir := t.TempDir()
	keyFile := func(name string) string { return filepath.Join(dir, name+".key") }
	// write replaces a key file as the kubelet does, by a rename.
	write := func(name, content string) {
		t.Helper()
		tmp := keyFile(name) + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, keyFile(name)); err != nil {
			t.Fatal(err)
		}
	}

	nodes := startCluster(t, 3)
	incarnations := slices.Clone(nodes) // every process of the three, restarts included
	for _, n := range nodes {
		write(n.Name, oldKey+"\n")
	}
	w := watchViews(t, nodes)
	waitWhole := func(what string) {
		t.Helper()
		for _, n := range nodes {
			waitFor(t, n.Name+" sees all three "+what, 30*time.Second, func() bool {
				var seen []string
				for _, m := range n.cluster(t, "").Members {
					seen = append(seen, m.Name)
				}
				return slices.Contains(seen, "node-0") && slices.Contains(seen, "node-1") && slices.Contains(seen, "node-2")
			})
		}
	}
	// probe starts a newcomer with flags and reports whether it joined the three; it leaves
	// again either way.
	probes := 0
	probe := func(wantJoin bool, flags ...string) {
		t.Helper()
		probes++
		name := fmt.Sprint("probe-", probes)
		p := startNode(t, name, []string{nodes[0].Gossip}, flags...)
		if wantJoin {
			waitFor(t, name+" to join", 30*time.Second, func() bool { return len(p.cluster(t, "").Members) == 4 })
			for _, n := range nodes {
				waitFor(t, n.Name+" to see "+name, 30*time.Second, func() bool { return len(n.cluster(t, "").Members) == 4 })
			}
		} else {
			// Ready means New's first join attempt is over: it must have failed, and left
			// no trace in the cluster.
			if got := len(p.cluster(t, "").Members); got != 1 || !strings.Contains(p.log.String(), "no seed reached yet") {
				t.Fatalf("%s %v was admitted: it sees %d members", name, flags, got)
			}
			for _, n := range nodes {
				if got := len(n.cluster(t, "").Members); got != 3 {
					t.Fatalf("%s sees %d members after %s %v tried to join", n.Name, got, name, flags)
				}
			}
		}
		if err := p.signal(t, syscall.SIGTERM, 20*time.Second); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, n := range nodes {
			waitFor(t, n.Name+" to see "+name+" gone", 30*time.Second, func() bool { return len(n.cluster(t, "").Members) == 3 })
		}
	}
	// restartAll restarts each node in turn, on its ports, with the flags flags gives it.
	restartAll := func(step string, flags func(name string) []string) {
		t.Helper()
		w.set(func() { w.step = step })
		for i, n := range nodes {
			w.set(func() { w.down[n.Name] = true })
			if err := n.signal(t, syscall.SIGTERM, 20*time.Second); err != nil {
				t.Fatalf("%s: SIGTERM %s: %v", step, n.Name, err)
			}
			nodes[i] = startNodeAt(t, n, []string{others0(nodes, n).Gossip}, flags(n.Name)...)
			incarnations = append(incarnations, nodes[i])
			waitWhole("after " + n.Name + " restarted (" + step + ")")
			w.set(func() { w.nodes[n.Name], w.down[n.Name] = nodes[i], false })
		}
	}
	// rewriteAll gives every node's key file content and waits until each has read it.
	rewriteAll := func(step, content string) {
		t.Helper()
		w.set(func() { w.step = step })
		for _, n := range nodes {
			before := strings.Count(n.log.String(), "gossip keys reloaded")
			write(n.Name, content)
			waitFor(t, n.Name+" to read its key file ("+step+")", 30*time.Second, func() bool {
				return strings.Count(n.log.String(), "gossip keys reloaded") > before
			})
		}
	}
	keyed := func(extra ...string) func(string) []string {
		return func(name string) []string { return append([]string{"--secret-key-file", keyFile(name)}, extra...) }
	}
	probeKey := func(content string) []string {
		path := filepath.Join(dir, fmt.Sprint("probe-", probes+1, ".key"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"--secret-key-file", path}
	}

	restartAll("a key, both switches off", keyed("--gossip-verify-incoming=false", "--gossip-verify-outgoing=false"))
	probe(true) // plaintext is still read and sent
	restartAll("outgoing encrypted", keyed("--gossip-verify-incoming=false"))
	probe(true, probeKey(oldKey)...) // a strict member is understood
	restartAll("incoming verified", keyed())
	probe(false) // plaintext is dropped

	rewriteAll("new key accepted", oldKey+"\n"+newKey+"\n")
	probe(true, probeKey(newKey+"\n"+oldKey+"\n")...) // one that sends with the new key is read
	rewriteAll("new key primary", newKey+"\n"+oldKey+"\n")
	probe(true, probeKey(newKey)...) // one that knows only the new key reads what they send
	rewriteAll("old key removed", newKey+"\n")
	probe(false, probeKey(oldKey+"\n"+newKey+"\n")...) // one that sends with the old key is not read

	w.end()
	// A step that broke gossip between the three may not last long enough for a member to
	// be declared dead; its packets are refused at once, though, and memberlist says so with
	// the sender's address (the gossip port, for UDP). Newcomers' packets may be refused:
	// they come from other ports.
	for _, p := range incarnations {
		for _, line := range strings.Split(p.log.String(), "\n") {
			if !strings.Contains(line, "Decrypt packet failed") {
				continue
			}
			for _, n := range nodes {
				if strings.Contains(line, n.Gossip) {
					t.Errorf("%s refused a packet of %s: %s", p.Name, n.Name, line)
				}
			}
		}
	}
	t.Logf("%d polls of every view", w.polls)
	if len(w.violations) > 0 {
		t.Fatalf("a member was lost from a view:\n%s", strings.Join(w.violations, "\n"))
	}
	if w.polls < 10 {
		t.Fatalf("only %d polls of the views", w.polls)
	}
}
