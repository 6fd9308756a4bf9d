package origin

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startSpan starts the client span of a fetch, named for the template ("GET /items/{key}"):
// the template, not the URL, so that the key is not recorded (it may be personal data; the
// fill's span says what the node records of it).
func (o *Origin) startSpan(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := o.tracer.Start(ctx, o.spanName, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		attrs := []attribute.KeyValue{attribute.String("http.request.method", "GET"), attribute.String("url.template", o.template)}
		if u, err := url.Parse(strings.NewReplacer("{group}", "g", "{key}", "k").Replace(o.template[:o.queryFrom])); err == nil {
			host, port, err := net.SplitHostPort(u.Host)
			if err != nil {
				host, port = u.Host, map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			p, _ := strconv.Atoi(port)
			attrs = append(attrs, attribute.String("server.address", host), attribute.Int("server.port", p))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// endSpan ends span (nil: none) with the origin's status (0: no answer) or err.
func endSpan(span trace.Span, status int, err error) {
	if span == nil {
		return
	}
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case status >= 400 && status != 404: // a 404 is an answer: the key is not found
		span.SetStatus(codes.Error, strconv.Itoa(status))
	}
	span.End()
}
