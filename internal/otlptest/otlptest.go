// Package otlptest is an OTLP/gRPC trace receiver for tests: what corral serve exports lands
// in it, each span with the service.name and service.instance.id of the resource that sent
// it, so a test can follow one trace across the members that exported its spans.
package otlptest

import (
	"context"
	"net"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one span received, with the resource that sent it.
type Span struct {
	Instance string // service.instance.id: the member's name
	Service  string // service.name
	Span     *tracepb.Span
}

// Receiver is an OTLP/gRPC trace service that keeps every span it is sent.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	// Addr is where it listens, host:port.
	Addr string

	mu    sync.Mutex // guards spans
	spans []Span
}

// Start starts a Receiver listening on host (an IP; port chosen by the system), stopped when
// tb ends.
func Start(tb testing.TB, host string) *Receiver {
	tb.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	r := &Receiver{Addr: lis.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go srv.Serve(lis)
	tb.Cleanup(srv.Stop)
	return r
}

// Export keeps the spans of req.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		var instance, service string
		for _, kv := range rs.GetResource().GetAttributes() {
			switch kv.GetKey() {
			case "service.instance.id":
				instance = kv.GetValue().GetStringValue()
			case "service.name":
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Instance: instance, Service: service, Span: s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Of returns the spans of trace tid received so far.
func (r *Receiver) Of(tid []byte) []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, e := range r.spans {
		if string(e.Span.GetTraceId()) == string(tid) {
			out = append(out, e)
		}
	}
	return out
}
