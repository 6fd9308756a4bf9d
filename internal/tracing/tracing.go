package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of corral's spans.
const ScopeName = "github.com/corralcache/corral"

// Keys says what a span records of a key (corral.Config.TraceKeys).
type Keys int

const (
	KeysOff  Keys = iota // nothing: a key may be personal data
	KeysHash             // corral.key.hash: the first 8 bytes of the key's SHA-256, in hex
	KeysRaw              // corral.key: the key itself (valid UTF-8 or not, as a string)
)

// Check returns an error for a Keys that is none of the above.
func (k Keys) Check() error {
	if k < KeysOff || k > KeysRaw {
		return fmt.Errorf("corral: TraceKeys %d: want TraceKeysOff, TraceKeysHash or TraceKeysRaw", int(k))
	}
	return nil
}

// Attribute keys of corral's spans.
const (
	AttrGroup       = attribute.Key("corral.group")
	AttrSource      = attribute.Key("corral.source")
	AttrOwner       = attribute.Key("corral.owner")
	AttrActingOwner = attribute.Key("corral.acting_owner")
	AttrKey         = attribute.Key("corral.key")
	AttrKeyHash     = attribute.Key("corral.key.hash")
	AttrKeys        = attribute.Key("corral.keys") // how many keys a GetMany asked for
	AttrTag         = attribute.Key("corral.tag")
	AttrMember      = attribute.Key("corral.member") // the member an event is about
)

// Tracer starts corral's spans. A nil *Tracer is tracing off: callers check for nil.
type Tracer struct {
	t    trace.Tracer
	tp   trace.TracerProvider
	keys Keys
}

// New returns the Tracer of tp, recording keys as keys says; nil when tp is nil.
func New(tp trace.TracerProvider, keys Keys, version string) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{t: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version)), tp: tp, keys: keys}
}

// Provider returns the TracerProvider t was made with (nil for a nil t).
func (t *Tracer) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// Tracer returns the OpenTelemetry tracer behind t.
func (t *Tracer) Tracer() trace.Tracer { return t.t }

// KeyAttrs returns what a span records of key: nothing, its hash or itself.
func (t *Tracer) KeyAttrs(key string) []attribute.KeyValue {
	switch t.keys {
	case KeysHash:
		return []attribute.KeyValue{AttrKeyHash.String(KeyHash(key))}
	case KeysRaw:
		return []attribute.KeyValue{AttrKey.String(key)}
	}
	return nil
}

// KeyHash is the corral.key.hash of key: the first 8 bytes of its SHA-256, in hex, which
// an operator computes for a key she knows with `printf %s KEY | sha256sum | cut -c1-16`.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// Start starts the span of a call named name on key (none: "") of group. Its attributes are
// set once it has started, and only when it records: a span sampled out costs no more than
// its start. (So a sampler does not see them.)
//
// Under a span that was sampled out and does not record — a request whose trace is not
// kept — Start starts none: it returns ctx and a span that does nothing, and the trace
// context of ctx goes on to the owner and the loader as it is. With the SDK's samplers that
// follow a parent's decision (ParentBased, its default), such a child would record nothing
// either; what it would cost is the SDK's span and context, two allocations and about a
// third of a microsecond on every Get (BenchmarkRemoteHitTraced). A sampler that could keep
// a child of a parent it dropped would keep a fragment of a trace whose root is lost.
func (t *Tracer) Start(ctx context.Context, name, group, key string, more ...attribute.KeyValue) (context.Context, trace.Span) {
	if SampledOut(ctx) {
		return ctx, nothing
	}
	// No option: a span of no kind is an internal one, and options passed through the
	// interface cost an allocation a span.
	ctx, span := t.t.Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(AttrGroup.String(group))
		if key != "" {
			span.SetAttributes(t.KeyAttrs(key)...)
		}
		span.SetAttributes(more...)
	}
	return ctx, span
}

// FillAttrs returns the attributes of the span of key's fill in group.
func (t *Tracer) FillAttrs(group string) func(key string) []attribute.KeyValue {
	return func(key string) []attribute.KeyValue {
		return append([]attribute.KeyValue{AttrGroup.String(group)}, t.KeyAttrs(key)...)
	}
}

// End ends span with err's status: an error, unless err is nil or one of ok (a not-found
// is an answer, not a failure).
func End(span trace.Span, err error, ok ...error) {
	if err != nil {
		failed := true
		for _, o := range ok {
			if errors.Is(err, o) {
				failed = false
			}
		}
		if failed {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// nothing is the span Start returns under a trace that is not kept: made once, as a
// span returned by value would cost an allocation.
var nothing trace.Span = noop.Span{}

// SampledOut reports whether ctx carries a span that was sampled out and does not record:
// a trace that is not kept, under which corral starts no span of its own.
func SampledOut(ctx context.Context) bool {
	span := trace.SpanFromContext(ctx)
	sc := span.SpanContext()
	return sc.IsValid() && !sc.IsSampled() && !span.IsRecording()
}

// Event adds the event name, with attrs, to the span of ctx, if it records.
func Event(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}
