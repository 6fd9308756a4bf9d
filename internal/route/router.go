package route

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corralcache/corral/internal/tracing"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Config is what a Router routes by. Every field is required; the pointers are the node's,
// read as the node changes them.
type Config struct {
	View          *atomic.Pointer[view.View] // this node's current view
	Client        *transport.Client
	Clock         *version.Clock // this node's write clock, sent in every header
	Log           *slog.Logger
	LocalFallback bool         // run a request locally instead of failing over along the ring
	PeerAddr      string       // this node's peer address, sent in every header
	Started       time.Time    // when this life of the node began, sent in every header
	Leaving       *atomic.Bool // set when this node begins to leave, sent in every header
}

// Router routes requests to keys' owners (see the package documentation). Its methods are
// safe for concurrent use.
type Router struct {
	cfg      Config
	breakers Breakers

	// ctx ends the breakers' probes at Close. probeWG counts their goroutine (probeOpen);
	// done, under mu, is set by Close before it waits for it, and no probing starts after;
	// probing is set while probeOpen runs.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	// guards done and probing
	done    bool
	probing bool
	probeWG sync.WaitGroup
}

// New returns a Router over cfg.
func New(cfg Config) *Router {
	r := &Router{cfg: cfg}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.breakers.opened = r.startProbes
	return r
}

// Breakers returns the breakers of this node's peers.
func (r *Router) Breakers() *Breakers { return &r.breakers }

// Close stops the breakers' probes and waits for them. No probe starts after.
func (r *Router) Close() {
	r.cancel()
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.probeWG.Wait()
}

var errNoMembers = errors.New("corral: no member to route to")

// OnOwner runs an operation on key's owner: local when this node owns it, remote otherwise.
// When the owner cannot be reached (refused, reset, deadline, or it left the view while the
// call was in flight), or answers that it is leaving or does not serve the group yet (it
// has joined before its application registered the group), the operation moves to the
// owner of the ring without that member — the successor every replica computes alike and agrees on
// once the failure or the leave is seen — so a crash costs one refill, not one per replica.
// With Config.LocalFallback it runs locally instead. It returns the name of the member that
// ran the operation.
//
// A Get on the owner's stream (streamed) runs as it is (see callPeer).
func (r *Router) OnOwner(ctx context.Context, key string, streamed bool, local func() error,
	remote func(context.Context, *view.MemberState) error) (string, error) {
	v := r.cfg.View.Load()
	ring := v.Ring
	fallback := r.cfg.LocalFallback
	if v.Stopped {
		// This node serves nothing itself any more: the key's owner among the others.
		ring, fallback = ring.Without(v.Self), false
	}
	for {
		owner := ring.Owner(key)
		if owner == "" && v.Stopped {
			return "", view.ErrClosed // it serves nothing itself and no other member is left to ask
		}
		if owner == "" {
			return "", errNoMembers
		}
		if owner == v.Self {
			return owner, local()
		}
		st, ok := v.Members[owner]
		if !ok {
			ring = ring.Without(owner)
			continue
		}
		if r.breakers.Skip(st.PeerAddr, time.Now()) {
			// Found unreachable, and silent since (breaker.go): do not wait on it again.
			r.cfg.Log.Debug("corral: owner unreachable a moment ago, asking its successor", "owner", owner, "key", key)
			tracing.Event(ctx, "corral.breaker_open", tracing.AttrMember.String(owner))
			if fallback {
				tracing.Event(ctx, "corral.local_fallback")
				return v.Self, local()
			}
			ring = ring.Without(owner)
			continue
		}
		err := r.callPeer(ctx, st, streamed, remote)
		if err == nil || !r.failover(ctx, st, err) {
			if ctx.Err() == nil {
				r.breakers.Reset(st.PeerAddr) // it answered
			}
			return owner, err
		}
		tracing.Event(ctx, "corral.failover", tracing.AttrMember.String(owner), attribute.String("error", err.Error()))
		if errors.Is(err, transport.ErrLeaving) || errors.Is(err, transport.ErrUnknownGroup) || errors.Is(err, transport.ErrNotMember) {
			r.cfg.Log.Debug("corral: owner does not serve the key, asking its successor", "owner", owner, "key", key, "err", err)
		} else {
			r.cfg.Log.Warn("corral: owner unreachable, failing over", "owner", owner, "key", key, "err", err)
			if r.peerDown(ctx, st) {
				tracing.Event(ctx, "corral.breaker_trip", tracing.AttrMember.String(owner))
			}
		}
		if fallback {
			tracing.Event(ctx, "corral.local_fallback")
			return v.Self, local()
		}
		ring = ring.Without(owner)
	}
}

// callPeer runs call to st. A Get on the owner's stream (streamed) runs as it is: the
// transport watches the stream for silence (ClientConfig.SilentPeerTimeout), Forget ends it
// when the member leaves the view, and GetFrom refuses a member that has left — none of
// which costs a Get a context or a timer. Any other call runs under a context that also
// ends when the member leaves the view, so that a request to a member found dead fails over
// at once rather than at its deadline, and is given up once the member has gone silent
// (UntilSilent). A silent owner costs a Get at most the transport's silence bound
// (SilentPeerTimeout, stretched while this node runs late), any other call twice it.
func (r *Router) callPeer(ctx context.Context, st *view.MemberState, streamed bool, call func(context.Context, *view.MemberState) error) error {
	if streamed {
		return call(ctx, st)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(st.Gone, cancel)
	defer stop()
	return r.UntilSilent(ctx, st.PeerAddr, func(ctx context.Context) error { return call(ctx, st) })
}

// UntilSilent runs call to the peer at addr under a context that ends once addr has gone
// silent: a peer that does not answer a probe after each silence bound of waiting
// (transport.Client.UntilSilent). It then returns a *transport.UnreachableError.
func (r *Router) UntilSilent(ctx context.Context, addr string, call func(context.Context) error) error {
	return r.cfg.Client.UntilSilent(ctx, addr, r.probe(), call)
}

// Answers reports whether the peer at addr answers a probe within the silence bound (see
// transport.Client.Answers): false, too, once ctx ends.
func (r *Router) Answers(ctx context.Context, addr string) bool {
	return r.cfg.Client.Answers(ctx, addr, r.probe())
}

// probe is what UntilSilent and Answers ask: a Peek of nothing.
func (r *Router) probe() *peerpb.GetRequest {
	return &peerpb.GetRequest{Header: r.Header(context.Background()), Key: []byte("probe"), Peek: true}
}

// failover reports whether a request to st that failed with err goes to the next owner.
func (r *Router) failover(ctx context.Context, st *view.MemberState, err error) bool {
	if ctx.Err() != nil {
		return false // the caller gave up: not the owner's fault
	}
	return st.Gone.Err() != nil || transport.IsUnreachable(err) ||
		errors.Is(err, transport.ErrLeaving) || errors.Is(err, transport.ErrUnknownGroup) ||
		errors.Is(err, transport.ErrNotMember) // it does not know this node yet: it has just joined
}
