package corral

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corralcache/corral/internal/group"
	"github.com/corralcache/corral/internal/tracing"
)

// TraceKeys says what a span records of a key (Config.TraceKeys).
type TraceKeys int

const (
	// TraceKeysOff records nothing of a key: it may be personal data. The default.
	TraceKeysOff TraceKeys = TraceKeys(tracing.KeysOff)
	// TraceKeysHash records corral.key.hash: the first 8 bytes of the key's SHA-256 in hex,
	// which `printf %s KEY | sha256sum | cut -c1-16` gives for a key one knows.
	TraceKeysHash TraceKeys = TraceKeys(tracing.KeysHash)
	// TraceKeysRaw records the key itself as corral.key.
	TraceKeysRaw TraceKeys = TraceKeys(tracing.KeysRaw)
)

// getTraced is Get, GetWithSource and GetWithInfo on a node that traces: the Get is the span
// called name, which says how the value was found (corral.source), which member the key's
// owner is (corral.owner) and whether this node served it from its own store as the key's
// owner (corral.acting_owner).
func (g *Group[V]) getTraced(ctx context.Context, name, key string) (V, group.Info, error) {
	ctx, span := g.tr.Start(ctx, name, g.g.Name(), key)
	v, info, err := g.g.GetWithInfo(ctx, key)
	if span.IsRecording() {
		attrs := []attribute.KeyValue{tracing.AttrOwner.String(g.g.Owner(key)), tracing.AttrActingOwner.Bool(err == nil && !info.Remote)}
		if err == nil {
			attrs = append(attrs, tracing.AttrSource.String(string(sourceOf(info))))
		}
		span.SetAttributes(attrs...)
	}
	tracing.End(span, err, ErrNotFound)
	return v, info, err
}

// TracedFill is a loader run whose trace was kept (Group.SlowestFill).
type TracedFill struct {
	Key      string        // the key it filled
	Duration time.Duration // how long the loader ran
	TraceID  string        // its trace, 32 hex digits
	At       time.Time     // when it ended
}

// SlowestFill returns the slowest loader run of the group on this node within the last
// minute whose trace was sampled, for a link to the trace (the debug page of corral serve
// has one). false when the node does not trace, or no such run ended within the minute. A
// run that failed counts: a fill that timed out is what one looks for.
func (g *Group[V]) SlowestFill() (TracedFill, bool) {
	f, ok := g.g.SlowestFill()
	return TracedFill(f), ok
}
