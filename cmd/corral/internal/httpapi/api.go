package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"net/textproto"
	"slices"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/origin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Config is what the API serves and how.
type Config struct {
	// Node is the node whose cluster GET /v1/cluster shows and whose tags DELETE /v1/tags
	// purges. Required.
	Node *corral.Node
	// Groups are the node's groups: a request's group is made on first use (but see Token).
	// Required.
	Groups *objects.Groups
	// Leases grants the leases of GET ?lease=, within the bounds both fronts share. Required.
	Leases *clientlease.Leases
	// Gatherer is what GET /metrics serves. Required.
	Gatherer prometheus.Gatherer
	// Ready answers GET /readyz: whether the node is ready, and why not. Required.
	Ready func() (bool, string)
	// Debug serves GET /debug/corral and below; nil = not served.
	Debug http.Handler
	// Pprof serves the Go runtime's profiles at /debug/pprof/ (--pprof), as net/http/pprof
	// does: for `go tool pprof` and the execution tracer on a running node. With a Token they
	// need it, reads or not: a profile costs the node CPU while it runs and tells its
	// internals.
	Pprof bool
	// Hits counts the requests and connections turned away; nil = not counted.
	Hits *limithits.Counter
	// Token is the API token (--api-token-file): writes and leases need it as
	// Authorization: Bearer <token>, and a read without it never makes a group. Nil = none:
	// every request is open.
	Token *apitoken.Token
	// TokenReads makes reads need the token too (--api-token-reads), but for /metrics,
	// /healthz and /readyz. Only with a Token.
	TokenReads bool
	// Origin is the node's origin, if it has one (--origin): a GET of a key it cannot be asked
	// for is refused (400), and so are leases, since the origin fills. Nil = no origin.
	Origin *origin.Origin
	// MaxValueBytes is the largest PUT body, bytes (--max-value-bytes); larger get 413.
	// Positive.
	MaxValueBytes int
	// TTL and SWR are the lifetime of a value PUT under a lease or with ?ttl or ?swr that does
	// not give both (--ttl, --swr); TTL 0 = forever.
	TTL, SWR time.Duration
	// Log is where failed requests and the HTTP server's errors are logged; nil = nowhere.
	Log *slog.Logger
	// Limits bound what a request may cost.
	Limits Limits
	// TracerProvider, if set, makes every data request (/v1/…) a server span that continues
	// the caller's trace from its traceparent header (trace.go). nil = no spans: the hit path
	// allocates nothing more.
	TracerProvider trace.TracerProvider
	// Metrics are the event loops' metrics (NewMetrics); nil = counted where nobody reads them.
	Metrics *Metrics
	// Loops is how many event loops answer the hits of values this node holds fresh as their
	// owner, with no goroutine per connection (--http-loops; loop_linux.go); 0 = none, a
	// goroutine per connection. None with a Token or a TracerProvider, and none but on Linux.
	Loops int
	// Propagator reads the caller's trace context from a request's headers when the API
	// traces (OTEL_PROPAGATORS); nil = W3C trace context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
}

// API is the HTTP API of a node.
type API struct {
	cfg    Config
	tracer trace.Tracer // nil: no spans (Config.TracerProvider)
	// propagator is Config.Propagator, or W3C trace context; fields are the headers it
	// reads, canonical (the front keeps them for the handler).
	propagator propagation.TextMapPropagator
	fields     []string
	limits     *httpLimits
	types      typeValues // Content-Type header values of the objects served
}

// New returns the API of cfg. It refuses a Config that lacks what it requires, or whose
// Limits are out of range.
func New(cfg Config) (*API, error) {
	switch {
	case cfg.Node == nil || cfg.Groups == nil || cfg.Leases == nil || cfg.Gatherer == nil || cfg.Ready == nil:
		return nil, errors.New("httpapi: Config needs a Node, Groups, Leases, a Gatherer and Ready")
	case cfg.MaxValueBytes <= 0:
		return nil, fmt.Errorf("httpapi: MaxValueBytes %d: want at least 1", cfg.MaxValueBytes)
	case cfg.Loops < 0:
		return nil, fmt.Errorf("--http-loops %d: want 0 or more", cfg.Loops)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics, _ = NewMetrics(prometheus.NewRegistry())
	}
	a := &API{cfg: cfg, limits: newHTTPLimits(cfg.Limits, cfg.Hits)}
	if cfg.TracerProvider != nil {
		a.tracer = cfg.TracerProvider.Tracer("github.com/corralcache/corral/cmd/corral")
		a.propagator = cfg.Propagator
		if a.propagator == nil {
			a.propagator = propagation.TraceContext{}
		}
		for _, f := range a.propagator.Fields() {
			if f = textproto.CanonicalMIMEHeaderKey(f); !slices.Contains(a.fields, f) {
				a.fields = append(a.fields, f)
			}
		}
	}
	return a, nil
}

// idleTimeout is how long a kept-alive connection may wait for its next request.
const idleTimeout = 2 * time.Minute

// Server returns a Server that serves the API within its limits. The caller serves it on its
// listener and shuts it down; one Server at a time, since the limits count the connections
// of the one.
func (a *API) Server() *Server {
	srv := &http.Server{
		Handler:     a.handler(),
		IdleTimeout: idleTimeout,
		ErrorLog:    slog.NewLogLogger(a.cfg.Log.Handler(), slog.LevelWarn),
	}
	a.limits.server(srv)
	return newServer(a, srv)
}

// handler is the whole API as one handler: the limits, the token, the routes.
func (a *API) handler() http.Handler {
	return a.traced(a.limits.middleware(a.authorize(a.routes())))
}

func (a *API) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/groups/{group}/keys/{key}", func(w http.ResponseWriter, r *http.Request) {
		a.getKey(w, r, r.PathValue("group"), r.PathValue("key"))
	})
	mux.HandleFunc("PUT /v1/groups/{group}/keys/{key}", a.putKey)
	mux.HandleFunc("DELETE /v1/groups/{group}/keys/{key}", a.deleteKey)
	mux.HandleFunc("GET /v1/groups/{group}/keys", a.getKeys)
	mux.HandleFunc("POST /v1/groups/{group}/keys:batch", a.postKeys)
	mux.HandleFunc("DELETE /v1/tags/{tag}", a.deleteTag)
	mux.HandleFunc("/v1/groups/{group}/keys/{$}", emptyName("key", "/v1/groups/{group}/keys/{key}"))
	mux.HandleFunc("/v1/groups/{group}/keys", emptyName("key", "/v1/groups/{group}/keys/{key}"))
	mux.HandleFunc("/v1/tags/{$}", emptyName("tag", "/v1/tags/{tag}"))
	mux.HandleFunc("GET /v1/cluster", a.cluster)
	// OpenMetrics when the scraper asks for it: the format that carries exemplars (the trace
	// of a slow fill beside its bucket of corral_fill_duration_seconds).
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.cfg.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// Liveness: the process answers. It never depends on other members.
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.cfg.Debug != nil {
		mux.Handle("GET /debug/corral", a.cfg.Debug)
		mux.Handle("GET /debug/corral/", a.cfg.Debug)
	}
	if a.cfg.Pprof {
		// pprof.Index serves the named profiles below it too (heap, goroutine, allocs, …).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol) // go tool pprof POSTs to it
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if group, key, ok := keyPath(r); ok {
			a.getKey(w, r, group, key) // the hit's own route: see keyPath
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ok, why := a.cfg.Ready()
	if !ok {
		httpError(w, http.StatusServiceUnavailable, why)
		return
	}
	fmt.Fprintln(w, why)
}
