package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The chart's appVersion is the release in the file VERSION: the tag of the image the chart
// runs by default (image.tag "" = appVersion) is the one `make image` and `make release` build.
func TestChartAppVersionIsVERSION(t *testing.T) {
	r := loadRepo(t)
	v, err := os.ReadFile(filepath.Join(r.root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(version) {
		t.Fatalf("VERSION %q is not a semantic version such as 0.1.0", version)
	}
	chart, err := os.ReadFile(filepath.Join(r.root, "charts", "corral", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion:\s*"([^"]*)"`).FindSubmatch(chart)
	if m == nil {
		t.Fatal(`charts/corral/Chart.yaml has no appVersion: "…" line`)
	}
	if got := string(m[1]); got != version {
		t.Fatalf("charts/corral/Chart.yaml has appVersion %q, VERSION says %q: make them agree", got, version)
	}
	manifest, err := os.ReadFile(filepath.Join(r.root, "manifests", "corral.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifest), "image: corral:"+version+"\n") {
		t.Fatalf("manifests/corral.yaml does not run corral:%s (make manifests)", version)
	}
}
