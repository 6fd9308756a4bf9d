package node

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/corralcache/corral/internal/otlptest"
)

// TestServerTrace installs the chart with server.otlpEndpoint pointing at an OTLP/gRPC
// receiver in this process, on the node's address (where pods reach the node), and follows
// one GET through a pod that does not own its key: the one trace the caller began
// (traceparent) holds the front's server span and the peer client span on that pod, and
// the owner's server span and its origin call on another pod.
func TestServerTrace(t *testing.T) {
	needNode(t)
	col := otlptest.Start(t, bridgeIP)
	s := installServer(t, "dns", "trace", fmt.Sprintf("  otlpEndpoint: %q\n", col.Addr))
	start := time.Now()
	ps := pods(t, s.ns, s.sel)
	via := ps[0]
	const (
		front   = "GET /v1/groups/{group}/keys/{key}"
		peer    = "corral.peer.v1.Peer/Get"
		fetched = "GET /items/{group}/{key}"
	)
	// A fresh key that via does not own: its GET is answered by the owner (X-Corral-Source:
	// peer). Each try is a trace of its own.
	var tid string
	for i := 0; tid == "" && i < 50; i++ {
		id := fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e%04x", i)
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s:8080/v1/groups/items/keys/traced-%d", via.Status.PodIP, i), nil)
		req.Header.Set("traceparent", "00-"+id+"-00f067aa0ba902b7-01")
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET traced-%d through %s: %s", i, via.Name, resp.Status)
		}
		if resp.Header.Get("X-Corral-Source") == "peer" {
			tid = id
		}
	}
	if tid == "" {
		t.Fatalf("50 fresh keys read through %s, none answered by another pod", via.Name)
	}
	traceID, _ := hex.DecodeString(tid)
	var spans []otlptest.Span
	waitFor(t, "the trace's spans exported", time.Minute, func() bool {
		spans = col.Of(traceID)
		return len(pick(spans, front, tracepb.Span_SPAN_KIND_SERVER)) > 0 && len(pick(spans, peer, tracepb.Span_SPAN_KIND_CLIENT)) > 0 &&
			len(pick(spans, peer, tracepb.Span_SPAN_KIND_SERVER)) > 0 && len(pick(spans, fetched, tracepb.Span_SPAN_KIND_CLIENT)) > 0
	})
	// On via: the front's span and one client span to the owner. On the owner: the server span
	// under it and its origin call (a new owner's fill may first ask the key's previous owner,
	// in the same trace: more peer spans, on the owner's side).
	fr := one(t, spans, front, tracepb.Span_SPAN_KIND_SERVER)
	if fr.Instance != via.Name {
		t.Errorf("the front's span came from %s, want %s", fr.Instance, via.Name)
	}
	var cls []otlptest.Span
	for _, e := range pick(spans, peer, tracepb.Span_SPAN_KIND_CLIENT) {
		if e.Instance == via.Name {
			cls = append(cls, e)
		}
	}
	if len(cls) != 1 {
		t.Fatalf("%d client spans %q on %s, want 1 (all: %v)", len(cls), peer, via.Name, spanList(spans))
	}
	cl := cls[0]
	var sv otlptest.Span
	for _, e := range pick(spans, peer, tracepb.Span_SPAN_KIND_SERVER) {
		if string(e.Span.GetParentSpanId()) == string(cl.Span.GetSpanId()) {
			sv = e
		}
	}
	if sv.Span == nil || sv.Instance == via.Name {
		t.Fatalf("no server span under %s's client span on another pod (all: %v)", via.Name, spanList(spans))
	}
	var or otlptest.Span
	for _, e := range pick(spans, fetched, tracepb.Span_SPAN_KIND_CLIENT) {
		if e.Instance == sv.Instance {
			or = e
		}
	}
	if or.Span == nil {
		t.Errorf("no origin call from the owner %s (all: %v)", sv.Instance, spanList(spans))
	}
	record(result{Scenario: "server (dns): one GET traced through the pods", Took: time.Since(start),
		Note: fmt.Sprintf("trace %s: %d spans, %s on %s, %s and its origin call on %s", tid, len(spans), front, via.Name, peer, sv.Instance)})
}

// pick returns the spans called name of kind.
func pick(spans []otlptest.Span, name string, kind tracepb.Span_SpanKind) []otlptest.Span {
	var out []otlptest.Span
	for _, e := range spans {
		if e.Span.GetName() == name && e.Span.GetKind() == kind {
			out = append(out, e)
		}
	}
	return out
}

// spanList lists spans as instance:name(kind), for a failure's message.
func spanList(spans []otlptest.Span) []string {
	var all []string
	for _, e := range spans {
		all = append(all, fmt.Sprintf("%s:%s(%v)", e.Instance, e.Span.GetName(), e.Span.GetKind()))
	}
	return all
}

// one returns the one span called name of kind, failing t otherwise.
func one(t *testing.T, spans []otlptest.Span, name string, kind tracepb.Span_SpanKind) otlptest.Span {
	t.Helper()
	found := pick(spans, name, kind)
	if len(found) != 1 {
		t.Fatalf("%d %v spans %q, want 1 (all: %v)", len(found), kind, name, spanList(spans))
	}
	return found[0]
}
