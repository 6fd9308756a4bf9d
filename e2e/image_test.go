package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestImage builds the container image (make image: a static binary FROM scratch) and runs
// a two-node cluster of it on a Docker network of its own: the nodes join, serve a PUT and a
// GET across each other, run as a non-root user, and stop cleanly on docker stop (SIGTERM).
func TestImage(t *testing.T) {
	needDocker(t)
	image := "corral:e2e"
	make := exec.Command("make", "image", "IMAGE="+image)
	make.Dir = ".."
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	network := "corral-e2e-" + suffix
	docker(t, "network", "create", network)
	t.Cleanup(func() { exec.Command("docker", "network", "rm", network).Run() })

	run := func(name string, join ...string) string {
		args := []string{"run", "-d", "--name", name, "--network", network, image, "serve", "--name", name, "--drain", "200ms"}
		for _, j := range join {
			args = append(args, "--join", j)
		}
		id := strings.TrimSpace(docker(t, args...))
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("docker", "logs", id).CombinedOutput()
				t.Logf("logs of %s:\n%s", name, out)
			}
			exec.Command("docker", "rm", "-f", id).Run()
		})
		return strings.TrimSpace(docker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id))
	}
	ip0 := run("c0-" + suffix)
	ip1 := run("c1-"+suffix, ip0+":7946")

	if user := strings.TrimSpace(docker(t, "inspect", "-f", "{{.Config.User}}", "c0-"+suffix)); user != "65532:65532" {
		t.Fatalf("image runs as %q, want 65532:65532", user)
	}
	for _, ip := range []string{ip0, ip1} {
		waitFor(t, ip+" sees 2 members", 30*time.Second, func() bool {
			resp, err := http.Get("http://" + ip + ":8080/v1/cluster")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var v clusterView
			return json.NewDecoder(resp.Body).Decode(&v) == nil && len(v.Members) == 2
		})
	}
	p0 := &proc{Name: "c0", HTTP: ip0 + ":8080"}
	p1 := &proc{Name: "c1", HTTP: ip1 + ":8080"}
	if code, _ := p0.do(t, "PUT", "/v1/groups/g/keys/k", "from c0"); code != 204 {
		t.Fatalf("PUT = %d", code)
	}
	if code, _, body := p1.get(t, "/v1/groups/g/keys/k"); code != 200 || body != "from c0" {
		t.Fatalf("GET on c1 = %d %q", code, body)
	}
	start := time.Now()
	docker(t, "stop", "-t", "20", "c1-"+suffix)
	if exit := strings.TrimSpace(docker(t, "inspect", "-f", "{{.State.ExitCode}}", "c1-"+suffix)); exit != "0" {
		t.Fatalf("exit code after docker stop = %s", exit)
	}
	t.Logf("docker stop took %v", time.Since(start).Round(time.Millisecond))
	waitFor(t, "c0 drops c1", 20*time.Second, func() bool {
		resp, err := http.Get("http://" + ip0 + ":8080/v1/cluster")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v clusterView
		return json.NewDecoder(resp.Body).Decode(&v) == nil && len(v.Members) == 1
	})
}

// needDocker skips the test without a Docker daemon, or fails it in CI, where it must run.
func needDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil || exec.Command("docker", "info").Run() != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker is not available, and CI needs this test")
		}
		t.Skip("docker is not available")
	}
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
