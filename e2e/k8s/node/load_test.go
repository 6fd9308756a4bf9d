package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// workload is what a platform engineer would put beside a cache to try it: the counting origin
// (e2e/faults/origin: "<key>@<generation>", calls counted per key) behind a Service, and the
// load generator (images/loadgen) reading hot keys through the cache's Service at a steady
// rate from inside the cluster — cluster DNS, kube-proxy, readiness-gated endpoints, all real.
type workload struct {
	t        *testing.T
	ns       string
	originIP string
	loadIP   string
	hot      []string

	mu    sync.Mutex
	named map[string]string // pod IP → the pod's name, for callTimes
}

// notePods remembers the names of ps by IP, so that callTimes names the pod that made a
// call, also once it is gone.
func (w *workload) notePods(ps []corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.named == nil {
		w.named = map[string]string{}
	}
	for _, p := range ps {
		if p.Status.PodIP != "" {
			w.named[p.Status.PodIP] = p.Name
		}
	}
}

const originManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: origin}
spec:
  replicas: 1
  selector: {matchLabels: {app: origin}}
  template:
    metadata: {labels: {app: origin}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: origin
          image: corral-e2e/origin:node
          imagePullPolicy: Never
          args: [":9000"]
          ports: [{name: http, containerPort: 9000}]
          readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 1}
          securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: origin}
spec:
  selector: {app: origin}
  ports: [{name: http, port: 9000, targetPort: http}]
`

// The load: 200 reads a second over 8 workers, bounded by 2,000,000 requests and 40 minutes.
const loadgenManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: loadgen}
spec:
  replicas: 1
  selector: {matchLabels: {app: loadgen}}
  template:
    metadata: {labels: {app: loadgen}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: loadgen
          image: corral-e2e/loadgen:node
          imagePullPolicy: Never
          args: ["-target", "%s", "-keys", "%s", "-rate", "200", "-workers", "8", "-listen", ":8081"]
          ports: [{name: stats, containerPort: 8081}]
          securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`

// startOrigin deploys the counting origin and waits for it.
func startOrigin(t *testing.T, ns string) *workload {
	t.Helper()
	kubectlIn(t, ns, originManifest, "apply", "-f", "-")
	w := &workload{t: t, ns: ns}
	waitFor(t, "the origin Ready", 2*time.Minute, func() bool {
		ps := pods(t, ns, "app=origin")
		if len(ps) == 1 && podReady(ps[0]) {
			w.originIP = ps[0].Status.PodIP
			return true
		}
		return false
	})
	return w
}

// originURL is the origin URL template corral fills from, through cluster DNS.
func (w *workload) originURL() string {
	return fmt.Sprintf("http://origin.%s.svc.cluster.local:9000/items/{group}/{key}", w.ns)
}

// startLoad deploys the load generator reading keys from target ("{key}" replaced), waits
// until every key has been read once and the cluster is warm, and checks that filling them
// cost one origin call each.
func (w *workload) startLoad(target string, keys []string) {
	t := w.t
	t.Helper()
	w.hot = keys
	kubectlIn(t, w.ns, fmt.Sprintf(loadgenManifest, target, strings.Join(keys, ",")), "apply", "-f", "-")
	waitFor(t, "the load generator running", 2*time.Minute, func() bool {
		ps := pods(t, w.ns, "app=loadgen")
		if len(ps) == 1 && ps[0].Status.PodIP != "" {
			w.loadIP = ps[0].Status.PodIP
			var s loadStats
			return jsonGet(w.statsURL(), &s) == nil
		}
		return false
	})
	waitFor(t, "every hot key read", 2*time.Minute, func() bool {
		s := w.stats()
		return s.OK >= int64(2*len(keys))
	})
	calls := w.originCalls()
	for _, k := range keys {
		if calls[k] != 1 {
			t.Errorf("hot key %s cost %d origin calls while the cluster filled it, want 1", k, calls[k])
		}
	}
}

func (w *workload) statsURL() string { return "http://" + w.loadIP + ":8081/stats" }

// loadStats is the load generator's /stats.
type loadStats struct {
	Requests int64            `json:"requests"`
	OK       int64            `json:"ok"`
	Failed   int64            `json:"failed"`
	Failures []string         `json:"failures"`
	Sources  map[string]int64 `json:"sources"`
	Slowest  string           `json:"slowest"`
	Running  bool             `json:"running"`
}

func (w *workload) stats() loadStats {
	w.t.Helper()
	var s loadStats
	if err := jsonGet(w.statsURL(), &s); err != nil {
		w.t.Fatalf("load generator stats: %v", err)
	}
	if !s.Running {
		w.t.Fatalf("the load generator stopped: its bounds were reached (%d requests)", s.Requests)
	}
	return s
}

// originCalls is the origin's count of calls per key.
func (w *workload) originCalls() map[string]int {
	w.t.Helper()
	var c struct {
		Calls map[string]int `json:"calls"`
	}
	if err := jsonGet("http://"+w.originIP+":9000/counts", &c); err != nil {
		w.t.Fatalf("origin counts: %v", err)
	}
	return c.Calls
}

// measure is one scenario under the load: what the load generator and the origin said when it
// began.
type measure struct {
	w      *workload
	name   string
	start  time.Time
	before loadStats
	calls  map[string]int
}

func (w *workload) begin(name string) *measure {
	return &measure{w: w, name: name, start: time.Now(), before: w.stats(), calls: w.originCalls()}
}

// result is one scenario's figures.
type result struct {
	Scenario string
	Requests int64
	Failed   int64
	Extra    int           // origin calls for hot keys during the scenario
	Took     time.Duration // from the command to the cluster settled
	Note     string
}

// end reads the figures once the scenario has settled, records them for the summary, and
// returns them with the hot keys that cost origin calls (key → calls).
func (m *measure) end() (result, map[string]int) {
	t := m.w.t
	t.Helper()
	after, calls := m.w.stats(), m.w.originCalls()
	r := result{Scenario: m.name, Requests: after.Requests - m.before.Requests, Failed: after.Failed - m.before.Failed,
		Took: time.Since(m.start)}
	extra := map[string]int{}
	for _, k := range m.w.hot {
		if d := calls[k] - m.calls[k]; d > 0 {
			extra[k] = d
			r.Extra += d
		}
	}
	if r.Failed > 0 {
		var recent []string
		for _, f := range after.Failures {
			if !contains(m.before.Failures, f) {
				recent = append(recent, f)
			}
		}
		t.Logf("%s: %d failed requests; the last ones:\n  %s", m.name, r.Failed, strings.Join(recent, "\n  "))
	}
	t.Logf("%s: %d requests, %d failed, %d extra origin calls for hot keys, %v (slowest request so far %s)",
		m.name, r.Requests, r.Failed, r.Extra, r.Took.Round(100*time.Millisecond), after.Slowest)
	return r, extra
}

// expectClean is end for the scenarios that must cost nothing: no failed request, no origin
// call for a hot key.
func (m *measure) expectClean() result {
	t := m.w.t
	t.Helper()
	r, extra := m.end()
	if r.Failed > 0 {
		t.Errorf("%s: %d of %d requests failed, want 0", m.name, r.Failed, r.Requests)
	}
	checkGracefulRefills(t, m.name, &r, extra, m.w.callTimes(sortedKeys(extra)))
	record(r)
	return r
}

// strict is CORRAL_E2E_STRICT: every scenario held to corral's contract alone. Without it a
// graceful scenario may cost up to graceTolerance origin calls, none twice for one key (see
// checkGracefulRefills).
var strict = os.Getenv("CORRAL_E2E_STRICT") != ""

// graceTolerance bounds the origin calls a graceful scenario may cost outside strict mode.
// corral's contract is 0 — a join or a graceful leave costs no refill — and most runs measure
// 0; on a node starved of CPU (2 cores under other suites' load) a rollout has been seen to
// cost 1 or 2, a new owner's first miss loaded from the origin instead of asking the previous
// owner. A hand-off or a join that did not work at all costs every moved key: 7 or more of the
// 20 hot keys per pod, far above this bound.
const graceTolerance = 2

// checkGracefulRefills holds a graceful scenario's origin calls for hot keys (extra, key →
// calls) to the contract (strict) or to graceTolerance, and notes them in r either way.
func checkGracefulRefills(t *testing.T, name string, r *result, extra map[string]int, times string) {
	t.Helper()
	if r.Extra == 0 {
		return
	}
	r.Note = strings.TrimPrefix(r.Note+fmt.Sprintf("; %d refilled: %v (contract: 0)", r.Extra, sortedKeys(extra)), "; ")
	twice := false
	for _, n := range extra {
		twice = twice || n > 1
	}
	if strict || r.Extra > graceTolerance || twice {
		t.Errorf("%s: %d extra origin calls for hot keys (%v), want 0 (at most %d, none twice, without CORRAL_E2E_STRICT); the origin's calls of those keys:\n%s",
			name, r.Extra, extra, graceTolerance, times)
		return
	}
	t.Logf("NOTE %s: %d extra origin calls for hot keys (%v) where corral's contract says 0; within the tolerance of a CPU-starved node (CORRAL_E2E_STRICT=1 fails on them); the origin's calls:\n%s",
		name, r.Extra, extra, times)
}

// callTimes says when the origin was called for keys (its first 8 calls of each), and by
// which pod (its IP when notePods never saw it), to be read beside the pods' logs.
func (w *workload) callTimes(keys []string) string {
	var c struct {
		Times map[string][]time.Time `json:"times"`
		From  map[string][]string    `json:"from"`
	}
	if err := jsonGet("http://"+w.originIP+":9000/counts?times", &c); err != nil {
		return err.Error()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s:", k)
		for i, at := range c.Times[k] {
			fmt.Fprintf(&b, " %s", at.UTC().Format("15:04:05.000"))
			if i < len(c.From[k]) {
				from := c.From[k][i]
				if name, ok := w.named[from]; ok {
					from = name
				}
				fmt.Fprintf(&b, " (%s)", from)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The figures of every scenario of the run, printed at its end and written to
// testdata/out/results.md.
var (
	resultsMu sync.Mutex
	results   []result // guards results
)

func record(r result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

func summary() string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| scenario | requests | failed | extra origin calls (hot keys) | time | note |\n|---|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f s | %s |\n", r.Scenario, r.Requests, r.Failed, r.Extra, r.Took.Seconds(), r.Note)
	}
	return b.String()
}

func writeSummary() {
	s := summary()
	if s == "" {
		return
	}
	fmt.Fprintf(os.Stderr, "\nreal-node scenarios (make e2e-k8s):\n%s", s)
	dir := filepath.Join("testdata", "out")
	if os.MkdirAll(dir, 0o755) == nil {
		os.WriteFile(filepath.Join(dir, "results.md"), []byte(s), 0o644)
	}
}
