package transport

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/corralcache/corral/transport/peerpb"
)

// ServerConfig configures NewServer. The zero value is a plaintext server
// with the defaults below.
type ServerConfig struct {
	// TLS makes the server speak TLS with this config; for mutual
	// authentication set ClientAuth to tls.RequireAndVerifyClientCert and
	// ClientCAs to the peers' CA. The config is cloned; "h2" is added to
	// NextProtos. nil = plaintext.
	TLS *tls.Config

	// MaxMessageSize bounds one message in each direction, in bytes. A larger
	// request is refused (the client gets an error wrapping
	// ErrInvalidArgument) and the connection keeps serving other calls.
	// 0 = DefaultMaxMessageSize; negative is an error.
	MaxMessageSize int

	// KeepaliveTime is how long a client connection may stay idle before the
	// server pings it. 0 = DefaultKeepaliveTime; negative is an error.
	KeepaliveTime time.Duration

	// KeepaliveTimeout is how long the server waits for a ping's ack before
	// it closes the connection. 0 = DefaultKeepaliveTimeout; negative is an
	// error.
	KeepaliveTimeout time.Duration

	// MinPingInterval is the shortest interval at which a client may ping;
	// a client that pings faster is disconnected. It must not exceed the
	// clients' ClientConfig.KeepaliveTime (see keepalive.go).
	// 0 = DefaultMinPingInterval; negative is an error.
	MinPingInterval time.Duration

	// MaxStreamCalls bounds the Gets one peer may have in flight on its stream; a call
	// past it is answered with an error wrapping ErrStreamFull, and nothing else happens.
	// Hits answered at once (HitHandler) do not count. 0 = DefaultMaxStreamCalls;
	// negative is an error.
	MaxStreamCalls int

	// MaxStreamAnswer is the largest answer, in bytes, sent on a GetStream for a value held
	// here: a larger one would hold back every answer queued behind it on the stream, so
	// the caller is told to ask again with a unary call instead, whose frames interleave
	// with the stream's. (Measured here, BenchmarkGetValueSize: the stream costs no more
	// than a unary call up to 1 MiB; BenchmarkSmallBehindLarge: 1 MiB answers on the stream
	// add ≈ 1 ms to every small Get behind them, unary ones ≈ 0.1 ms.) 0 =
	// DefaultMaxStreamAnswer; negative = no limit.
	MaxStreamAnswer int

	// HandshakeTimeout bounds a new connection's handshake (TLS and HTTP/2 preface, or a
	// framed stream's preface and, with TLS, its TLS handshake, frame.go); a connection that
	// has not completed it by then is closed. 0 = DefaultHandshakeTimeout;
	// negative is an error.
	HandshakeTimeout time.Duration

	// MaxConcurrentStreams bounds the calls one peer connection has open at once (its Gets
	// share one of them); its calls past it wait for one to end. 0 =
	// DefaultMaxConcurrentStreams; negative is an error.
	MaxConcurrentStreams int

	// OnLimit, if set, is called each time a limit turns a peer away: "peer_stream_calls"
	// (a Get past MaxStreamCalls), "peer_handshake" (a connection closed at
	// HandshakeTimeout). It must be quick and safe for concurrent use. (MaxMessageSize is
	// gRPC's to enforce, and the sender sees it.)
	OnLimit func(limit string)

	// Lateness, if set, says how late this node runs its timers lately (Client.Lateness):
	// the Server tells it in its answers on Get streams, so that a caller waits longer
	// before it calls a node starved of CPU silent (ClientConfig.SilentPeerTimeout). It is
	// called for every answer and must be quick and safe for concurrent use. nil: the
	// answers tell nothing.
	Lateness func() time.Duration

	// Logger receives recovered Handler panics (Error, with stack). nil =
	// discard.
	Logger *slog.Logger

	// TracerProvider, if set, serves every request that carries a W3C trace context under
	// a server span in the caller's trace (trace.go). nil = no spans: a request's trace
	// context is not even read.
	TracerProvider trace.TracerProvider
}

// DefaultServerConfig returns the production defaults: what the zero
// ServerConfig means, spelled out.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		MaxMessageSize:       DefaultMaxMessageSize,
		MaxStreamCalls:       DefaultMaxStreamCalls,
		MaxStreamAnswer:      DefaultMaxStreamAnswer,
		HandshakeTimeout:     DefaultHandshakeTimeout,
		MaxConcurrentStreams: DefaultMaxConcurrentStreams,
		KeepaliveTime:        DefaultKeepaliveTime,
		KeepaliveTimeout:     DefaultKeepaliveTimeout,
		MinPingInterval:      DefaultMinPingInterval,
	}
}

// validate checks cfg and returns it with defaults filled in.
func (cfg ServerConfig) validate() (ServerConfig, error) {
	if cfg.MaxMessageSize < 0 {
		return cfg, fmt.Errorf("transport: ServerConfig.MaxMessageSize is negative (%d)", cfg.MaxMessageSize)
	}
	if cfg.MaxStreamCalls < 0 {
		return cfg, fmt.Errorf("transport: ServerConfig.MaxStreamCalls is negative (%d)", cfg.MaxStreamCalls)
	}
	if cfg.MaxConcurrentStreams < 0 {
		return cfg, fmt.Errorf("transport: ServerConfig.MaxConcurrentStreams is negative (%d)", cfg.MaxConcurrentStreams)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"KeepaliveTime", cfg.KeepaliveTime},
		{"KeepaliveTimeout", cfg.KeepaliveTimeout},
		{"MinPingInterval", cfg.MinPingInterval},
		{"HandshakeTimeout", cfg.HandshakeTimeout},
	} {
		if d.v < 0 {
			return cfg, fmt.Errorf("transport: ServerConfig.%s is negative (%v)", d.name, d.v)
		}
	}
	def := DefaultServerConfig()
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = def.MaxMessageSize
	}
	if cfg.MaxStreamCalls == 0 {
		cfg.MaxStreamCalls = def.MaxStreamCalls
	}
	if cfg.MaxStreamAnswer == 0 {
		cfg.MaxStreamAnswer = def.MaxStreamAnswer
	}
	cfg.HandshakeTimeout = cmp.Or(cfg.HandshakeTimeout, def.HandshakeTimeout)
	cfg.MaxConcurrentStreams = cmp.Or(cfg.MaxConcurrentStreams, def.MaxConcurrentStreams)
	if cfg.OnLimit == nil {
		cfg.OnLimit = func(string) {}
	}
	if cfg.KeepaliveTime == 0 {
		cfg.KeepaliveTime = def.KeepaliveTime
	}
	if cfg.KeepaliveTimeout == 0 {
		cfg.KeepaliveTimeout = def.KeepaliveTimeout
	}
	if cfg.MinPingInterval == 0 {
		cfg.MinPingInterval = def.MinPingInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// Server serves the peer protocol for a Handler.
type Server struct {
	opts    []grpc.ServerOption // fixed in NewServer
	svc     *peerService
	onLimit func(limit string)
	// framing is set when framed streams are served beside gRPC on each listener
	// (frame.go, sniff.go): always, but in tests of an older corral.
	framing          bool
	handshakeTimeout time.Duration
	tls              *tls.Config // ServerConfig.TLS, for framed connections; nil: plaintext

	stopOnce sync.Once

	mu sync.Mutex // guards gs and stopped
	// gs is made by the first Serve, not by NewServer, because it starts
	// goroutines (stream workers) that only Stop ends: a Server that is
	// made and dropped without serving owns nothing.
	gs      *grpc.Server
	stopped bool
}

// NewServer returns a Server that answers peer requests with h. It starts
// nothing and listens on nothing until Serve.
func NewServer(h Handler, cfg ServerConfig) (*Server, error) {
	if h == nil {
		return nil, errors.New("transport: NewServer: nil Handler")
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxMessageSize),
		grpc.MaxSendMsgSize(cfg.MaxMessageSize),
		grpc.KeepaliveParams(serverKeepalive(cfg.KeepaliveTime, cfg.KeepaliveTimeout)),
		// Fixed windows: no bandwidth-delay pings around every Get (limits.go).
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(serverEnforcement(cfg.MinPingInterval)),
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		grpc.MaxConcurrentStreams(uint32(cfg.MaxConcurrentStreams)),
		// Stop waits for running handlers, so that no Handler method runs
		// after Stop returns and every goroutine the Server started is gone.
		grpc.WaitForHandlers(true),
		// Serve streams on a pool of long-lived goroutines instead of one
		// new goroutine per call (falling back to a new one when all are
		// busy, so a slow fill never blocks other calls). About 10% off a
		// remote Get here (bench_test.go). Experimental in grpc-go: if a
		// release drops it, drop this line and nothing else changes.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	svc := &peerService{h: h, log: cfg.Logger, maxMessage: cfg.MaxMessageSize, tracer: newTracer(cfg.TracerProvider),
		maxStreamCalls: cfg.MaxStreamCalls, onLimit: cfg.OnLimit, lateness: cfg.Lateness, quit: make(chan struct{})}
	if svc.tracer != nil {
		opts = append(opts, grpc.UnaryInterceptor(svc.unaryInterceptor), grpc.StreamInterceptor(svc.streamInterceptor))
	}
	maxAnswer := cfg.MaxStreamAnswer
	if maxAnswer < 0 {
		maxAnswer = math.MaxInt
	}
	var framedTLS *tls.Config
	if cfg.TLS != nil {
		framedTLS = cfg.TLS.Clone()
		framedTLS.NextProtos = nil // a framed connection's TLS negotiates no protocol: the preface chose it
	}
	svc.maxStreamAnswer = maxAnswer
	return &Server{opts: opts, onLimit: cfg.OnLimit, framing: true, tls: framedTLS, handshakeTimeout: cfg.HandshakeTimeout, svc: svc}, nil
}

// listen returns the gRPC server, making it on first use, and the listener it is to serve
// on lis; nil after Stop. The sniffing listener is made under mu, with stopped unset: its
// goroutines are counted in framedWG before Stop can begin to wait for them.
func (s *Server) listen(lis net.Listener) (*grpc.Server, net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, nil
	}
	if s.gs == nil {
		s.gs = grpc.NewServer(s.opts...)
		peerpb.RegisterPeerServer(s.gs, s.svc)
	}
	onTimeout := func() { s.onLimit("peer_handshake") }
	if s.framing {
		return s.gs, newSniffListener(lis, s.svc, s.handshakeTimeout, onTimeout, s.tls)
	}
	return s.gs, handshakeListener{Listener: lis, onTimeout: onTimeout}
}

// Serve accepts connections on lis and serves them until Stop. It returns
// nil after Stop (also when Stop came first; lis is then closed at once),
// or the listener's error. Serve may be called for several listeners.
func (s *Server) Serve(lis net.Listener) error {
	gs, gl := s.listen(lis)
	if gs == nil {
		return lis.Close()
	}
	err := gs.Serve(gl)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop stops the server: it stops accepting connections and new calls,
// lets the calls in progress finish until ctx ends, then closes every
// connection and cancels the contexts of the calls still running. It
// returns when every Handler method has returned and every goroutine the
// Server started is gone; each Serve then returns nil. Calling it again,
// even concurrently, waits for the first and does nothing else. A Server
// that never served needs no Stop.
func (s *Server) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		gs := s.gs
		s.mu.Unlock()
		if gs == nil {
			return
		}
		close(s.svc.quit)
		defer s.svc.loops.Wait()
		done := make(chan struct{})
		go func() {
			gs.GracefulStop() // closes the listeners too
			s.svc.framedWG.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			// Stop cancels the calls GracefulStop is waiting for, so it
			// returns too; wait for it so that its goroutine is gone.
			gs.Stop()
			s.svc.closeFramed()
			<-done
		}
	})
}

// peerService adapts a Handler to the generated gRPC service: it maps
// errors to status codes, recovers panics and checks message structure.
type peerService struct {
	peerpb.UnimplementedPeerServer
	h              Handler
	log            *slog.Logger
	maxMessage     int // ServerConfig.MaxMessageSize
	maxStreamCalls int // ServerConfig.MaxStreamCalls
	// maxStreamAnswer is ServerConfig.MaxStreamAnswer, with "no limit" as MaxInt.
	maxStreamAnswer int
	onLimit         func(limit string)   // ServerConfig.OnLimit
	lateness        func() time.Duration // ServerConfig.Lateness
	tracer          trace.Tracer         // nil: no spans (ServerConfig.TracerProvider)

	// quit is closed by Stop: GetStreams finish their calls and end, which GracefulStop
	// waits for (a stream has no end of its own).
	quit chan struct{}
	// loops counts the GetStreams' receive loops, which end just after their streams:
	// Stop waits for them.
	loops sync.WaitGroup

	// framedWG counts the goroutines of framed serving (sniff.go): accept loops, sniffing
	// and framed streams. Stop waits for them.
	framedWG sync.WaitGroup
	framedMu sync.Mutex // guards framedConns and framedClosed
	// framedConns holds the framed connections served, with their contexts' cancels.
	framedConns  map[net.Conn]context.CancelFunc
	framedClosed bool // Stop's ctx ended: no framed connection is served any more
}

var _ peerpb.PeerServer = (*peerService)(nil)

func (p *peerService) Get(ctx context.Context, req *peerpb.GetRequest) (resp *peerpb.GetResponse, err error) {
	defer p.recoverPanic("Get", &err)
	resp, err = p.h.Get(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.GetResponse{}
	}
	return resp, nil
}

func (p *peerService) Set(ctx context.Context, req *peerpb.SetRequest) (resp *peerpb.SetResponse, err error) {
	defer p.recoverPanic("Set", &err)
	if req.GetEntry() == nil {
		return nil, toStatus(ctx, fmt.Errorf("%w: set request without an entry", ErrInvalidArgument))
	}
	resp, err = p.h.Set(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.SetResponse{}
	}
	return resp, nil
}

func (p *peerService) Remove(ctx context.Context, req *peerpb.RemoveRequest) (resp *peerpb.RemoveResponse, err error) {
	defer p.recoverPanic("Remove", &err)
	resp, err = p.h.Remove(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.RemoveResponse{}
	}
	return resp, nil
}

func (p *peerService) Invalidate(ctx context.Context, req *peerpb.InvalidateRequest) (resp *peerpb.InvalidateResponse, err error) {
	defer p.recoverPanic("Invalidate", &err)
	resp, err = p.h.Invalidate(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.InvalidateResponse{}
	}
	return resp, nil
}

func (p *peerService) Reconcile(ctx context.Context, req *peerpb.ReconcileRequest) (resp *peerpb.ReconcileResponse, err error) {
	defer p.recoverPanic("Reconcile", &err)
	resp, err = p.h.Reconcile(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.ReconcileResponse{}
	}
	return resp, nil
}

func (p *peerService) WaitsFor(ctx context.Context, req *peerpb.WaitsForRequest) (resp *peerpb.WaitsForResponse, err error) {
	defer p.recoverPanic("WaitsFor", &err)
	resp, err = p.h.WaitsFor(ctx, req)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	if resp == nil {
		resp = &peerpb.WaitsForResponse{}
	}
	return resp, nil
}

func (p *peerService) Handoff(stream grpc.ClientStreamingServer[peerpb.Entry, peerpb.HandoffResponse]) (err error) {
	defer p.recoverPanic("Handoff", &err)
	ctx := stream.Context()
	var res peerpb.HandoffResponse
	for {
		e, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&res)
		}
		if err != nil {
			// Already a status (the sender went away, a message over the
			// limit, ...): pass it on as gRPC made it.
			return err
		}
		accepted, err := p.h.Handoff(ctx, e)
		if err != nil {
			return toStatus(ctx, err)
		}
		if accepted {
			res.Accepted++
		} else {
			res.Kept++
		}
	}
}

// recoverPanic turns a Handler panic into an Internal answer, so that a bug
// in one request costs that request and never the node. It must be deferred
// directly (recover only works there).
func (p *peerService) recoverPanic(method string, errp *error) {
	r := recover()
	if r == nil {
		return
	}
	p.log.Error("transport: handler panicked", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	*errp = internal("transport: handler %s panicked: %v", method, r)
}
