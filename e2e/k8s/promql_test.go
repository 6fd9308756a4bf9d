package k8s

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// designMetrics are the metrics whose names corral fixes (docs/operations.md),
// corral_near_hits_total, corral_join_refused_total and corral_timer_lateness_seconds.
var designMetrics = []string{
	"corral_gets_total", "corral_fills_total", "corral_fill_coalesced_total", "corral_fill_errors_total",
	"corral_fill_duration_seconds", "corral_stale_served_total", "corral_refreshes_total",
	"corral_peer_requests_total", "corral_members", "corral_handoff_keys_total", "corral_near_hits_total",
	"corral_join_refused_total", "corral_timer_lateness_seconds",
}

// chartExprs renders the chart with every PromQL-bearing object on, in both modes, and returns
// each expression with where it came from.
func chartExprs(t testing.TB) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	for _, f := range []string{"server-k8s-statefulset-all.yaml", "library-k8s-all.yaml"} {
		for _, o := range render(t, "shop", "promql", filepath.Join("testdata", "values", f)) {
			switch o.GetKind() {
			case "PrometheusRule":
				for _, g := range listAt(o.Object, "spec", "groups") {
					for _, r := range listAt(g.(map[string]any), "rules") {
						r := r.(map[string]any)
						exprs[r["expr"].(string)] = f + ": alert " + r["alert"].(string)
					}
				}
			case "ConfigMap":
				if _, ok := o.GetLabels()["grafana_dashboard"]; !ok {
					continue
				}
				var d struct {
					Panels []struct {
						Title   string
						Targets []struct{ Expr string }
					}
				}
				raw := o.Object["data"].(map[string]any)["corral.json"].(string)
				if err := json.Unmarshal([]byte(raw), &d); err != nil {
					t.Fatalf("dashboard: %v", err)
				}
				for _, p := range d.Panels {
					for _, tg := range p.Targets {
						// Grafana's $__rate_interval is filled in before Prometheus sees the query.
						exprs[strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m")] = f + ": panel " + p.Title
					}
				}
			}
		}
	}
	if len(exprs) < 5 {
		t.Fatalf("only %d PromQL expressions found", len(exprs))
	}
	return exprs
}

// listAt is the list at path in m, nil when there is none.
func listAt(m map[string]any, path ...string) []any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	s, _ := cur.([]any)
	return s
}

// metricNames parses expr and returns the metrics it selects, with a histogram's _bucket, _sum
// and _count suffixes taken off.
func metricNames(t testing.TB, expr, where string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			t.Errorf("%s: %q selects series without naming a metric", where, expr)
			return nil
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && base == "corral_fill_duration_seconds" {
				name = base
			}
		}
		names = append(names, name)
		return nil
	})
	return names
}

// chartMetricNames is every metric the chart's PromQL names, sorted.
func chartMetricNames(t testing.TB) []string {
	t.Helper()
	var all []string
	for expr, where := range chartExprs(t) {
		all = append(all, metricNames(t, expr, where)...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// Every PromQL expression in the chart parses and names only metrics corral exports (the table of
// docs/operations.md); TestK8sDiscovery checks the same names against real members' /metrics.
func TestChartPromQL(t *testing.T) {
	names := chartMetricNames(t)
	for _, n := range names {
		if !slices.Contains(designMetrics, n) {
			t.Errorf("the chart's PromQL names %s, which corral does not export", n)
		}
	}
	for _, want := range []string{"corral_members", "corral_fill_errors_total", "corral_peer_requests_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert or panel uses %s", want)
		}
	}
	// The parser is not lenient: a broken expression is caught.
	if names := metricNames(&testing.T{}, "sum(rate(corral_fills_total[5m]", "self-check"); names != nil {
		t.Error("a broken expression parsed")
	}
}
