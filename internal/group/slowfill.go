package group

import (
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
)

// SlowFillWindow is how long a slowest traced fill is remembered before a faster one may
// take its place (SlowestFill).
const SlowFillWindow = time.Minute

// TracedFill is one loader run of a key that was traced: its key, how long it took, the
// trace it is in, and when it ended.
type TracedFill struct {
	Key      string
	Duration time.Duration
	TraceID  string
	At       time.Time
}

// slowFill keeps the slowest traced fill of a group within SlowFillWindow.
type slowFill struct {
	mu   sync.Mutex // guards last
	last TracedFill // zero: none
}

// observe records a fill of key that took d, in span's trace when the span was kept.
func (s *slowFill) observe(key string, d time.Duration, span trace.SpanContext, now time.Time) {
	if !span.IsSampled() {
		return // a trace nobody keeps: nothing to link to
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.Key == "" || d >= s.last.Duration || now.Sub(s.last.At) > SlowFillWindow {
		s.last = TracedFill{Key: key, Duration: d, TraceID: span.TraceID().String(), At: now}
	}
}

// get returns the slowest traced fill within SlowFillWindow of now.
func (s *slowFill) get(now time.Time) (TracedFill, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.Key == "" || now.Sub(s.last.At) > SlowFillWindow {
		return TracedFill{}, false
	}
	return s.last, true
}

// SlowestFill returns the slowest loader run on this node, of the last SlowFillWindow, whose
// trace was kept (sampled), with its trace's ID: for a debug page's link to the trace. false
// without tracing, or when no such run ended within the window.
func (g *Group[V]) SlowestFill() (TracedFill, bool) { return g.slow.get(time.Now()) }

// loadTracing is how the local store's fills are traced: spans called corral.fill, each
// loader run reported with its span (an exemplar of corral_fill_duration_seconds, and
// SlowestFill's candidate). nil when the node does not trace.
func (g *Group[V]) loadTracing() *fill.Tracing {
	t := g.env.fillTracing(g.name, "corral.fill")
	if t == nil {
		return nil
	}
	t.OnFill = func(key string, d time.Duration, err error, span trace.SpanContext) {
		g.env.OnFill(g.name, d, span)
		g.slow.observe(key, d, span, time.Now()) // a slow failure too: a timeout is what one looks for
	}
	return t
}
