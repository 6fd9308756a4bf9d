package k8s

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite manifests/corral.yaml from the chart")

const manifestsHeader = `# corral as plain YAML: charts/corral rendered with its default values (server mode, release
# "corral", namespace "default") by
#   helm template corral charts/corral --namespace default
# less the gossip key Secret, which the chart generates at install and a file cannot. Create it
# first, then apply:
#   kubectl create secret generic corral-gossip --from-literal=key="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
#   kubectl apply -f manifests/corral.yaml
# Generated: do not edit. make manifests rewrites it; a test (e2e/k8s) keeps it equal to the chart.
`

// defaultManifests is the chart's default rendering without its generated Secret.
func defaultManifests(t testing.TB) string {
	t.Helper()
	out := helm(t, "template", "corral", chartDir, "--namespace", "default")
	docs := strings.Split(out, "\n---\n")
	var kept []string
	found := false
	for _, d := range docs {
		if strings.Contains(d, "# Source: corral/templates/secret.yaml") {
			found = true
			continue
		}
		kept = append(kept, strings.TrimPrefix(strings.TrimSpace(d), "---\n"))
	}
	if !found {
		t.Fatal("the default rendering has no gossip key Secret")
	}
	return manifestsHeader + "---\n" + strings.Join(kept, "\n---\n") + "\n"
}

// manifests/corral.yaml is the chart's default rendering, and the API server accepts it.
func TestManifests(t *testing.T) {
	path := filepath.Join(repoRoot, "manifests", "corral.yaml")
	want := defaultManifests(t)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("manifests/corral.yaml differs from the chart's default rendering: run make manifests\n%s", firstDiff(string(got), want))
	}
	objs := decodeObjects(t, string(got))
	if len(objs) < 6 {
		t.Fatalf("manifests/corral.yaml holds %d objects", len(objs))
	}
	applyStrict(t, objs)
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  manifests: %s\n  chart:     %s", i+1, gl, wl)
		}
	}
	return ""
}
