package transport

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralcache/corral/transport/peerpb"
)

// Tracing (OpenTelemetry). With ClientConfig.TracerProvider, every call made under a ctx that
// carries a span — a request's trace — is a client span named for its method
// ("corral.peer.v1.Peer/Get"), and its W3C trace context travels with it: in the GetRequest's
// trace fields on a stream (a framed stream has no headers; the traceparent in binary, which
// costs a Get no formatting, parsing or allocation), in the call's gRPC metadata (traceparent,
// tracestate) otherwise. With ServerConfig.TracerProvider, a request that carries a
// trace context is served under a server span, a child of the caller's client span: one trace
// on both members. The transport never starts a trace of its own: a call under a ctx without
// a span (a probe, a hand-off, a background refresh's request) sends none, and a request
// that carries none is served without a span. Without a TracerProvider nothing of this runs.

// tracerName is the instrumentation scope of the transport's spans.
const tracerName = "github.com/corralcache/corral/transport"

// peerService is the fully qualified name of the peer service, the prefix of its spans' names.
const peerServiceName = "corral.peer.v1.Peer"

// propagator reads and writes W3C trace context (traceparent, tracestate).
var propagator propagation.TraceContext

// Attributes of the peer calls' spans, after OpenTelemetry's RPC conventions.
var (
	attrRPCSystem  = attribute.String("rpc.system", "grpc")
	attrRPCService = attribute.String("rpc.service", peerServiceName)
)

// Span start options made once: made at each start, each costs an allocation.
var (
	clientKind = trace.WithSpanKind(trace.SpanKindClient)
	serverKind = trace.WithSpanKind(trace.SpanKindServer)
)

// spanNames holds the span name of each method ("corral.peer.v1.Peer/Get"), made once.
var spanNames = func() map[string]string {
	m := map[string]string{}
	for _, method := range []string{"Get", "GetStream", "Set", "Remove", "Invalidate", "Handoff", "WaitsFor",
		"Reconcile", "Lease", "FillSet", "Backup"} {
		m[method] = peerServiceName + "/" + method
	}
	return m
}()

// spanName is the name of the span of a call of method.
func spanName(method string) string {
	if n, ok := spanNames[method]; ok {
		return n
	}
	return peerServiceName + "/" + method
}

// newTracer returns the transport's tracer from tp, nil for none.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// startClient starts the client span of a call of method to addr, when c traces and ctx
// carries a span that records; else it returns ctx and nil. Under a span sampled out, no
// span is started — it would record nothing — but the caller still sends ctx's trace
// context, so that the peer and the origin behind it keep the decision. The caller ends the
// span (endSpan).
func (c *Client) startClient(ctx context.Context, method, addr string) (context.Context, trace.Span) {
	if c.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	// Attributes only for a span that records: most are sampled out, and cost nothing more.
	ctx, span := c.tracer.Start(ctx, spanName(method), clientKind)
	if span.IsRecording() {
		span.SetAttributes(peerAttrs(method)...)
		span.SetAttributes(serverAddr(addr)...)
	}
	return ctx, span
}

// peerAttrs are the attributes of a span of a peer call of method.
func peerAttrs(method string) []attribute.KeyValue {
	return []attribute.KeyValue{attrRPCSystem, attrRPCService, attribute.String("rpc.method", method)}
}

// serverAddr are the server.address and server.port attributes of a call to addr.
func serverAddr(addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []attribute.KeyValue{attribute.String("server.address", addr)}
	}
	p, _ := strconv.Atoi(port)
	return []attribute.KeyValue{attribute.String("server.address", host), attribute.Int("server.port", p)}
}

// endSpan ends span (nil: none) with err's status, if any.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		if s, ok := status.FromError(err); ok {
			span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(s.Code())))
		}
	}
	span.End()
}

// setRequestTrace writes the trace context of ctx's span, if any, in req's fields.
func setRequestTrace(ctx context.Context, req *peerpb.GetRequest) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	req.TraceIdHigh = binary.BigEndian.Uint64(tid[:8])
	req.TraceIdLow = binary.BigEndian.Uint64(tid[8:])
	req.ParentSpanId = binary.BigEndian.Uint64(sid[:])
	req.TraceFlags = uint32(sc.TraceFlags())
	if ts := sc.TraceState(); ts.Len() > 0 {
		req.Tracestate = ts.String()
	}
}

// requestTrace returns the trace context req carries, invalid for none.
func requestTrace(req *peerpb.GetRequest) trace.SpanContext {
	if req.GetTraceIdHigh() == 0 && req.GetTraceIdLow() == 0 {
		return trace.SpanContext{}
	}
	var tid trace.TraceID
	var sid trace.SpanID
	binary.BigEndian.PutUint64(tid[:8], req.GetTraceIdHigh())
	binary.BigEndian.PutUint64(tid[8:], req.GetTraceIdLow())
	binary.BigEndian.PutUint64(sid[:], req.GetParentSpanId())
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(req.GetTraceFlags()), Remote: true}
	if s := req.GetTracestate(); s != "" {
		cfg.TraceState, _ = trace.ParseTraceState(s) // a malformed one is dropped, as the HTTP header's would be
	}
	return trace.NewSpanContext(cfg)
}

// metadataCarrier carries trace context in gRPC metadata.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// withMetadata returns ctx with the trace context of spanCtx's span in its outgoing metadata.
func withMetadata(ctx, spanCtx context.Context) context.Context {
	md := metadata.MD{}
	propagator.Inject(spanCtx, metadataCarrier(md))
	if len(md) == 0 {
		return ctx
	}
	if out, ok := metadata.FromOutgoingContext(ctx); ok {
		md = metadata.Join(out, md)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// startServer starts the server span of a request of method whose trace context carrier
// holds, when p traces and the request carries one that was sampled; else it returns ctx
// and nil — ctx with the caller's trace context when it was sampled out, so that the
// decision goes on to the origin.
func (p *peerService) startServer(ctx context.Context, method string, carrier propagation.TextMapCarrier) (context.Context, trace.Span) {
	if p.tracer == nil {
		return ctx, nil
	}
	return p.startServerFor(propagator.Extract(ctx, carrier), method)
}

// startServerFor is startServer of a request whose caller's trace context ctx carries.
func (p *peerService) startServerFor(ctx context.Context, method string) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ctx, nil
	}
	ctx, span := p.tracer.Start(ctx, spanName(method), serverKind)
	if span.IsRecording() {
		span.SetAttributes(peerAttrs(method)...)
	}
	return ctx, span
}

// startGet starts the server span of a Get, when p traces and req carries a trace context
// that was sampled; else it returns ctx with req's trace context (if any) and nil.
func (p *peerService) startGet(ctx context.Context, req *peerpb.GetRequest) (context.Context, trace.Span) {
	if p.tracer == nil {
		return ctx, nil
	}
	sc := requestTrace(req)
	if !sc.IsValid() {
		return ctx, nil
	}
	ctx, span := p.startServerFor(trace.ContextWithRemoteSpanContext(ctx, sc), "Get")
	if span != nil && span.IsRecording() {
		span.SetAttributes(attribute.String("corral.group", req.GetGroup()))
	}
	return ctx, span
}

// answered records on span (nil: none) what a Get was answered with.
func answered(span trace.Span, resp *peerpb.GetResponse) {
	if span == nil || resp == nil || !span.IsRecording() {
		return
	}
	if s := sourceName(resp.GetSource()); s != "" {
		span.SetAttributes(attribute.String("corral.source", s))
	}
}

// sourceName is the corral.source of a Get the owner answered from src ("" when it says
// none).
func sourceName(src peerpb.Source) string {
	switch src {
	case peerpb.Source_HIT:
		return "hit"
	case peerpb.Source_FILL:
		return "fill"
	case peerpb.Source_COALESCED:
		return "coalesced"
	case peerpb.Source_STALE:
		return "stale"
	}
	return ""
}

// unaryInterceptor serves a unary call under a server span when it carries a trace
// context: in its metadata, or for a Get in the request's fields.
func (p *peerService) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := methodName(info.FullMethod)
	var span trace.Span
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("traceparent")) > 0 {
		ctx, span = p.startServer(ctx, method, metadataCarrier(md))
	} else if g, ok := req.(*peerpb.GetRequest); ok {
		ctx, span = p.startGet(ctx, g)
	}
	if span == nil {
		return handler(ctx, req)
	}
	resp, err := handler(ctx, req)
	if g, ok := resp.(*peerpb.GetResponse); ok {
		answered(span, g)
	}
	endSpan(span, err)
	return resp, err
}

// streamInterceptor serves a client stream (Handoff) under a server span when its metadata
// carries a trace context. GetStream's calls each have a span of their own (startGet).
func (p *peerService) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	md, ok := metadata.FromIncomingContext(ss.Context())
	if !ok || info.IsServerStream || len(md.Get("traceparent")) == 0 {
		return handler(srv, ss)
	}
	ctx, span := p.startServer(ss.Context(), methodName(info.FullMethod), metadataCarrier(md))
	if span == nil {
		return handler(srv, ss)
	}
	err := handler(srv, tracedStream{ServerStream: ss, ctx: ctx})
	endSpan(span, err)
	return err
}

// tracedStream is a server stream whose context carries its span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tracedStream) Context() context.Context { return s.ctx }

// methodName is the method of a full gRPC method name ("/corral.peer.v1.Peer/Get" → "Get").
func methodName(full string) string {
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '/' {
			return full[i+1:]
		}
	}
	return full
}
