package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traces (Config.TracerProvider): every request of the data API (/v1/…) is a server span
// named for its route ("GET /v1/groups/{group}/keys/{key}"), which continues the caller's
// trace when the request carries its trace context (a W3C traceparent header and tracestate,
// or what Config.Propagator reads), and starts one otherwise; corral's spans of the request (corral.Get, …) are its children. /metrics,
// /healthz, /readyz and /debug/corral are not traced: probes and scrapes would fill the
// traces with nothing. The span records the method, the route, the status, the scheme and
// corral.source (X-Corral-Source), never the path, which holds the key.

// serverKind is made once: made at each start, it costs an allocation.
var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// traced serves next under a server span per data request, when the API traces.
func (a *API) traced(next http.Handler) http.Handler {
	if a.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, ok := dataRoute(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		ctx := a.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := a.tracer.Start(ctx, r.Method+" "+route, serverKind)
		if !span.IsRecording() {
			next.ServeHTTP(w, r.WithContext(ctx))
			span.End()
			return
		}
		span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
			attribute.String("url.scheme", "http"), attribute.String("network.protocol.version", strconv.Itoa(r.ProtoMajor)+"."+strconv.Itoa(r.ProtoMinor)))
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if src := w.Header().Get("X-Corral-Source"); src != "" {
			span.SetAttributes(attribute.String("corral.source", src))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
		span.End()
	})
}

// dataRoute returns the route of a data request's path, and false for one that is not traced.
func dataRoute(path string) (string, bool) {
	if rest, ok := strings.CutPrefix(path, "/v1/groups/"); ok {
		// {group}/keys, {group}/keys:batch or {group}/keys/{key}: a key's "/" is escaped.
		switch _, tail, _ := strings.Cut(rest, "/"); tail {
		case "keys":
			return "/v1/groups/{group}/keys", true
		case "keys:batch":
			return "/v1/groups/{group}/keys:batch", true
		}
		return "/v1/groups/{group}/keys/{key}", true
	}
	switch {
	case strings.HasPrefix(path, "/v1/tags/"):
		return "/v1/tags/{tag}", true
	case path == "/v1/cluster":
		return path, true
	}
	return "", false
}

// statusWriter is a ResponseWriter that remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the connection's writer (read deadlines, flushes).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
