package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/corralcache/corral/transport/peerpb"
)

// A peer's Get stream is opened by the first Get (peerConn.stream): framed when the peer
// speaks framing, on the gRPC connection when it does not (open), and a peer without
// GetStream is asked with unary calls instead (getOnStream). The Get after it broke opens
// another — at once, or once a backoff has passed after an opening failed — and Forget and
// Close end it (closeStream). Client.conn makes the peerConns; Forget and Close drop them
// (pool.go).

// peerConn is one peer's connection, the generated client on it and its Get stream.
type peerConn struct {
	addr   string
	cc     *grpc.ClientConn
	rpc    peerpb.PeerClient
	client *Client

	// mux is the open Get stream, or nil before the first Get; once broken, the next Get
	// replaces it (stream). Read without mu on the hot path.
	mux atomic.Pointer[muxStream]
	// unaryGets is set once the peer answered GetStream with Unimplemented (an older
	// corral): its Gets are unary calls from then on.
	unaryGets atomic.Bool
	// unframed is set once the peer answered a framed stream's preface with something else
	// (an older corral): its Gets go on its gRPC stream from then on.
	unframed atomic.Bool

	mu sync.Mutex // guards opening, openErr, backoff, retryAt and closed, and replacing mux
	// opening is closed when the opening of a stream in progress ends; nil when none is.
	opening chan struct{}
	openErr error         // why the last opening failed; nil after one succeeded
	backoff time.Duration // the wait after openErr before trying again
	retryAt time.Time     // when an opening may be tried again
	closed  error         // why closeStream closed p (Forget, Close); nil while open

	// late is the lateness the peer told in its answers (lateness.go): the silence bounds of
	// questions to it stretch by it.
	late toldLateness
}

// getOnStream is Client.Get's call on p: on the stream, or as a unary call to a peer that
// has no GetStream (one running an older corral during a rolling upgrade).
func (p *peerConn) getOnStream(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	if !p.unaryGets.Load() {
		s, err := p.stream(ctx)
		if err == nil {
			resp, err := s.get(ctx, req)
			if err == errStaleStream {
				resp, err = p.getAgain(ctx, req)
			}
			if err == errAskUnary {
				return p.unaryGet(ctx, req) // a large value (ServerConfig.MaxStreamAnswer)
			}
			if !isUnimplemented(err) {
				return resp, err
			}
		} else if !isUnimplemented(err) {
			return nil, err
		}
		p.unaryGets.Store(true)
	}
	return p.unaryGet(ctx, req)
}

// getAgain sends a Get again, once, on a new stream, after errStaleStream.
func (p *peerConn) getAgain(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	s, err := p.stream(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.get(ctx, req)
	if err == errStaleStream {
		return nil, s.failure()
	}
	return resp, err
}

// unaryGet is a Get sent as a unary call (a large value, or a peer without GetStream),
// watched by probes — the same Get as a Peek — unless it is a Peek itself, which waits on
// no work.
func (p *peerConn) unaryGet(ctx context.Context, req *peerpb.GetRequest) (*peerpb.GetResponse, error) {
	if req.GetPeek() && !req.GetWaitFill() { // a Peek that waits for a fill waits on work
		return p.rpc.Get(ctx, req)
	}
	var resp *peerpb.GetResponse
	probe := proto.CloneOf(req)
	probe.Peek, probe.WaitFill = true, false
	err := p.client.UntilSilent(ctx, p.addr, probe, func(ctx context.Context) error {
		var err error
		resp, err = p.rpc.Get(ctx, req)
		return err
	})
	return resp, err
}

// stream returns the open stream to the peer, opening one when there is none or the last
// broke. Concurrent first calls share one opening; a caller whose ctx ends stops waiting
// for it, and the stream opens for the next. After an opening fails, calls fail at once
// with its error until a backoff (100 ms, doubling to 2 s) has passed, so a peer that
// refuses streams is not asked for one per call; the connection's own reconnect backoff
// covers a peer that cannot be reached at all.
func (p *peerConn) stream(ctx context.Context) (*muxStream, error) {
	if s := p.mux.Load(); s != nil && !s.broken() {
		return s, nil
	}
	s, opening, err := p.startOpening()
	if s != nil || err != nil {
		return s, err
	}
	// A peer that does not complete a connection within the silence bound is as silent as
	// one that leaves a ping unanswered that long (a connection on a LAN takes a millisecond;
	// a lost SYN, a second): the caller gives up, and the opening goes on, up to
	// ConnectTimeout, for the calls after. So a Get waits on a silent peer at most the bound
	// either way, on an open stream or on its opening.
	var silent <-chan time.Time
	var bound time.Duration
	if sl := p.client.silence; sl.on() {
		bound = sl.boundFor(&p.late)
		t := time.NewTimer(bound)
		defer t.Stop()
		silent = t.C
	}
	select {
	case <-opening:
	case <-ctx.Done():
		return nil, fromContext(ctx.Err())
	case <-silent:
		return nil, unavailable("transport: no connection to %s within %v", p.addr, bound)
	}
	p.mu.Lock()
	openErr := p.openErr
	p.mu.Unlock()
	if openErr != nil {
		return nil, openErr
	}
	s = p.mux.Load()
	if s.broken() {
		// It opened and broke already (a peer without GetStream ends it at once): its
		// failure says why.
		return nil, s.failure()
	}
	return s, nil
}

// startOpening returns the open stream, or else the channel closed when the opening in
// progress ends, starting one unless an opening failed less than a backoff ago (its error).
func (p *peerConn) startOpening() (*muxStream, chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.mux.Load(); s != nil && !s.broken() {
		return s, nil, nil
	}
	if p.opening == nil {
		if p.closed != nil {
			return nil, nil, unavailable("transport: get stream closed: %v", p.closed)
		}
		if time.Now().Before(p.retryAt) {
			return nil, nil, p.openErr
		}
		if !p.client.startWork() {
			return nil, nil, unavailable("transport: client closed") // callError: ErrClosed
		}
		p.opening = make(chan struct{})
		go func() { defer p.client.wg.Done(); p.open() }()
	}
	return nil, p.opening, nil
}

// startWork counts a goroutine of a stream in wg unless the Client is closed: Close waits
// for wg, and an Add must not race with that Wait once the count is zero.
func (c *Client) startWork() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.wg.Add(1)
	return true
}

// open opens a stream: a framed one when the peer speaks framing (frame.go), a gRPC one
// otherwise. It is bounded by ConnectTimeout (a framed connection's
// dial and preface) or the connection's attempt (gRPC's), and ends when the connection is
// closed.
func (p *peerConn) open() {
	var s *muxStream
	var err error
	if p.client.framing && !p.unframed.Load() {
		s, err = p.openFramed()
		if errors.Is(err, errNoFraming) {
			p.unframed.Store(true) // an older corral: its Gets go on its gRPC stream
			s, err = nil, nil
		}
	}
	if s == nil && err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		var st peerpb.Peer_GetStreamClient
		st, err = p.rpc.GetStream(ctx)
		if err == nil {
			s = newMuxStream(st, cancel, p.client.maxMessage, p.client.maxStreamCalls, p.client.silence, &p.late, &p.client.wg)
		} else {
			cancel()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.closed != nil {
		// Forget or Close came while it opened: a framed connection is not closed with
		// the gRPC one, so end it here.
		s.breakWith(p.closed)
		err = s.failure()
	}
	if err != nil {
		p.openErr = err
		p.backoff = min(max(2*p.backoff, reconnectBaseBackoff), reconnectMaxBackoff)
		p.retryAt = time.Now().Add(p.backoff)
	} else {
		p.openErr, p.backoff, p.retryAt = nil, 0, time.Time{}
		p.mux.Store(s)
	}
	close(p.opening)
	p.opening = nil
}

// openFramed dials the peer and opens a framed stream on the new connection. Its errors
// but errNoFraming are Unavailable status errors (the peer is unreachable).
func (p *peerConn) openFramed() (*muxStream, error) {
	c := p.client
	ctx, cancel := context.WithTimeout(context.Background(), c.connectTimeout)
	defer cancel()
	conn, err := c.dialConn(ctx, p.addr)
	if err != nil {
		return nil, unavailable("transport: dial %s: %v", p.addr, err)
	}
	deadline, _ := ctx.Deadline()
	f, err := openFramed(conn, deadline, c.maxMessage, c.framedTLS(p.addr))
	if err != nil {
		conn.Close()
		if errors.Is(err, errNoFraming) {
			return nil, err
		}
		return nil, unavailable("transport: framed stream to %s: %v", p.addr, err)
	}
	s := newMuxStream(f, func() { conn.Close() }, c.maxMessage, c.maxStreamCalls, c.silence, &p.late, &c.wg)
	s.startKeepalive(c.keepaliveTime, c.keepaliveTimeout)
	return s, nil
}

// framedTLS returns the TLS config of a framed connection to addr, or nil without TLS: the
// Client's, naming the host dialed unless it names a server itself, as gRPC's TLS does.
func (c *Client) framedTLS(addr string) *tls.Config {
	if c.tls == nil || c.tls.ServerName != "" {
		return c.tls
	}
	cfg := c.tls.Clone()
	cfg.ServerName = addr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		cfg.ServerName = host
	}
	return cfg
}

// closeStream ends p's stream, if any, and any opened after; their calls fail as
// unreachable.
func (p *peerConn) closeStream(why error) {
	p.mu.Lock()
	p.closed = why
	p.mu.Unlock()
	if s := p.mux.Load(); s != nil {
		s.breakWith(why)
	}
}
