package doccheck

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
)

// The sections of docs/operations.md whose tables the metrics must match, by heading.
const (
	operationsDoc  = "docs/operations.md"
	libraryHeading = "Every node: the library's metrics"
	serveHeading   = "corral serve adds"
)

// metricRow is one row of a metrics table: | `name` | type | `label`, … | meaning |.
type metricRow struct {
	name, typ string
	labels    []string
	line      int
}

var (
	rowRE        = regexp.MustCompile("^\\|\\s*`(corral_\\w+)`\\s*\\|\\s*(\\w+)\\s*\\|([^|]*)\\|")
	labelRE      = regexp.MustCompile("`(\\w+)`")
	tableHeadRE  = regexp.MustCompile(`^#{2,4}\s+(.*?)\s*$`)
	descNameRE   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descLabelsRE = regexp.MustCompile(`variableLabels: \{([^{}]*)\}\}$`)
	// A metric corral serve registers: a collector's Opts{Name: "corral_…"} or NewDesc("corral_…".
	serveMetricRE = regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*)"(corral_\w+)"`)
)

// metricTables reads the metric rows of docs/operations.md, by the heading they sit under.
func metricTables(tb testing.TB, r *repo) map[string][]metricRow {
	tb.Helper()
	out := map[string][]metricRow{}
	heading := ""
	for i, line := range strings.Split(r.read(tb, operationsDoc), "\n") {
		if m := tableHeadRE.FindStringSubmatch(line); m != nil {
			heading = strings.Trim(m[1], "`")
			continue
		}
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		row := metricRow{name: m[1], typ: m[2], line: i + 1}
		for _, l := range labelRE.FindAllStringSubmatch(m[3], -1) {
			row.labels = append(row.labels, l[1])
		}
		out[heading] = append(out[heading], row)
	}
	return out
}

// recorder is a Registerer that remembers what was registered, so that the metrics of a vector
// with no series yet (no peer request sent, no hand-off made) are seen too.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// registered is what the code says about one metric.
type registered struct {
	typ    string
	labels []string
}

// libraryMetrics starts a one-node cluster with a fresh registry, registers a group, runs a
// Get (a fill) and returns every metric the node registered: names and labels from the
// collectors' descriptions, types from a scrape or, for a vector with no series yet, from the
// vector's own type.
func libraryMetrics(tb testing.TB) map[string]registered {
	tb.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	n, err := corral.New(corral.Config{Name: "doccheck", BindAddr: "127.0.0.1", Registerer: rec})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer func() {
		if err := n.Close(ctx); err != nil {
			tb.Error(err)
		}
	}()
	g, err := corral.NewGroup(n, "docs", func(ctx context.Context, key string) (string, error) { return "v", nil })
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := g.Get(ctx, "k"); err != nil {
		tb.Fatal(err)
	}

	out := map[string]registered{}
	for _, c := range rec.collectors {
		typ := ""
		switch c.(type) {
		case *prometheus.CounterVec:
			typ = "counter"
		case *prometheus.GaugeVec:
			typ = "gauge"
		case *prometheus.HistogramVec:
			typ = "histogram"
		case *prometheus.SummaryVec:
			typ = "summary"
		}
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			name := descNameRE.FindStringSubmatch(s)
			labels := descLabelsRE.FindStringSubmatch(s)
			if name == nil || labels == nil {
				tb.Fatalf("cannot read the metric description %s", s)
			}
			reg := registered{typ: typ}
			if labels[1] != "" {
				reg.labels = strings.Split(labels[1], ",")
			}
			out[name[1]] = reg
		}
	}
	mfs, err := rec.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		reg, ok := out[mf.GetName()]
		if !ok {
			tb.Fatalf("%s was gathered but no collector described it", mf.GetName())
		}
		reg.typ = strings.ToLower(mf.GetType().String()) // COUNTER, GAUGE, HISTOGRAM, …
		out[mf.GetName()] = reg
	}
	for name, reg := range out {
		if reg.typ == "" {
			tb.Fatalf("%s: no series after a Get and not a vector of a known type; give the test a way to make one", name)
		}
	}
	return out
}

// serveMetrics returns the names of the metrics corral serve registers beside the library's,
// read from its source (its own collectors; the Go and process collectors are client_golang's).
func serveMetrics(tb testing.TB, r *repo) map[string]bool {
	tb.Helper()
	out := map[string]bool{}
	for _, f := range r.withSuffix(".go") {
		if !strings.HasPrefix(f, "cmd/corral/") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, m := range serveMetricRE.FindAllStringSubmatch(r.read(tb, f), -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestMetricsTable checks the metric tables of docs/operations.md against the code, both ways:
// every metric a node registers has a row under the library's heading with its type and labels,
// every metric corral serve adds has one under serve's, and no row names a metric that is not
// registered.
func TestMetricsTable(t *testing.T) {
	r := loadRepo(t)
	tables := metricTables(t, r)
	lib, serve := tables[libraryHeading], tables[serveHeading]
	if len(lib) == 0 || len(serve) == 0 {
		t.Fatalf("%s: want metric tables under the headings %q and %q; found tables under %q",
			operationsDoc, libraryHeading, serveHeading, slices.Sorted(maps.Keys(tables)))
	}
	for _, d := range compareLibrary(lib, libraryMetrics(t)) {
		t.Errorf("%s: %s", operationsDoc, d)
	}
	for _, d := range compareServe(serve, serveMetrics(t, r)) {
		t.Errorf("%s: %s", operationsDoc, d)
	}
}

// compareLibrary returns the differences between the library's table and the registered
// metrics.
func compareLibrary(rows []metricRow, code map[string]registered) []string {
	var diffs []string
	inTable := map[string]bool{}
	for _, row := range rows {
		if inTable[row.name] {
			diffs = append(diffs, fmt.Sprintf("line %d: %s is listed twice", row.line, row.name))
		}
		inTable[row.name] = true
		reg, ok := code[row.name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("line %d: %s is in the table but a node does not register it", row.line, row.name))
		case row.typ != reg.typ:
			diffs = append(diffs, fmt.Sprintf("line %d: %s is a %s, the table says %s", row.line, row.name, reg.typ, row.typ))
		case !slices.Equal(slices.Sorted(slices.Values(row.labels)), slices.Sorted(slices.Values(reg.labels))):
			diffs = append(diffs, fmt.Sprintf("line %d: %s has labels %q, the table says %q", row.line, row.name, reg.labels, row.labels))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(code)) {
		if !inTable[name] {
			diffs = append(diffs, fmt.Sprintf("%s (a %s, labels %q) is registered by every node but missing from the table under %q",
				name, code[name].typ, code[name].labels, libraryHeading))
		}
	}
	return diffs
}

// compareServe returns the differences between corral serve's table and its metrics.
func compareServe(rows []metricRow, code map[string]bool) []string {
	var diffs []string
	inTable := map[string]bool{}
	for _, row := range rows {
		inTable[row.name] = true
		if !code[row.name] {
			diffs = append(diffs, fmt.Sprintf("line %d: %s is in the table but corral serve does not register it", row.line, row.name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(code)) {
		if !inTable[name] {
			diffs = append(diffs, fmt.Sprintf("%s is registered by corral serve but missing from the table under %q", name, serveHeading))
		}
	}
	return diffs
}

// TestCompareMetrics holds the comparison to the drift it must report.
func TestCompareMetrics(t *testing.T) {
	code := map[string]registered{
		"corral_a_total": {typ: "counter", labels: []string{"group"}},
		"corral_b":       {typ: "gauge"},
	}
	tests := []struct {
		name  string
		rows  []metricRow
		diffs int
	}{
		{"equal", []metricRow{{name: "corral_a_total", typ: "counter", labels: []string{"group"}}, {name: "corral_b", typ: "gauge"}}, 0},
		{"a metric missing from the table", []metricRow{{name: "corral_a_total", typ: "counter", labels: []string{"group"}}}, 1},
		{"a row for no metric", []metricRow{{name: "corral_a_total", typ: "counter", labels: []string{"group"}}, {name: "corral_b", typ: "gauge"}, {name: "corral_c", typ: "gauge"}}, 1},
		{"a wrong type", []metricRow{{name: "corral_a_total", typ: "gauge", labels: []string{"group"}}, {name: "corral_b", typ: "gauge"}}, 1},
		{"a wrong label", []metricRow{{name: "corral_a_total", typ: "counter", labels: []string{"node"}}, {name: "corral_b", typ: "gauge"}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diffs := compareLibrary(tt.rows, code); len(diffs) != tt.diffs {
				t.Errorf("%d differences, want %d: %q", len(diffs), tt.diffs, diffs)
			}
		})
	}
	if diffs := compareServe([]metricRow{{name: "corral_x_total"}}, map[string]bool{"corral_y_total": true}); len(diffs) != 2 {
		t.Errorf("serve: %d differences, want 2: %q", len(diffs), diffs)
	}
}
