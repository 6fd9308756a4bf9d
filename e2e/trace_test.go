package e2e

// One GET through a non-owner, followed in a real Jaeger: three `corral serve` processes send
// OTLP to Jaeger's all-in-one binary (built from its Go module by jaeger/build.sh, in-memory
// storage, every port on loopback), and the test asks Jaeger's query API for the trace and
// finds in it the caller's client span, the owner's server span under it and the owner's
// call to the origin. Then chromium opens the trace and takes the picture docs/operations.md
// shows (written to docs/images/ with CORRAL_E2E_UPDATE_DOCS=1), and follows the owner's debug
// page's link from the slow fill to the same trace.
//
// The picture is not Jaeger's own UI: the UI is a separate npm build that Jaeger's Go module
// does not carry (a binary built from it serves a placeholder page), and npm cannot be reached
// here. testdata/trace/waterfall.html draws the trace from Jaeger's query API instead — the
// spans Jaeger stored, their parents, members, timings, attributes and events — served by the
// test beside a pass-through of /api/ to Jaeger, which is also the --trace-ui-url the debug
// page links to.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// jaegerBin returns the Jaeger binary: $CORRAL_E2E_JAEGER, or jaeger/build.sh's (built once
// per version into the cache; make e2e and .ci/run build it before the tests).
func jaegerBin(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv("CORRAL_E2E_JAEGER"); bin != "" {
		return bin
	}
	var out bytes.Buffer
	build := exec.Command("./build.sh")
	build.Dir = "jaeger"
	build.Stdout, build.Stderr = &out, os.Stderr
	if err := build.Run(); err != nil {
		tb.Fatalf("jaeger/build.sh: %v", err)
	}
	return strings.TrimSpace(out.String())
}

// jaeger is a running Jaeger all-in-one.
type jaeger struct {
	otlp  string // OTLP/gRPC receiver, "127.0.0.1:port"
	query string // query API and UI, "127.0.0.1:port"
}

func startJaeger(tb testing.TB) *jaeger {
	tb.Helper()
	j := &jaeger{otlp: "127.0.0.1:" + strconv.Itoa(freePort(tb)), query: "127.0.0.1:" + strconv.Itoa(freePort(tb))}
	// The collector's pipeline with only what the test needs: the OTLP receiver, memory
	// storage, the query API. Every other port of the default all-in-one (Jaeger's own
	// protocols, Zipkin, sampling, metrics) stays closed.
	config := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: %s
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, j.query, freePort(tb), j.otlp)
	path := filepath.Join(tb.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	log := &syncBuffer{}
	cmd := exec.Command(jaegerBin(tb), "--config", path)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if tb.Failed() {
			tb.Logf("log of jaeger:\n%s", log.String())
		}
	})
	waitFor(tb, "jaeger's query API", 60*time.Second, func() bool {
		select {
		case <-done:
			tb.Fatalf("jaeger exited:\n%s", log.String())
		default:
		}
		resp, err := http.Get("http://" + j.query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return j
}

// jaegerTrace is a trace as Jaeger's query API (/api/traces/{id}) returns it.
type jaegerTrace struct {
	Spans []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"processes"`
}

// trace returns the trace id as Jaeger holds it now (nil: not found yet).
func (j *jaeger) trace(tb testing.TB, id string) *jaegerTrace {
	tb.Helper()
	resp, err := http.Get("http://" + j.query + "/api/traces/" + id)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var out struct{ Data []jaegerTrace }
	if err := json.Unmarshal(body, &out); err != nil {
		tb.Fatalf("query API: %v: %s", err, body)
	}
	if len(out.Data) == 0 {
		return nil
	}
	return &out.Data[0]
}

// traceSpan is one span of a jaegerTrace, with its member and kind.
type traceSpan struct {
	id, name, member, kind, parent string
}

func (t *jaegerTrace) spans() []traceSpan {
	var out []traceSpan
	for _, s := range t.Spans {
		ts := traceSpan{id: s.SpanID, name: s.OperationName}
		for _, kv := range t.Processes[s.ProcessID].Tags {
			if kv.Key == "service.instance.id" {
				ts.member = fmt.Sprint(kv.Value)
			}
		}
		for _, kv := range s.Tags {
			if kv.Key == "span.kind" {
				ts.kind = fmt.Sprint(kv.Value)
			}
		}
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				ts.parent = r.SpanID
			}
		}
		out = append(out, ts)
	}
	return out
}

func findSpan(spans []traceSpan, member, name, kind string) (traceSpan, bool) {
	for _, s := range spans {
		if s.member == member && s.name == name && (kind == "" || s.kind == kind) {
			return s, true
		}
	}
	return traceSpan{}, false
}

// startViewer serves testdata/trace/waterfall.html at /trace/{id} and passes /api/ through to
// j's query API, and returns its base URL.
func startViewer(tb testing.TB, j *jaeger) string {
	tb.Helper()
	page, err := os.ReadFile(filepath.Join("testdata", "trace", "waterfall.html"))
	if err != nil {
		tb.Fatal(err)
	}
	api := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: j.query})
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.HandleFunc("/trace/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return srv.URL
}

func TestTraceInJaeger(t *testing.T) {
	j := startJaeger(t)
	viewer := startViewer(t, j)
	origin := newOrigin(t, 150*time.Millisecond) // a slow origin: the fill stands out in the picture
	flags := []string{"--origin", origin.template(), "--otlp-endpoint", j.otlp,
		"--trace-ui-url", viewer + "/trace/{trace_id}"}
	// Spans batched 100 ms at most, not the SDK's 5 s.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	nodes := startCluster(t, 3, flags...)

	// A key node-0 owns, read through node-1.
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("item-%d", i)
		if nodes[1].cluster(t, k).Owner == "node-0" {
			key = k
		}
	}
	const traceID = "5b8efff798038103d269b633813fc60c"
	req, _ := http.NewRequest("GET", nodes[1].url("/v1/groups/catalog/keys/"+key), nil)
	req.Header.Set("traceparent", "00-"+traceID+"-eee19b7ec3c1b174-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "value of "+key || resp.Header.Get("X-Corral-Source") != "peer" {
		t.Fatalf("GET through node-1 = %d %q (source %q)", resp.StatusCode, body, resp.Header.Get("X-Corral-Source"))
	}

	// The trace, once Jaeger holds all of it: the caller's client span, the owner's server
	// span under it, and the origin call under the owner's fill.
	var spans []traceSpan
	var client, server, fetch traceSpan
	waitFor(t, "the trace in jaeger", 30*time.Second, func() bool {
		tr := j.trace(t, traceID)
		if tr == nil {
			return false
		}
		spans = tr.spans()
		var ok1, ok2, ok3 bool
		client, ok1 = findSpan(spans, "node-1", "corral.peer.v1.Peer/Get", "client")
		server, ok2 = findSpan(spans, "node-0", "corral.peer.v1.Peer/Get", "server")
		fetch, ok3 = findSpan(spans, "node-0", "GET /items/{key}", "client")
		return ok1 && ok2 && ok3
	})
	if server.parent != client.id {
		t.Errorf("the owner's span's parent is %s, want the client span %s (spans: %+v)", server.parent, client.id, spans)
	}
	fill, ok := findSpan(spans, "node-0", "corral.fill", "")
	if !ok || fill.parent != server.id || fetch.parent != fill.id {
		t.Errorf("the origin call is not under the owner's fill under its server span: %+v", spans)
	}
	front, ok := findSpan(spans, "node-1", "GET /v1/groups/{group}/keys/{key}", "server")
	if !ok || front.parent != "eee19b7ec3c1b174" {
		t.Errorf("node-1's HTTP span does not continue the caller's traceparent: %+v", spans)
	}
	for _, s := range spans {
		if s.member == "node-2" {
			t.Errorf("node-2 took part in the trace: %+v", s)
		}
	}

	// The picture: the trace as Jaeger stored it, every span shown.
	b := newDebugBrowser(t)
	b.do("open the trace", chromedp.Navigate(viewer+"/trace/"+traceID))
	b.waitUntil("the trace's spans", 30*time.Second, `document.body.dataset.ready === "true" && document.body.innerText.includes("corral.fill") && document.body.innerText.includes("GET /items/{key}")`)
	shot := b.screenshot("jaeger-trace.png")
	if os.Getenv("CORRAL_E2E_UPDATE_DOCS") != "" {
		png, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "images", "jaeger-trace.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The owner's debug page links the group's slowest fill of the last minute, this one, to
	// its trace in the viewer (--trace-ui-url).
	b.do("open node-0's debug page", chromedp.Navigate(nodes[0].url("/debug/corral")))
	link := `[...document.querySelectorAll('#hotkeys a.trace')].find((a) => a.href === "` + viewer + `/trace/` + traceID + `")`
	b.waitUntil("the slow fill's link to its trace", 30*time.Second, `!!(`+link+`)`)
	b.screenshot("debug-slow-fill.png")
	href := debugEval[string](b, `(`+link+`).href`)
	b.do("follow the link", chromedp.Navigate(href))
	b.waitUntil("the trace it leads to", 30*time.Second, `location.pathname === "/trace/`+traceID+`" && document.body.dataset.ready === "true"`)
}
