package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Library mode for real: the catalog example (examples/catalog, an HTTP service embedding
// corral) installed as its README says — the chart in library mode with k8s:// discovery, then
// the example's own kubernetes.yaml — reading from the counting origin, under the same load as
// the server tests; then kubectl rollout restart of the example's Deployment.
func TestLibraryCatalog(t *testing.T) {
	needNode(t)
	ns := newNamespace(t, "library")
	w := startOrigin(t, ns)
	// The example names its products API products-api: the counting origin under that name.
	kubectlIn(t, ns, `apiVersion: v1
kind: Service
metadata: {name: products-api}
spec:
  selector: {app: origin}
  ports: [{port: 9000, targetPort: 9000}]
`, "apply", "-f", "-")

	start := time.Now()
	helm(t, ns, "install", "catalog", chartDir, "--set", "mode=library", "--set", "library.selector.app=catalog",
		"--set", "discovery.mode=k8s", "--wait", "--timeout", "2m")
	manifest, err := os.ReadFile(filepath.Join(repoRoot, "examples", "catalog", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The changes: the image built for this run, which is never pulled, and the products API,
	// the counting origin instead of the example's built-in demo products.
	const products = `{name: PRODUCTS_URL, value: "http://products-api:9000/items/products/{id}"}`
	m := strings.NewReplacer("image: catalog:latest", "image: "+exampleImage, "imagePullPolicy: IfNotPresent", "imagePullPolicy: Never",
		`{name: PRODUCTS_URL, value: ""}`, products).Replace(string(manifest))
	if !strings.Contains(m, exampleImage) || !strings.Contains(m, "imagePullPolicy: Never") || !strings.Contains(m, products) {
		t.Fatal(`examples/catalog/kubernetes.yaml no longer names image catalog:latest with imagePullPolicy IfNotPresent, and {name: PRODUCTS_URL, value: ""}`)
	}
	kubectlIn(t, ns, m, "apply", "-f", "-")
	kubectl(t, ns, "rollout", "status", "deployment/catalog", "--timeout", "5m")
	const sel = "app=catalog"
	waitMembers(t, ns, sel, 8080, 3, 2*time.Minute)
	record(result{Scenario: "library: helm install + kubectl apply", Took: time.Since(start),
		Note: "the catalog example, 3/3 Ready, one cluster of 3 through k8s://"})
	// The chart's NOTES: the metrics of one pod through the headless Service.
	addr := portForward(t, ns, "svc/catalog-corral-headless", 8080)
	if code, page := get("http://" + addr + "/metrics"); code != 200 || int(metricValue(page, membersRE)) != 3 {
		t.Errorf("through kubectl port-forward svc/catalog-corral-headless: /metrics %d, corral_members %v, want 3", code, metricValue(page, membersRE))
	}

	w.startLoad(fmt.Sprintf("http://catalog.%s.svc.cluster.local:8080/products/{key}", ns), hotKeys("lib", 20))
	ms := w.begin("library: kubectl rollout restart of the example")
	kubectl(t, ns, "rollout", "restart", "deployment/catalog")
	kubectl(t, ns, "rollout", "status", "deployment/catalog", "--timeout", "5m")
	waitMembers(t, ns, sel, 8080, 3, 5*time.Minute)
	ms.expectClean()
}
