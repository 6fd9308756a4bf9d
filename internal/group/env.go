package group

import (
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/handoff"
	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/owner"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/tracing"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
	"github.com/corralcache/corral/transport"
)

// Env is what a group needs of the node it runs on: the node's parts, settings and hooks,
// handed to New. A node builds one and gives it to each group it makes; a group never reaches
// back into the node. Every field is required unless its comment says otherwise; the parts
// are shared by every group of the node and live as long as it does.
type Env struct {
	Self  string                     // this node's name
	View  *atomic.Pointer[view.View] // this node's current view, replaced as membership changes
	State *owner.State               // this node's lifecycle

	Router   *route.Router     // owners of keys, fail-over, breakers
	Client   *transport.Client // the peer client
	Writer   *write.Writer     // writes made here, and telling the members of them
	Mover    *handoff.Mover    // warm pulls: copies the previous owners of a key still hold
	Versions *version.Clock    // orders writes across the cluster
	Waits    *fill.WaitGraph   // fills waiting on fills, here and through peers
	Tags     *fill.Tags        // the tags of every group's values, and their purges
	Limits   *limit.Checker    // the limits on keys and values, counted

	Refreshes *fill.Limiter // background refreshes at once, over every group
	Fills     *fill.Limiter // loader runs at once, over every group; nil = unbounded
	Clock     fill.Clock
	Rand      func() float64 // for jitter and refresh-ahead; nil = fill's default
	Log       *slog.Logger
	// Tracer makes the group's fills and owner requests spans (package tracing); nil = no
	// spans.
	Tracer *tracing.Tracer

	// PeerTimeout bounds one peer call; a Get through the owner is bounded by the group's
	// fill timeout plus it.
	PeerTimeout time.Duration
	// PeekWindow and PeekTimeout are how long after a membership change a new owner asks
	// the previous owners of a key, and how long each question may take.
	PeekWindow, PeekTimeout time.Duration
	// AskedAt returns when another member first asked this node anything (zero if none
	// has): see view.View.PeekCandidates.
	AskedAt func() time.Time
	// NearBytes bounds the near cache (negative: none), NearTTL caps a near copy's life,
	// and NearPromote is how many requests for a remote key within a second earn it one.
	NearBytes   int64
	NearTTL     time.Duration
	NearPromote int

	// OnFill records a loader run (corral_fill_duration_seconds), with the span context of
	// its span (invalid when none: an exemplar needs a trace that was kept); Received and Sent count
	// entries taken by a warm pull and given to one (corral_handoff_keys_total).
	OnFill   func(group string, d time.Duration, span trace.SpanContext)
	Received func()
	Sent     func(n int)
}

// leaseConfig returns the configuration of the lease table of the group called name.
func (e *Env) leaseConfig(name string) lease.Config {
	return lease.Config{Group: name, View: e.View, Clock: e.Versions,
		PeekWindow: e.PeekWindow, PeekTimeout: e.PeekTimeout, AskedAt: e.AskedAt}
}

// ownerAddr returns the peer address of key's owner, or "" when this node owns it: where the
// fill of a key that the near cache waits on runs.
func (e *Env) ownerAddr(key string) string {
	v := e.View.Load()
	if st, ok := v.Members[v.Owner(key)]; ok && st.Name != v.Self {
		return st.PeerAddr
	}
	return ""
}

// ownerName returns the name of the member this node's view routes key to.
func (e *Env) ownerName(key string) string { return e.View.Load().Owner(key) }

// fillTracing returns how the fills of a store of the group called name are traced: spans
// called spanName; nil when the node does not trace.
func (e *Env) fillTracing(name, spanName string) *fill.Tracing {
	if e.Tracer == nil {
		return nil
	}
	return &fill.Tracing{Tracer: e.Tracer.Tracer(), Name: spanName, Attributes: e.Tracer.FillAttrs(name),
		BatchAttributes: []attribute.KeyValue{tracing.AttrGroup.String(name)}}
}
