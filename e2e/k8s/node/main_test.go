package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The environment every test of the package shares, set up once by TestMain.
var (
	nd       *node
	repoRoot string
	chartDir string
	skipWhy  string // why the node could not start here: the tests skip (fail in CI)
)

func TestMain(m *testing.M) {
	if os.Getenv(reaperEnv) != "" {
		reap()
		return
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = filepath.Clean(filepath.Join(wd, "..", "..", ".."))
	chartDir = filepath.Join(repoRoot, "charts", "corral")
	if skipWhy = prerequisites(); skipWhy != "" {
		return m.Run() // every test skips, or fails in CI, with skipWhy
	}

	start := time.Now()
	lock, err := lockNode(20 * time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	defer lock.Close()
	// A run that died before its reaper could undo it (or whose reaper was killed) left the
	// host changed: the lock is free, so nothing of it runs any more.
	if _, err := os.Stat(workDir); err == nil {
		logf("a previous run left %s: undoing it first", workDir)
		undo()
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}

	build := exec.Command(filepath.Join(repoRoot, "e2e", "k8s", "build.sh"))
	build.Stderr = os.Stderr // a cold build takes many minutes: say what it does
	out, err := build.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "node: build.sh:", err)
		return 1
	}
	tools := strings.TrimSpace(string(out))
	logf("tools in %s (%v)", tools, time.Since(start).Round(time.Millisecond))

	done, err := startReaper(lock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node: start the reaper:", err)
		return 1
	}
	code := 1
	func() {
		defer func() {
			if nd != nil {
				nd.stop()
			} else {
				undo()
			}
			done()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		n, err := startNode(ctx, tools)
		if n != nil {
			nd = n
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "node: start:", err)
			return
		}
		if err := n.waitReady(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			return
		}
		logf("node %s Ready in %v", nodeName, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		if err := buildImages(n); err != nil {
			fmt.Fprintln(os.Stderr, "node: images:", err)
			return
		}
		logf("images built and imported in %v", time.Since(start).Round(time.Millisecond))
		code = m.Run()
		writeSummary()
		n.keepLogs()
	}()
	return code
}

// prerequisites says what this host lacks for a node, or "".
func prerequisites() string {
	if os.Geteuid() != 0 {
		return "the node needs root (a kubelet, a container runtime, a bridge, iptables)"
	}
	for _, p := range []string{"/usr/bin/containerd", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"} {
		if _, err := os.Stat(p); err != nil {
			return p + " is missing (Debian: apt-get install containerd runc containernetworking-plugins)"
		}
	}
	for _, c := range []string{"runc", "ctr", "iptables", "ip", "docker"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is not installed"
		}
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		return fmt.Sprintf("docker info: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// needNode skips the test when the host cannot run a node, or fails it in CI, where it must.
func needNode(t *testing.T) {
	t.Helper()
	if skipWhy == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the real-node tests must run in CI: %s", skipWhy)
	}
	t.Skipf("no real node on this host (%s): skipping", skipWhy)
}

// waitReady waits for the node to register and report Ready, and for the kubernetes Service
// to have its endpoint (kube-proxy maps it for pods).
func (n *node) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if dead := n.exited(); len(dead) > 0 {
			return fmt.Errorf("%v exited while the node started:\n%s", dead, n.logTail(dead[0], 40))
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil && len(node.Spec.Taints) == 0 {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			desc := "not registered"
			if err == nil {
				desc = fmt.Sprintf("taints %v, conditions %v", node.Spec.Taints, node.Status.Conditions)
			}
			return fmt.Errorf("node %s not Ready in 3m (%s)\nkubelet:\n%s", nodeName, desc, n.logTail("kubelet", 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// keepLogs copies the node's logs to testdata/out/logs, where they stay after workDir is gone
// (an artifact of CI, and a failure's next read after the test's own output).
func (n *node) keepLogs() {
	dst := filepath.Join("testdata", "out", "logs")
	os.RemoveAll(dst)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return
	}
	files, _ := filepath.Glob(n.path("logs", "*.log"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
	logf("the node's logs are kept in %s", dst)
}
