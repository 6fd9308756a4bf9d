package doccheck

import (
	"strings"
	"testing"
)

// firstTable returns the lines of the first Markdown table in text after the heading named
// after ("" = from the start), or nil.
func firstTable(text, after string) []string {
	lines := strings.Split(text, "\n")
	i := 0
	if after != "" {
		for i < len(lines) && !(strings.HasPrefix(lines[i], "#") && strings.TrimSpace(strings.TrimLeft(lines[i], "#")) == after) {
			i++
		}
	}
	for i < len(lines) && !strings.HasPrefix(lines[i], "|") {
		i++
	}
	var out []string
	for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		out = append(out, lines[i])
	}
	return out
}

// TestPerformanceTable checks that docs/performance.md shows the table of the last
// `make bench-compare`, which writes it to e2e/bench/RESULTS.md: a new run is copied into the
// document with it, or this fails.
func TestPerformanceTable(t *testing.T) {
	r := loadRepo(t)
	const doc, results, heading = "docs/performance.md", "e2e/bench/RESULTS.md", "The latest run"
	want := firstTable(r.read(t, results), "")
	got := firstTable(r.read(t, doc), heading)
	if len(want) == 0 {
		t.Fatalf("%s has no table", results)
	}
	if len(got) == 0 {
		t.Fatalf("%s has no table under the heading %q", doc, heading)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Fatalf("%s, %q: the table differs from %s's at row %d:\n got %s\nwant %s\n(copy the table of the last run)", doc, heading, results, i+1, g, w)
			}
		}
	}
}
