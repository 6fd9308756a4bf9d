package k8s

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corralcache/corral/internal/leakcheck"
)

// The environment every test of the package shares, set up once by TestMain.
var (
	cp        *controlPlane
	toolsDir  string // helm and the control plane's binaries (build.sh's cache)
	repoRoot  string
	chartDir  string
	dockerNet string // "" when Docker is not available: the container tests skip (fail in CI)
	dockerErr string // why not
)

var getOpts = metav1.GetOptions{}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/k8s:", err)
		os.Exit(1)
	}
	if code == 0 {
		// run has stopped the control plane, which also ends client-go's idle connections to it.
		if err := leakcheck.Check(); err != nil {
			fmt.Fprintln(os.Stderr, "leakcheck:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	wd, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	chartDir = filepath.Join(repoRoot, "charts", "corral")

	start := time.Now()
	build := exec.Command(filepath.Join(wd, "build.sh"))
	build.Stderr = os.Stderr // a cold build takes minutes: say what it does
	out, err := build.Output()
	if err != nil {
		return 0, fmt.Errorf("build.sh: %w", err)
	}
	toolsDir = strings.TrimSpace(string(out))
	fmt.Fprintf(os.Stderr, "e2e/k8s: tools in %s (%v)\n", toolsDir, time.Since(start).Round(time.Millisecond))

	// The API server binds the gateway of a Docker network of the test's own, where the corral
	// containers reach it; without Docker, loopback.
	host := "127.0.0.1"
	if err := dockerAvailable(); err != nil {
		dockerErr = err.Error()
	} else {
		sweepDocker()
		name := fmt.Sprintf("corral-k8s-%d", time.Now().UnixNano()%1e9)
		if out, err := exec.Command("docker", "network", "create", "--label", dockerLabel, "--label", ownerLabel, name).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("docker network create: %v\n%s", err, out)
		}
		dockerNet = name
		defer exec.Command("docker", "network", "rm", name).Run()
		gw, err := exec.Command("docker", "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", name).Output()
		if err != nil {
			return 0, fmt.Errorf("docker network inspect: %w", err)
		}
		host = strings.TrimSpace(string(gw))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start = time.Now()
	cp, err = startControlPlane(ctx, toolsDir, host)
	if err != nil {
		return 0, err
	}
	defer cp.stop()
	fmt.Fprintf(os.Stderr, "e2e/k8s: control plane at %s ready in %v\n", cp.server(), time.Since(start).Round(time.Millisecond))
	return m.Run(), nil
}

// dockerLabel marks the containers and networks of these tests, and ownerLabel the test
// process that made them. Cleanups remove them, but a test binary killed by its -timeout runs
// no cleanup: the next run sweeps what a process that is gone left — and nothing of a run
// still going (two runs on one Docker host, say).
const (
	dockerLabel = "corral-e2e=k8s"
	ownerKey    = "corral-e2e.owner"
)

// ownerLabel is "corral-e2e.owner=<this process's pid>".
var ownerLabel = fmt.Sprintf("%s=%d", ownerKey, os.Getpid())

func sweepDocker() {
	for _, kind := range []struct{ list, rm []string }{
		{[]string{"ps", "-aq"}, []string{"rm", "-f"}},
		{[]string{"network", "ls", "-q"}, []string{"network", "rm"}},
	} {
		ids, _ := exec.Command("docker", append(kind.list, "--filter", "label="+dockerLabel)...).Output()
		var dead []string
		for _, id := range strings.Fields(string(ids)) {
			owner, _ := exec.Command("docker", "inspect", "-f", `{{index .Config.Labels "`+ownerKey+`"}}{{index .Labels "`+ownerKey+`"}}`, id).Output()
			if !processAlive(strings.TrimSpace(string(owner))) {
				dead = append(dead, id)
			}
		}
		if len(dead) > 0 {
			exec.Command("docker", append(kind.rm, dead...)...).Run()
		}
	}
}

// processAlive reports whether pid names a live process on this host ("" or garbage: no).
func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	p, err := os.FindProcess(n)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

func dockerAvailable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("docker is not installed")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		return fmt.Errorf("docker info: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// needDocker skips the test without Docker, or fails it in CI, where it must run.
func needDocker(t *testing.T) {
	t.Helper()
	if dockerNet != "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("Docker is needed in CI: %s", dockerErr)
	}
	t.Skipf("Docker is not available (%s): skipping the tests that run corral containers", dockerErr)
}

// helm runs the helm binary against the control plane, and returns its standard output.
func helm(t testing.TB, args ...string) string {
	t.Helper()
	out, err := helmErr(args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// helmErr is helm that returns its failure (with its standard error) instead of failing.
func helmErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(toolsDir, "helm"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.kubeconfigPath(),
		"HELM_CACHE_HOME="+filepath.Join(cp.dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(cp.dir, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(cp.dir, "helm", "data"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return string(out), nil
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
