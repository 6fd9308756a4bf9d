package fill

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing makes each fill of a cache a span (OpenTelemetry): a child of the span of the Get
// that started it, with a link to the span of every Get that joined it while it ran
// (coalesced onto it), whichever goroutine, or through a peer's request whichever node,
// that Get came from. The loader runs under the span, so the spans it starts (an HTTP call
// to the origin) are its children. A Get whose ctx carries no span adds no link. A
// background refresh is a span of its own trace when the read that started it carried none.
// A batch loader's run is one span for all its keys (corral.keys says how many), a child of
// the span of the Get that began the batch, with a link to every other Get whose miss went
// into it or that joined one of its keys. A fill whose Get's span records nothing (sampled
// out) is no span: the trace context goes on to the loader as that span's.
type Tracing struct {
	Tracer trace.Tracer // required
	// Name is the spans' name; "" = "fill".
	Name string
	// Attributes, if set, returns the attributes of the span of key's fill.
	Attributes func(key string) []attribute.KeyValue
	// BatchAttributes, if set, returns the attributes of the span of a batch loader's run
	// beside corral.keys.
	BatchAttributes []attribute.KeyValue
	// OnFill, if set, is called instead of Config.OnFill after every loader run of a key
	// (not a batch's): the same call, with the key and the span context of the fill's span
	// (invalid when it has none: sampled out), for an exemplar or a link to the trace.
	OnFill func(key string, d time.Duration, err error, span trace.SpanContext)
}

// startSpan starts the span of cl's fill of key under parent, when c traces: it returns the
// context the loader runs under (parent, with the span).
func (c *Cache[V]) startSpan(parent context.Context, key string, cl *call[V]) context.Context {
	t := c.rc.Tracing
	if t == nil || !trace.SpanFromContext(parent).IsRecording() {
		return parent // a span under one sampled out would record nothing
	}
	name := t.Name
	if name == "" {
		name = "fill"
	}
	ctx, span := t.Tracer.Start(parent, name) // of no kind: internal
	// Attributes only for a span that records: most are sampled out.
	if span.IsRecording() {
		if t.Attributes != nil {
			span.SetAttributes(t.Attributes(key)...)
		}
		if cl.stale != nil {
			span.SetAttributes(attribute.Bool("corral.refresh", true))
		}
	}
	cl.span = span
	return ctx
}

// startBatchSpan starts the span of b's run under parent, when c traces and parent's span
// records: it returns the context the batch loader runs under and the span (nil: none).
func (c *Cache[V]) startBatchSpan(parent context.Context, b *batch[V]) (context.Context, trace.Span) {
	t := c.rc.Tracing
	if t == nil || !trace.SpanFromContext(parent).IsRecording() {
		return parent, nil
	}
	name := t.Name
	if name == "" {
		name = "fill"
	}
	ctx, span := t.Tracer.Start(parent, name)
	if span.IsRecording() {
		span.SetAttributes(t.BatchAttributes...)
		span.SetAttributes(attribute.Int("corral.keys", len(b.keys)))
		if b.refresh {
			span.SetAttributes(attribute.Bool("corral.refresh", true))
		}
	}
	return ctx, span
}

// linkLocked records that a miss under ctx went into b: a link to its span, unless it is
// b's own caller's or linked already (a GetMany puts all its keys in under one span).
// c.mu must be held.
func (b *batch[V]) linkLocked(ctx context.Context) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() || sc.Equal(trace.SpanContextFromContext(b.ctx)) {
		return
	}
	b.links = appendLinks(b.links, []trace.Link{{SpanContext: sc}})
}

// appendLinks appends to links those of more it does not hold yet.
func appendLinks(links, more []trace.Link) []trace.Link {
	for _, l := range more {
		if !slices.ContainsFunc(links, func(h trace.Link) bool { return h.SpanContext.Equal(l.SpanContext) }) {
			links = append(links, l)
		}
	}
	return links
}

// onFill reports a loader run of key for cl, which took d and returned err, to
// Tracing.OnFill or Config.OnFill.
func (c *Cache[V]) onFill(key string, cl *call[V], d time.Duration, err error) {
	if t := c.rc.Tracing; t != nil && t.OnFill != nil {
		var sc trace.SpanContext
		if cl.span != nil {
			sc = cl.span.SpanContext()
		}
		t.OnFill(key, d, err, sc)
		return
	}
	if c.cfg.OnFill != nil {
		c.cfg.OnFill(d, err)
	}
}

// joined records, under c.mu, that the Get under ctx joined cl: a link from cl's span to
// the Get's.
func (c *Cache[V]) joinedLocked(ctx context.Context, cl *call[V]) {
	if c.rc.Tracing == nil {
		return
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() { // a link to a span sampled out leads nowhere
		cl.links = append(cl.links, trace.Link{SpanContext: sc})
	}
}

// endSpan ends the span of cl's fill (if any) with its links and the loader's error.
// links is cl.links, taken under c.mu once no Get joins cl any more.
func endSpan(span trace.Span, links []trace.Link, err error) {
	if span == nil {
		return
	}
	for _, l := range links {
		span.AddLink(l)
	}
	if err != nil && err != ErrNotFound {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
