package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/apitoken"
	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/debugui"
	"github.com/corralcache/corral/cmd/corral/internal/httpapi"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/origin"
	"github.com/corralcache/corral/cmd/corral/internal/resp"
	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/crash"
)

// serveConfig is everything `corral serve` is told.
type serveConfig struct {
	name, bind, advertise          string
	gossipPort, peerPort, httpPort int
	join                           listFlag
	origin                         string
	originRedirects                string
	ttl, swr, negativeTTL          time.Duration
	jitter                         float64
	fillTimeout                    time.Duration
	silentPeerTimeout              time.Duration
	maxBytes                       int64
	maxValueBytes                  int
	maxGroups                      int
	backups                        int
	groups                         listFlag
	minMembers                     int
	shutdownTimeout, shutdownDelay time.Duration
	drain                          time.Duration
	label                          string
	logFormat, logLevel            string
	frontConfig
	leases clientlease.Limits
	resp   resp.Limits
	limits httpapi.Limits
	secretsConfig
	tracing tracingConfig
	runtime runtimeConfig
}

func serveFlags(out io.Writer) (*flag.FlagSet, *serveConfig) {
	c := &serveConfig{}
	d := corral.DefaultConfig() // the flags that are Config fields default to the library's defaults
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.name, "name", "", "member name, unique in the cluster (default $POD_NAME, else hostname + random suffix)")
	fs.StringVar(&c.bind, "bind", d.BindAddr, "address to listen on for gossip, the peer port and HTTP")
	fs.StringVar(&c.advertise, "advertise", "", "address peers dial (default $POD_IP, else derived from --bind)")
	fs.IntVar(&c.gossipPort, "gossip-port", d.GossipPort, "memberlist port, TCP and UDP (0 = any free port)")
	fs.IntVar(&c.peerPort, "peer-port", d.PeerPort, "peer port: the requests members send each other (Gets framed on one connection per peer, other calls gRPC; 0 = any free port)")
	fs.IntVar(&c.httpPort, "http-port", 8080, "HTTP API, metrics and debug page port (0 = any free port)")
	fs.Var(&c.join, "join", "seed to join, repeatable: host:port, dns+name:port, k8s://namespace/service (EndpointSlices; KUBECONFIG or in-cluster), k8s://service (namespace $POD_NAMESPACE)")
	fs.StringVar(&c.origin, "origin", "", "origin URL template, e.g. http://api:9000/items/{key}; {group} and {key} are path-escaped in the path (a name that would be a dot segment, such as \"..\", is refused: 400) and query-escaped in the query (default: none, values come only from PUT)")
	fs.StringVar(&c.originRedirects, "origin-redirects", origin.RedirectsNone, "redirects of the origin: none (a 3xx fails the fill: 502) or same-host (followed, up to 5, to the same scheme, host and port)")
	fs.DurationVar(&c.ttl, "ttl", time.Minute, "how long a value stays fresh (0 = forever)")
	fs.DurationVar(&c.swr, "swr", 0, "stale-while-revalidate: serve a stale value this long past --ttl while one refresh runs")
	fs.Float64Var(&c.jitter, "jitter", 0.1, "spread each TTL uniformly over ±this fraction, in [0, 1)")
	fs.DurationVar(&c.negativeTTL, "negative-ttl", 0, "remember an origin 404 this long (0 = not remembered)")
	fs.DurationVar(&c.fillTimeout, "fill-timeout", 10*time.Second, "bound on one origin fetch")
	fs.DurationVar(&c.silentPeerTimeout, "silent-peer-timeout", d.SilentPeerTimeout, "how long a peer may leave a question unanswered while requests wait on it before it is failed over, so a paused or cut-off owner costs a GET at most this (a write twice it); a node whose own timers run late (starved of CPU), or asking an owner whose answers say it runs late, waits twice that lateness longer. Raise it where an owner may stand still longer than this before it has answered anything late (a live owner failed over costs its key a fill); negative = never probe (wait for memberlist to declare the peer dead)")
	fs.Int64Var(&c.maxBytes, "max-bytes", fill.DefaultMaxBytes, "memory bound of each group's store on this node, bytes")
	fs.IntVar(&c.backups, "backups", 0, "backups of every group's entries, 0 to 2: each entry is also kept by the next members on the ring, so that an owner that crashes costs no origin call (memory per node ×(1+N))")
	fs.IntVar(&c.maxValueBytes, "max-value-bytes", d.MaxValueBytes, "largest value accepted, bytes (larger PUT bodies get 413)")
	fs.IntVar(&c.maxGroups, "max-groups", 64, "groups this node serves at most, counting those given by --group and those that hold a value here; at most as many again that hold nothing may exist")
	fs.Var(&c.groups, "group", "a group to serve from the start, repeatable (with --api-token-file, a read without the token serves only groups that exist: those given here, and those an authorized request or a peer created)")
	fs.IntVar(&c.minMembers, "min-members", 1, "not ready until this many members are seen")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 25*time.Second, "bound on a graceful stop after SIGTERM (keep it under the pod's terminationGracePeriodSeconds)")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 0, "after SIGTERM, fail readiness and wait this long before leaving, so load balancers stop sending traffic")
	fs.DurationVar(&c.drain, "drain", d.DrainTimeout, "after leaving, keep answering peers this long")
	fs.StringVar(&c.label, "label", "", "cluster label; members with another label are never admitted")
	fs.StringVar(&c.logFormat, "log-format", "auto", "auto (text on a terminal, JSON otherwise), json or text")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	addFrontFlags(fs, &c.frontConfig, &c.leases)
	addRESPFlags(fs, &c.resp)
	addLimitFlags(fs, &c.limits)
	addSecretsFlags(fs, &c.secretsConfig)
	addRuntimeFlags(fs, &c.runtime)
	addTracingFlags(fs, &c.tracing)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: corral serve [flags]

Runs a corral node with an HTTP front: a stampede-proof read-through cache in front of an
HTTP origin. Every flag can also be set from the environment as CORRAL_<FLAG> (e.g.
CORRAL_GOSSIP_PORT=7946, CORRAL_JOIN=a:7946,b:7946); the command line wins.

HTTP API:
  GET    /v1/groups/{group}/keys/{key}   value (X-Corral-Source: hit, fill, coalesced, stale, near, peer);
                                         without --origin, only what was PUT (404 otherwise)
  PUT    /v1/groups/{group}/keys/{key}   store the body, with its Content-Type as the value's type
                                         (curl -X PUT --data-binary sends application/x-www-form-urlencoded
                                         unless told: -H 'Content-Type: application/json'); Surrogate-Key tags it
  DELETE /v1/groups/{group}/keys/{key}   invalidate cluster-wide
  GET    /v1/groups/{group}/keys?key=a&key=b  many keys at once (one request per owner, each
  POST   /v1/groups/{group}/keys:batch   key filled once): JSON {"values": {key: base64},
                                         "missing": [keys], "errors": {key: {status, error}}};
                                         the POST's body is {"keys": ["a", "b"]}; at most 10000 keys
  GET    …/keys/{key}?peek               what the key's owner holds, without a fill: the value,
                                         X-Corral-Fresh-For, X-Corral-Stale-For, Surrogate-Key (404: nothing)
  GET    …/keys/{key}?lease=5s[&wait=200ms]  a lease, without --origin (X-Corral-Lease-State:
                                         hit, fill, stale, busy; X-Corral-Lease: the token); at
                                         most --max-lease, --max-client-leases per client IP;
                                         with --api-token-file only with the token (else a plain read)
  PUT    …/keys/{key}?ttl=60s[&swr=30s]  store for a lifetime; with X-Corral-Lease, under the lease (204, 409)
  DELETE /v1/tags/{tag}                  purge every value stored with the tag, cluster-wide
  GET    /v1/cluster[?key=K]             members, ring shares, K's owner, seeds that refuse this node
  /metrics  /healthz  /readyz  /debug/corral  /debug/pprof/ (with --pprof)

Redis protocol (--resp-port), every key in --resp-group: GET (reads through --origin, as HTTP
GET does, also after DEL), MGET (a batch read of up to 10000 keys: a key that failed fails
it, -ERR naming it), SET [EX|PX] [TAGS], DEL, EXISTS, TTL, PTTL, DELTAG, FILLGET, FILLSET,
PING, HELLO, AUTH; bounded by --resp-max-conns, --resp-idle-timeout, --resp-command-timeout and
--resp-max-pending-bytes. Every bound, and what happens past it: SECURITY.md.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, c
}

func newLogger(w *os.File, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "auto":
		if fi, err := w.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want auto, json or text", format)
}

func (c *serveConfig) validate() error {
	switch {
	case c.httpPort < 0 || c.httpPort > 65535:
		return fmt.Errorf("--http-port %d out of range", c.httpPort)
	case c.ttl < 0 || c.swr < 0 || c.negativeTTL < 0:
		return errors.New("--ttl, --swr and --negative-ttl must not be negative")
	case c.jitter < 0 || c.jitter >= 1:
		return fmt.Errorf("--jitter %v: want [0, 1)", c.jitter)
	case c.fillTimeout <= 0:
		return errors.New("--fill-timeout must be positive")
	case c.silentPeerTimeout == 0:
		return errors.New("--silent-peer-timeout must not be 0 (negative = never probe)")
	case c.maxBytes <= 0 || c.maxValueBytes <= 0 || c.maxGroups <= 0:
		return errors.New("--max-bytes, --max-value-bytes and --max-groups must be positive")
	case c.backups < 0 || c.backups > 2:
		return fmt.Errorf("--backups %d: want 0 to 2", c.backups)
	case len(c.configuredGroups()) > c.maxGroups:
		return fmt.Errorf("%d groups given by --group and --resp-group exceed --max-groups %d", len(c.configuredGroups()), c.maxGroups)
	case c.minMembers < 1:
		return errors.New("--min-members must be at least 1")
	case c.shutdownTimeout <= 0:
		return errors.New("--shutdown-timeout must be positive")
	}
	if err := c.limits.Validate(); err != nil {
		return err
	}
	if err := c.secretsConfig.validate(); err != nil {
		return err
	}
	if err := c.runtime.validate(); err != nil {
		return err
	}
	if err := c.tracing.validate(); err != nil {
		return err
	}
	if err := c.resp.Validate(); err != nil {
		return err
	}
	if err := c.frontConfig.validate(); err != nil {
		return err
	}
	return c.leases.Validate()
}

// daemon is a running `corral serve`.
type daemon struct {
	cfg     *serveConfig
	log     *slog.Logger
	node    *corral.Node
	origin  *origin.Origin // nil = values only from PUT
	reg     *prometheus.Registry
	started time.Time

	// The fronts and what they share, made by startDaemon.
	groups      *objects.Groups
	hits        *limithits.Counter
	leases      *clientlease.Leases
	token       *apitoken.Token // nil = no API token (--api-token-file)
	api         *httpapi.API
	respMetrics *resp.Metrics
	httpMetrics *httpapi.Metrics

	mu   sync.Mutex      // guards srv and resp
	srv  *httpapi.Server // set when serving starts
	resp *resp.Server    // nil = no Redis protocol front (--resp-port 0); set before serving

	stopping atomic.Bool // SIGTERM arrived: not ready

	tracer *sdktrace.TracerProvider // nil = no --otlp-endpoint
	// propagator reads and writes trace context in HTTP headers (OTEL_PROPAGATORS), with tracer.
	propagator propagation.TextMapPropagator
	keys       *keyFile // nil = no --secret-key-file
	stopWatch  func()   // stops and waits for the key file's watch; set once the node runs
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := serveFlags(stderr)
	if err := parseArgs(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := applyEnv(fs, os.LookupEnv); err != nil {
		return err
	}
	if c.name == "" {
		c.name = firstEnv("POD_NAME")
	}
	if c.advertise == "" {
		c.advertise = firstEnv("POD_IP")
	}
	if err := c.validate(); err != nil {
		return err
	}
	logOut := os.Stderr
	if f, ok := stderr.(*os.File); ok {
		logOut = f
	}
	log, err := newLogger(logOut, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	stopRuntime := sizeRuntime(c.runtime, log)
	defer stopRuntime()
	d, err := startDaemon(c, log)
	if err != nil {
		return err
	}
	return d.run(ctx)
}

// sizeRuntime gives the Go runtime its memory limit and heap floor (runtime.go), and logs
// them. The returned func gives GOGC back. It is serve's, not startDaemon's: the runtime is
// the process's, and tests run many daemons in one.
func sizeRuntime(c runtimeConfig, log *slog.Logger) (stop func()) {
	limit, ok := cgroupMemoryLimit(os.DirFS("/"))
	p := c.plan(os.Getenv, debug.SetMemoryLimit(-1), limit, ok)
	if p.memoryLimit > 0 {
		debug.SetMemoryLimit(p.memoryLimit)
	}
	stop = func() {}
	if p.heapFloor > 0 {
		h, err := startHeapFloor(p.heapFloor, debug.SetGCPercent)
		if err != nil {
			log.Warn("corral: no GC heap floor", "err", err)
			p.heapFloor, p.floorFrom = 0, "none: "+err.Error()
		} else {
			stop = h.stop
		}
	}
	log.Info("corral: runtime", "memory_limit_mib", p.memoryLimit>>20, "memory_limit_from", p.limitFrom,
		"gc_heap_floor_mib", p.heapFloor>>20, "gc_heap_floor_from", p.floorFrom, "gomaxprocs", runtime.GOMAXPROCS(0))
	return stop
}

func startDaemon(c *serveConfig, log *slog.Logger) (*daemon, error) {
	d := &daemon{cfg: c, log: log, reg: prometheus.NewRegistry(), started: time.Now()}
	suppressed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "corral_log_suppressed_total",
		Help: "Warnings and errors not logged because too many of their kind came at once (the next one logged says how many).",
	})
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), suppressed)
	log = slog.New(newFloodHandler(log.Handler(), suppressed))
	d.log = log
	var err error
	if d.hits, err = limithits.New(d.reg); err != nil {
		return nil, err
	}
	if d.leases, err = clientlease.New(c.leases, d.hits); err != nil {
		return nil, err
	}
	if d.respMetrics, err = resp.NewMetrics(d.reg); err != nil {
		return nil, err
	}
	if d.httpMetrics, err = httpapi.NewMetrics(d.reg); err != nil {
		return nil, err
	}
	if c.tracing.otlpEndpoint != "" && c.name == "" {
		c.name = memberName() // the spans name the member before the node exists
	}
	if c.tracing.otlpEndpoint != "" {
		if d.propagator, err = propagatorFromEnv(os.Getenv); err != nil {
			return nil, err
		}
	}
	if d.tracer, err = startTracing(context.Background(), &c.tracing, c.name, os.Getenv); err != nil {
		return nil, err
	}
	if err := d.startNode(); err != nil {
		stopTracing(d.tracer)
		return nil, err
	}
	return d, nil
}

// startNode is the rest of startDaemon, once the tracer (if any) runs: the origin, the groups,
// the node and the API.
func (d *daemon) startNode() error {
	c, log := d.cfg, d.log
	var tp trace.TracerProvider // nil, not a nil *TracerProvider, when the daemon does not trace
	if d.tracer != nil {
		tp = d.tracer
	}
	keys, err := c.tracing.keys()
	if err != nil {
		return err
	}
	if c.origin != "" {
		o, err := origin.New(origin.Config{Template: c.origin, FillTimeout: c.fillTimeout, Grace: c.swr,
			MaxBytes: c.maxValueBytes, Redirects: c.originRedirects, TracerProvider: tp, Propagator: d.propagator})
		if err != nil {
			return err
		}
		d.origin = o
	}
	gcfg := objects.GroupsConfig{
		Options: []corral.GroupOption{corral.WithTTL(c.ttl), corral.WithJitter(c.jitter),
			corral.WithStaleWhileRevalidate(c.swr), corral.WithNegativeTTL(c.negativeTTL),
			corral.WithFillTimeout(c.fillTimeout), corral.WithMaxBytes(c.maxBytes), corral.WithBackups(c.backups)},
		MaxGroups: c.maxGroups, Configured: c.configuredGroups(),
	}
	if d.origin != nil {
		gcfg.Load = d.origin.Load
	}
	if d.groups, err = objects.NewGroups(gcfg); err != nil {
		return err
	}
	tok, err := loadToken(c.apiTokenFile)
	if err != nil {
		return err
	}
	d.token = tok
	cfg := corral.Config{
		Name: c.name, BindAddr: c.bind, AdvertiseAddr: c.advertise,
		GossipPort: c.gossipPort, PeerPort: c.peerPort, Join: c.join,
		Registerer: d.reg, Logger: log, Label: c.label,
		// The node bounds encoded objects; --max-value-bytes bounds bodies, the user's bytes.
		DrainTimeout: drainOrNone(c.drain), MaxValueBytes: c.maxValueBytes + objects.Overhead,
		SilentPeerTimeout: c.silentPeerTimeout, TracerProvider: tp, TraceKeys: keys,
		AutoGroup: func(n *corral.Node, name string) error { _, err := d.groups.Group(n, name); return err },
	}
	if d.keys, err = c.secretsConfig.apply(&cfg, log); err != nil {
		return err
	}
	node, err := corral.New(cfg)
	if err != nil {
		return err
	}
	d.node = node
	for _, name := range c.configuredGroups() {
		if _, err := d.groups.Group(node, name); err != nil {
			node.Close(context.Background())
			return fmt.Errorf("--group %q: %w", name, err)
		}
	}
	if d.api, err = httpapi.New(httpapi.Config{
		Node: node, Groups: d.groups, Leases: d.leases, Gatherer: d.reg, Ready: d.ready,
		Debug: debugui.Handler("/debug/corral", d.debugState), Pprof: c.pprof, Hits: d.hits,
		Token: d.token, TokenReads: c.apiTokenReads, Origin: d.origin,
		MaxValueBytes: c.maxValueBytes, TTL: c.ttl, SWR: c.swr, Log: log, Limits: c.limits,
		TracerProvider: tp, Propagator: d.propagator, Metrics: d.httpMetrics,
		// The API serves no loop with a token or a TracerProvider, whatever this says.
		Loops: eventLoops(c.httpLoops, runtime.GOMAXPROCS(0), c.tracing.otlpEndpoint != ""),
	}); err != nil {
		node.Close(context.Background())
		return err
	}
	d.stopWatch = func() {}
	if d.keys != nil {
		log.Info("corral: gossip encryption", "keys", 1+len(cfg.SecondaryKeys),
			"primary_sha256", fingerprint(cfg.SecretKey), "verify_incoming", c.verifyIncoming, "verify_outgoing", c.verifyOutgoing)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.keys.watch(ctx, node) }()
		var once sync.Once
		d.stopWatch = func() { once.Do(func() { cancel(); <-done }) }
	}
	return nil
}

// configuredGroups are the groups served from the start: --group's, and --resp-group with
// --resp-port.
func (c *serveConfig) configuredGroups() []string {
	gs := slices.Clone([]string(c.groups))
	if c.respPort > 0 {
		gs = append(gs, c.respGroup)
	}
	slices.Sort(gs)
	return slices.Compact(gs)
}

func drainOrNone(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// run serves HTTP until ctx ends (SIGTERM or SIGINT), then stops gracefully: readiness
// fails first, in-flight HTTP requests finish, the node leaves, hands off and drains.
func (d *daemon) run(ctx context.Context) error {
	lis, err := net.Listen("tcp", net.JoinHostPort(d.cfg.bind, strconv.Itoa(d.cfg.httpPort)))
	if err != nil {
		d.closeNode(context.Background())
		return fmt.Errorf("listen for HTTP: %w", err)
	}
	if d.cfg.respPort > 0 {
		rl, err := net.Listen("tcp", net.JoinHostPort(d.cfg.bind, strconv.Itoa(d.cfg.respPort)))
		if err != nil {
			lis.Close()
			d.closeNode(context.Background())
			return fmt.Errorf("listen for the Redis protocol: %w", err)
		}
		if err := d.startRESP(rl); err != nil {
			lis.Close()
			d.closeNode(context.Background())
			return err
		}
	}
	return d.serveOn(ctx, lis)
}

// serveOn is run on a listener of the caller's.
func (d *daemon) serveOn(ctx context.Context, lis net.Listener) error {
	srv := d.api.Server()
	d.mu.Lock()
	d.srv = srv
	d.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	d.log.Info("corral serving", "name", d.node.Name(), "http", lis.Addr().String(),
		"gossip", d.node.GossipAddr(), "peer", d.node.PeerAddr(), "origin", d.cfg.origin)

	select {
	case err := <-served:
		d.stopRESP(context.Background())
		d.closeNode(context.Background())
		if errors.Is(err, http.ErrServerClosed) {
			return nil // kill
		}
		return fmt.Errorf("HTTP server: %w", err)
	case <-ctx.Done():
	}
	start := time.Now()
	d.log.Info("corral stopping: readiness fails, then leave, hand off, drain")
	d.stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), d.cfg.shutdownTimeout)
	defer cancel()
	if d.cfg.shutdownDelay > 0 {
		select {
		case <-time.After(d.cfg.shutdownDelay):
		case <-sctx.Done():
		}
	}
	var errs []error
	if err := srv.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("HTTP shutdown: %w", err))
	}
	if err := d.stopRESP(sctx); err != nil {
		errs = append(errs, err)
	}
	if err := d.closeNode(sctx); err != nil {
		errs = append(errs, err)
	}
	d.log.Info("corral stopped", "took", time.Since(start).Round(time.Millisecond).String(), "errors", len(errs))
	return errors.Join(errs...)
}

// ready reports whether the node is ready (/readyz, the debug page), and why not.
func (d *daemon) ready() (bool, string) {
	if d.stopping.Load() || !d.node.Ready() {
		return false, "shutting down"
	}
	if n := len(d.node.Members()); n < d.cfg.minMembers {
		return false, fmt.Sprintf("%d of %d members seen (--min-members)", n, d.cfg.minMembers)
	}
	return true, "ready"
}

// closeNode stops the watch of the key file and closes the node.
func (d *daemon) closeNode(ctx context.Context) error {
	d.stopWatch()
	err := d.node.Close(ctx)
	// After the node: the spans of its last requests and of its hand-off go out too.
	return errors.Join(err, stopTracing(d.tracer))
}

// kill stops the daemon as SIGKILL would: no readiness change, no leave, no hand-off, open
// connections cut (for the demo).
func (d *daemon) kill() {
	d.stopWatch()
	crash.Node(d.node)
	d.mu.Lock()
	srv := d.srv
	d.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	d.stopRESP(context.Background())
	stopTracing(d.tracer)
}
