package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralcache/corral/transport/peerpb"
)

const (
	// DefaultCallTimeout bounds a call whose ctx has no deadline. A remote
	// Get waits for the owner's fill, so this must exceed the longest fill
	// timeout plus a round trip, or a slow loader would read as an
	// unreachable owner and start a failover (and a second fill).
	DefaultCallTimeout = 5 * time.Second

	// DefaultConnectTimeout bounds one connection attempt (TCP, TLS, HTTP/2
	// preface): a peer that does not complete it in 2s, on a network where a
	// handshake takes milliseconds, is taken as unreachable.
	DefaultConnectTimeout = 2 * time.Second

	// DefaultSilentPeerTimeout is ClientConfig.SilentPeerTimeout's default: a silent peer
	// costs a Get at most 300 ms on a node that runs on time (a hit takes a millisecond), and
	// a ping survives one TCP retransmission (200 ms).
	DefaultSilentPeerTimeout = 300 * time.Millisecond

	// reconnectMaxBackoff caps the wait between connection attempts to one
	// address (gRPC's default is 120s). Calls during the wait fail at once
	// as unreachable; a member that restarted at the same address should be
	// reachable again within seconds, and one that died is Forgotten anyway.
	reconnectMaxBackoff = 2 * time.Second
	// reconnectBaseBackoff is the first such wait.
	reconnectBaseBackoff = 100 * time.Millisecond
)

// ClientConfig configures NewClient. The zero value is a plaintext client
// with the defaults below.
type ClientConfig struct {
	// TLS makes the client speak TLS with this config: Certificates for
	// mutual authentication, RootCAs for the peers' CA. With ServerName
	// empty, the host part of the peer address is verified against the
	// peer's certificate, so certificates of peers dialled by IP need that
	// IP in their SANs (or set ServerName, or VerifyPeerCertificate). The
	// config is cloned. nil = plaintext.
	TLS *tls.Config

	// MaxMessageSize bounds one message in each direction, in bytes. A
	// request over it fails before it is sent, with an error wrapping
	// ErrInvalidArgument; so does an answer over it. 0 =
	// DefaultMaxMessageSize; negative is an error.
	MaxMessageSize int

	// CallTimeout is the deadline given to a call whose ctx has none. A ctx
	// with a deadline is used as is: when it passes, the call returns
	// ctx.Err() (the caller ran out of time, the peer did not fail), while a
	// call that runs past CallTimeout returns an *UnreachableError. For
	// Handoff it bounds the whole stream. 0 = DefaultCallTimeout; negative is
	// an error.
	CallTimeout time.Duration

	// ConnectTimeout bounds one connection attempt to a peer. Calls never
	// wait for a peer to become ready: a refused connection fails the calls
	// waiting on it at once, and one that does not complete in
	// ConnectTimeout fails them then (or at their deadline, if sooner).
	// 0 = DefaultConnectTimeout; negative is an error.
	ConnectTimeout time.Duration

	// KeepaliveTime is how long a connection may stay idle before the
	// client pings the peer. It must be at least 10s (gRPC's floor) and at
	// least the servers' ServerConfig.MinPingInterval, or they close the
	// connection. 0 = DefaultKeepaliveTime; other values below 10s are an
	// error.
	KeepaliveTime time.Duration

	// KeepaliveTimeout is how long the client waits for a ping's ack before
	// it closes the connection (calls on it fail as unreachable).
	// 0 = DefaultKeepaliveTimeout; negative is an error.
	KeepaliveTimeout time.Duration

	// SilentPeerTimeout is how long a peer may leave a question unanswered, and send
	// nothing else, while Gets wait on its stream, which is pinged while they do (see
	// streamping.go). A peer that does — paused, cut off, its answers lost — has its stream
	// broken: every Get waiting on it fails as unreachable; so does a Get that waits that long
	// for a connection to it. One that answers is filling slowly, and the Gets wait on. So a
	// silent peer costs a Get at most SilentPeerTimeout (a quarter more if it falls silent
	// while the Get waits), not its deadline. A node whose own timers fire late — starved of
	// CPU — waits longer: every silence bound is SilentPeerTimeout plus twice the largest
	// lateness its timers showed lately, or the peer told in its answers lately when that is
	// larger (ServerConfig.Lateness; lateness.go). Gets the peer answers as unary calls are
	// watched by probes instead, as UntilSilent watches any call (at most twice the bound).
	// 0 = DefaultSilentPeerTimeout; negative = never.
	SilentPeerTimeout time.Duration

	// MaxStreamCalls bounds the Gets in flight at once to one peer, on its stream: a Get
	// past it waits for a free slot (or its ctx). Keep it at most the peers'
	// ServerConfig.MaxStreamCalls, or they answer the excess with ErrStreamFull.
	// 0 = DefaultMaxStreamCalls; negative is an error.
	MaxStreamCalls int

	// Dialer, if set, makes the connections to peers instead of TCP: an in-memory network's
	// (package memnet), for tests in one process and in virtual time. nil = TCP.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)

	// OnCall, if set, is called after every RPC sent with the method
	// ("Get", "Set", "Remove", "Invalidate", "Handoff", "WaitsFor", "Reconcile", "Lease",
	// "FillSet", "Backup"), the gRPC code of
	// the result as codes.Code.String gives it ("OK", "NotFound",
	// "Unavailable", ...) and the time the call took. It feeds
	// corral_peer_requests_total. It runs on the caller's goroutine and must
	// be quick and safe for concurrent use. It is not called when no RPC was
	// sent (ErrClosed).
	OnCall func(method, code string, d time.Duration)

	// TracerProvider, if set, makes every call under a ctx that carries a span a client
	// span, and sends the span's W3C trace context with the call (trace.go). nil = no
	// spans, and no trace context sent.
	TracerProvider trace.TracerProvider
}

// DefaultClientConfig returns the production defaults: what the zero
// ClientConfig means, spelled out.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		MaxMessageSize:   DefaultMaxMessageSize,
		MaxStreamCalls:   DefaultMaxStreamCalls,
		CallTimeout:      DefaultCallTimeout,
		ConnectTimeout:   DefaultConnectTimeout,
		KeepaliveTime:    DefaultKeepaliveTime,
		KeepaliveTimeout: DefaultKeepaliveTimeout,

		SilentPeerTimeout: DefaultSilentPeerTimeout,
	}
}

// validate checks cfg and returns it with defaults filled in.
func (cfg ClientConfig) validate() (ClientConfig, error) {
	if cfg.MaxMessageSize < 0 {
		return cfg, fmt.Errorf("transport: ClientConfig.MaxMessageSize is negative (%d)", cfg.MaxMessageSize)
	}
	if cfg.MaxStreamCalls < 0 {
		return cfg, fmt.Errorf("transport: ClientConfig.MaxStreamCalls is negative (%d)", cfg.MaxStreamCalls)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"CallTimeout", cfg.CallTimeout},
		{"ConnectTimeout", cfg.ConnectTimeout},
		{"KeepaliveTime", cfg.KeepaliveTime},
		{"KeepaliveTimeout", cfg.KeepaliveTimeout},
	} {
		if d.v < 0 {
			return cfg, fmt.Errorf("transport: ClientConfig.%s is negative (%v)", d.name, d.v)
		}
	}
	if cfg.KeepaliveTime > 0 && cfg.KeepaliveTime < minClientKeepaliveTime {
		return cfg, fmt.Errorf("transport: ClientConfig.KeepaliveTime %v is below gRPC's floor of %v", cfg.KeepaliveTime, minClientKeepaliveTime)
	}
	def := DefaultClientConfig()
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = def.MaxMessageSize
	}
	if cfg.MaxStreamCalls == 0 {
		cfg.MaxStreamCalls = def.MaxStreamCalls
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = def.CallTimeout
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = def.ConnectTimeout
	}
	if cfg.KeepaliveTime == 0 {
		cfg.KeepaliveTime = def.KeepaliveTime
	}
	if cfg.KeepaliveTimeout == 0 {
		cfg.KeepaliveTimeout = def.KeepaliveTimeout
	}
	if cfg.SilentPeerTimeout == 0 {
		cfg.SilentPeerTimeout = def.SilentPeerTimeout
	}
	return cfg, nil
}

// Client sends peer requests. It keeps one connection per peer address,
// made on the first call to that address and reused by every call after it
// until Forget or Close. Its methods are safe for concurrent use.
//
// Every call returns either the answer, the caller's ctx.Err() when ctx
// ended, an *UnreachableError (see IsUnreachable), ErrClosed, or the error
// the peer answered with (see Handler and codes.go).
type Client struct {
	callTimeout    time.Duration
	maxMessage     int
	maxStreamCalls int
	onCall         func(method, code string, d time.Duration)
	tracer         trace.Tracer      // nil: no spans (ClientConfig.TracerProvider)
	dialOpts       []grpc.DialOption // fixed in NewClient; shared by every connection

	// framing is set when Gets may travel on framed streams (frame.go): always, but in
	// tests of the gRPC stream.
	framing bool
	// tls is ClientConfig.TLS, for framed connections; nil: plaintext.
	tls *tls.Config
	// dialConn makes a framed stream's connection: ClientConfig.Dialer, or TCP.
	dialConn         func(ctx context.Context, addr string) (net.Conn, error)
	connectTimeout   time.Duration
	keepaliveTime    time.Duration // a framed stream's, as gRPC's connections'
	keepaliveTimeout time.Duration
	silence          *silence // SilentPeerTimeout and this node's lateness (silence.go)

	// conns maps a peer address to its *peerConn. A sync.Map because the
	// hot path is a read of a key that is written once per peer: Load takes
	// no lock and writes no shared memory.
	conns sync.Map

	mu sync.Mutex // guards adding to and removing from conns, and closing
	// closed is set once, under mu, by Close; read without mu on the error
	// path.
	closed atomic.Bool

	// wg counts the goroutines of the Get streams (their readers and writers, and
	// openings): Close waits for them.
	wg sync.WaitGroup
}

// NewClient returns a Client. It connects to nothing until the first call.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay = reconnectBaseBackoff
	bo.MaxDelay = reconnectMaxBackoff
	c := &Client{
		callTimeout:    cfg.CallTimeout,
		maxMessage:     cfg.MaxMessageSize,
		maxStreamCalls: cfg.MaxStreamCalls,
		onCall:         cfg.OnCall,
		tracer:         newTracer(cfg.TracerProvider),
		dialOpts: []grpc.DialOption{
			grpc.WithTransportCredentials(creds),
			grpc.WithDefaultCallOptions(
				grpc.MaxCallRecvMsgSize(cfg.MaxMessageSize),
				// gRPC's default send limit is 2 GiB: without this an
				// oversized request would cross the network only to be
				// refused by the server.
				grpc.MaxCallSendMsgSize(cfg.MaxMessageSize),
			),
			grpc.WithKeepaliveParams(clientKeepalive(cfg.KeepaliveTime, cfg.KeepaliveTimeout)),
			// Fixed windows: no bandwidth-delay pings around every Get (limits.go).
			grpc.WithInitialWindowSize(streamWindow),
			grpc.WithInitialConnWindowSize(connWindow),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           bo,
				MinConnectTimeout: cfg.ConnectTimeout,
			}),
		},
	}
	c.framing = true
	if cfg.TLS != nil {
		c.tls = cfg.TLS.Clone()
		c.tls.NextProtos = nil // a framed connection's TLS negotiates no protocol: the preface chose it
	}
	c.connectTimeout, c.keepaliveTime, c.keepaliveTimeout = cfg.ConnectTimeout, cfg.KeepaliveTime, cfg.KeepaliveTimeout
	c.silence = &silence{timeout: cfg.SilentPeerTimeout}
	if cfg.Dialer != nil {
		c.dialOpts = append(c.dialOpts, grpc.WithContextDialer(cfg.Dialer))
		c.dialConn = cfg.Dialer
	} else {
		c.dialConn = func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
	}
	return c, nil
}

// Lateness returns how late this node has run its timers lately, as its answers tell it
// (ServerConfig.Lateness): whole milliseconds, 0 under 10 ms or when peers are never judged
// silent (the node then does not measure it).
func (c *Client) Lateness() time.Duration {
	return time.Duration(c.silence.late.toldMillis()) * time.Millisecond
}

// peerLate returns what the peer at addr told of its lateness (nil: no connection to it).
func (c *Client) peerLate(addr string) *toldLateness {
	if v, ok := c.conns.Load(addr); ok {
		return &v.(*peerConn).late
	}
	return nil
}

// Get asks the peer at addr for a key (see Handler.Get). It travels on the one GetStream
// this Client keeps to addr (stream.go), with its deadline and cancellation; its result is
// what a unary call's would be.
func (c *Client) Get(ctx context.Context, addr string, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	return c.GetFrom(ctx, addr, nil, req)
}

// GetFrom is Get from a member of the caller's cluster that has left it once left is
// closed: then the Get fails at once as unreachable rather than ask the member's address
// again. Forget ends the Gets in flight when a member leaves; GetFrom closes the gap between
// the caller's last look at its members and its Forget. left nil: never.
func (c *Client) GetFrom(ctx context.Context, addr string, left <-chan struct{}, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	p, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	if left != nil {
		// After conn: a Forget that did not come before it finds p and ends its stream.
		select {
		case <-left:
			return nil, &UnreachableError{Addr: addr, Err: errLeft}
		default:
		}
	}
	var span trace.Span
	if c.tracer != nil {
		// The span's ctx is not the call's: a fill's ctx must reach the stream as it is
		// (cancelOf), so only the trace context goes, in the request.
		var spanCtx context.Context
		spanCtx, span = c.startClient(ctx, "Get", addr)
		setRequestTrace(spanCtx, req)
	}
	callCtx, cancel := c.callContext(ctx)
	start := time.Now()
	resp, err := p.getOnStream(callCtx, req)
	cancel()
	c.observe("Get", start, err)
	if span != nil {
		answered(span, resp)
		endSpan(span, err)
	}
	if err != nil {
		return nil, c.callError(ctx, addr, err)
	}
	return resp, nil
}

// errLeft is GetFrom's when the member has left.
var errLeft = errors.New("transport: the member left")

// Set writes an entry through the peer at addr (see Handler.Set).
func (c *Client) Set(ctx context.Context, addr string, req *peerpb.SetRequest) (*peerpb.SetResponse, error) {
	return unary(c, ctx, addr, "Set", req, peerpb.PeerClient.Set)
}

// Remove deletes a key on the peer at addr (see Handler.Remove).
func (c *Client) Remove(ctx context.Context, addr string, req *peerpb.RemoveRequest) (*peerpb.RemoveResponse, error) {
	return unary(c, ctx, addr, "Remove", req, peerpb.PeerClient.Remove)
}

// Invalidate tells the peer at addr of a write (see Handler.Invalidate).
func (c *Client) Invalidate(ctx context.Context, addr string, req *peerpb.InvalidateRequest) (*peerpb.InvalidateResponse, error) {
	return unary(c, ctx, addr, "Invalidate", req, peerpb.PeerClient.Invalidate)
}

// Reconcile exchanges the remembered writes of a group with the peer at addr
// (see Handler.Reconcile).
func (c *Client) Reconcile(ctx context.Context, addr string, req *peerpb.ReconcileRequest) (*peerpb.ReconcileResponse, error) {
	return unary(c, ctx, addr, "Reconcile", req, peerpb.PeerClient.Reconcile)
}

// WaitsFor asks the peer at addr what its fill of a key waits on (see
// Handler.WaitsFor).
func (c *Client) WaitsFor(ctx context.Context, addr string, req *peerpb.WaitsForRequest) (*peerpb.WaitsForResponse, error) {
	return unary(c, ctx, addr, "WaitsFor", req, peerpb.PeerClient.WaitsFor)
}

// Handoff streams entries to the peer at addr, in order, and returns how
// many it stored and how many it declined (see Handler.Handoff). When ctx
// has no deadline, CallTimeout bounds the whole stream: give a large handoff
// a ctx with a deadline. On an error the peer may have stored a prefix of
// entries. A nil entry is refused before anything is sent.
func (c *Client) Handoff(ctx context.Context, addr string, entries []*peerpb.Entry) (*peerpb.HandoffResponse, error) {
	for i, e := range entries {
		if e == nil {
			return nil, fmt.Errorf("%w: handoff entry %d is nil", ErrInvalidArgument, i)
		}
	}
	p, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	// Unlike a unary call, a stream must be cancelled to be released when
	// it ends early, so it always gets a context of its own.
	var callCtx context.Context
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		callCtx, cancel = context.WithCancel(ctx)
	} else {
		callCtx, cancel = context.WithTimeout(ctx, c.callTimeout)
	}
	defer cancel()
	spanCtx, span := c.startClient(ctx, "Handoff", addr)
	if c.tracer != nil {
		callCtx = withMetadata(callCtx, spanCtx)
	}

	start := time.Now()
	resp, err := sendHandoff(callCtx, p.rpc, entries)
	endSpan(span, err)
	c.observe("Handoff", start, err)
	if err != nil {
		return nil, c.callError(ctx, addr, err)
	}
	return resp, nil
}

func sendHandoff(ctx context.Context, rpc peerpb.PeerClient, entries []*peerpb.Entry) (*peerpb.HandoffResponse, error) {
	stream, err := rpc.Handoff(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := stream.Send(e); err != nil {
			if errors.Is(err, io.EOF) {
				// The server ended the stream early; its status is what
				// CloseAndRecv returns.
				break
			}
			return nil, err
		}
	}
	return stream.CloseAndRecv()
}

// unary is the path of every unary call: find the connection, bound the
// call, send it, count it, map its error.
func unary[Req, Resp any](c *Client, ctx context.Context, addr, method string, req Req,
	call func(peerpb.PeerClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	p, err := c.conn(addr)
	if err != nil {
		var zero Resp
		return zero, err
	}
	callCtx, cancel := c.callContext(ctx)
	spanCtx, span := c.startClient(ctx, method, addr)
	if c.tracer != nil {
		callCtx = withMetadata(callCtx, spanCtx)
	}
	start := time.Now()
	resp, err := call(p.rpc, callCtx, req)
	cancel()
	c.observe(method, start, err)
	endSpan(span, err)
	if err != nil {
		var zero Resp
		return zero, c.callError(ctx, addr, err)
	}
	return resp, nil
}

func noCancel() {}

// callContext applies CallTimeout to a ctx without a deadline.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, c.callTimeout)
}

func (c *Client) observe(method string, start time.Time, err error) {
	if c.onCall != nil {
		c.onCall(method, codeName(err), time.Since(start))
	}
}

// callError maps the error of a call sent with the caller's ctx.
func (c *Client) callError(ctx context.Context, addr string, err error) error {
	err = fromStatus(ctx, addr, err)
	if c.closed.Load() && IsUnreachable(err) {
		// Close closed the connection under the call.
		return ErrClosed
	}
	return err
}
