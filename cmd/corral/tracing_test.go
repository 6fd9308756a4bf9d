package main

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/corralcache/corral/internal/clustertest"
	"github.com/corralcache/corral/internal/otlptest"
)

// find returns the one span called name that instance sent, failing tb otherwise.
func find(tb testing.TB, spans []otlptest.Span, instance, name string) *tracepb.Span {
	tb.Helper()
	var found []*tracepb.Span
	for _, e := range spans {
		if e.Instance == instance && e.Span.GetName() == name {
			found = append(found, e.Span)
		}
	}
	if len(found) != 1 {
		var all []string
		for _, e := range spans {
			all = append(all, e.Instance+":"+e.Span.GetName())
		}
		tb.Fatalf("%d spans %q from %s, want 1 (all: %v)", len(found), name, instance, all)
	}
	return found[0]
}

func TestServeTracesAGetThroughANonOwner(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50 ms, not 5 s
	col := otlptest.Start(t, "127.0.0.1")
	var originTrace sync.Map // the traceparent each fetch carried
	originSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		originTrace.Store(r.URL.Path, r.Header.Get("traceparent"))
		fmt.Fprint(w, "value")
	}))
	defer originSrv.Close()

	var daemons []*testDaemon
	for i := range 2 {
		daemons = append(daemons, startTestDaemon(t, func(c *serveConfig) {
			c.name = fmt.Sprintf("traced-%d", i)
			c.origin = originSrv.URL + "/items/{key}"
			c.tracing.otlpEndpoint = col.Addr
			if i > 0 {
				c.join = []string{daemons[0].d.node.GossipAddr()}
			}
		}))
	}
	clustertest.Eventually(t, "2 members on both", func() bool {
		return len(daemons[0].d.node.Members()) == 2 && len(daemons[1].d.node.Members()) == 2
	})
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("k%d", i)
		if daemons[1].d.node.Owner(key).Name == "traced-0" {
			break
		}
	}

	tid, sid := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp, body := daemons[1].do(t, "GET", "/v1/groups/g/keys/"+key, "", "traceparent", "00-"+tid+"-"+sid+"-01")
	if resp.StatusCode != http.StatusOK || body != "value" {
		t.Fatalf("GET = %d %q", resp.StatusCode, body)
	}
	got, _ := originTrace.Load("/items/" + key)
	if tp, _ := got.(string); len(tp) != 55 || tp[3:35] != tid {
		t.Errorf("the origin got traceparent %q, want one in trace %s", tp, tid)
	}

	traceID, _ := hex.DecodeString(tid)
	const (
		front  = "GET /v1/groups/{group}/keys/{key}"
		peer   = "corral.peer.v1.Peer/Get"
		origin = "GET /items/{key}"
	)
	var spans []otlptest.Span
	clustertest.Eventually(t, "the owner's origin call exported", func() bool {
		spans = col.Of(traceID)
		for _, e := range spans {
			if e.Span.GetName() == origin {
				return true
			}
		}
		return false
	})
	// Give the caller's spans, which end after the owner's, their turn to be exported.
	clustertest.Eventually(t, "the front's span exported", func() bool {
		spans = col.Of(traceID)
		for _, e := range spans {
			if e.Span.GetName() == front {
				return true
			}
		}
		return false
	})
	parentOf := func(child, parent *tracepb.Span) {
		t.Helper()
		if string(child.GetParentSpanId()) != string(parent.GetSpanId()) {
			t.Errorf("%s's parent is %x, want %s's %x", child.GetName(), child.GetParentSpanId(), parent.GetName(), parent.GetSpanId())
		}
	}
	httpSpan := find(t, spans, "traced-1", front)
	if hex.EncodeToString(httpSpan.GetParentSpanId()) != sid || httpSpan.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("front's span: parent %x kind %v, want the caller's %s, server", httpSpan.GetParentSpanId(), httpSpan.GetKind(), sid)
	}
	get := find(t, spans, "traced-1", "corral.GetWithInfo")
	parentOf(get, httpSpan)
	client := find(t, spans, "traced-1", peer)
	server := find(t, spans, "traced-0", peer)
	parentOf(server, client)
	if server.GetKind() != tracepb.Span_SPAN_KIND_SERVER || client.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("peer spans' kinds: client %v, server %v", client.GetKind(), server.GetKind())
	}
	fillSpan := find(t, spans, "traced-0", "corral.fill")
	parentOf(fillSpan, server)
	parentOf(find(t, spans, "traced-0", origin), fillSpan)
	for _, e := range spans {
		if e.Service != "corral" {
			t.Errorf("span %s from service %q, want corral", e.Span.GetName(), e.Service)
		}
	}
}

func TestTracingFlagsRefused(t *testing.T) {
	tests := []struct {
		name string
		c    tracingConfig
	}{
		{"bad trace-keys", tracingConfig{traceKeys: "sometimes"}},
		{"ui without endpoint", tracingConfig{traceKeys: "off", traceUIURL: "http://jaeger/trace/{trace_id}"}},
		{"ui without trace_id", tracingConfig{traceKeys: "off", otlpEndpoint: "127.0.0.1:4317", traceUIURL: "http://jaeger/trace/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.c.validate(); err == nil {
				t.Errorf("%+v accepted", tt.c)
			}
		})
	}
}

// TestServeTraceContextFromOTELPropagators: with OTEL_PROPAGATORS=b3 the daemon continues a
// trace from a request's b3 header and sends it on to the origin in b3, not traceparent.
func TestServeTraceContextFromOTELPropagators(t *testing.T) {
	t.Setenv("OTEL_PROPAGATORS", "b3")
	col := otlptest.Start(t, "127.0.0.1")
	var originHeaders sync.Map // path → the fetch's headers
	originSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		originHeaders.Store(r.URL.Path, r.Header.Clone())
		fmt.Fprint(w, "value")
	}))
	defer originSrv.Close()
	d := startTestDaemon(t, func(c *serveConfig) {
		c.name = "b3"
		c.origin = originSrv.URL + "/items/{key}"
		c.tracing.otlpEndpoint = col.Addr
	})
	tid, sid := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp, body := d.do(t, "GET", "/v1/groups/g/keys/k", "", "b3", tid+"-"+sid+"-1")
	if resp.StatusCode != http.StatusOK || body != "value" {
		t.Fatalf("GET = %d %q", resp.StatusCode, body)
	}
	got, _ := originHeaders.Load("/items/k")
	h, _ := got.(http.Header)
	if b3 := h.Get("b3"); !strings.HasPrefix(b3, tid+"-") || !strings.HasSuffix(b3, "-1") {
		t.Errorf("the origin got b3 %q, want one in trace %s, sampled", b3, tid)
	}
	if tp := h.Get("traceparent"); tp != "" {
		t.Errorf("the origin got traceparent %q: OTEL_PROPAGATORS=b3 names b3 alone", tp)
	}
}

func TestPropagatorFromEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "OTEL_PROPAGATORS" {
				return v
			}
			return ""
		}
	}
	for v, want := range map[string][]string{
		"":                      {"traceparent", "tracestate", "baggage"},
		"tracecontext":          {"traceparent", "tracestate"},
		" b3multi , jaeger ":    {"x-b3-traceid", "uber-trace-id"},
		"none":                  nil,
		"tracecontext,baggage,": {"traceparent", "baggage"},
	} {
		p, err := propagatorFromEnv(env(v))
		if err != nil {
			t.Errorf("OTEL_PROPAGATORS=%q: %v", v, err)
			continue
		}
		fields := p.Fields()
		for _, f := range want {
			if !slices.Contains(fields, f) {
				t.Errorf("OTEL_PROPAGATORS=%q: fields %v lack %s", v, fields, f)
			}
		}
		if want == nil && len(fields) != 0 {
			t.Errorf("OTEL_PROPAGATORS=none: fields %v, want none", fields)
		}
	}
	if _, err := propagatorFromEnv(env("tracecontext,zipkin")); err == nil || !strings.Contains(err.Error(), "OTEL_PROPAGATORS") {
		t.Errorf("OTEL_PROPAGATORS=tracecontext,zipkin: err %v, want one naming the variable", err)
	}
}
