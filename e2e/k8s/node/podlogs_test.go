package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// followLogs keeps the log of every container that runs in ns while the test runs, in
// testdata/out/pods/<ns>/<pod>.log: the pods a rollout or a drain replaced are gone by the
// time a scenario's figures are read, and their logs with them, but they are what explains an
// extra origin call or a failed request. One kubectl logs -f per container instance.
func followLogs(t *testing.T, ns string) {
	dir := filepath.Join("testdata", "out", "pods", ns)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	followed := map[string]bool{} // container IDs
	wg.Go(func() {
		for ctx.Err() == nil {
			l, err := nd.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range l.Items {
					for _, cs := range p.Status.ContainerStatuses {
						if cs.ContainerID == "" || cs.State.Running == nil || followed[cs.ContainerID] {
							continue
						}
						followed[cs.ContainerID] = true
						f, err := os.OpenFile(filepath.Join(dir, p.Name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
						if err != nil {
							continue
						}
						cmd := exec.CommandContext(ctx, filepath.Join(nd.tools, "kubectl"), "--namespace", ns, "logs", "-f", p.Name, "-c", cs.Name)
						cmd.Env = toolEnv()
						cmd.Stdout, cmd.Stderr = f, f
						if cmd.Start() != nil {
							f.Close()
							continue
						}
						wg.Go(func() { cmd.Wait(); f.Close() })
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if t.Failed() {
			t.Logf("the logs of every container that ran in %s: %s", ns, dir)
		}
	})
}
