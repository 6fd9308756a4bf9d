package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/corralcache/corral/transport/peerpb"
)

// sniffListener serves framed connections (frame.go) itself and hands every other one to
// gRPC, on one port: it reads the first len(framePreface) bytes of each connection, within
// the handshake timeout, and gRPC reads them again from the connection it is given. With
// TLS, a framed connection's preface is followed by a TLS handshake (the Server's config,
// so the same checks of the peer's certificate), within the same timeout, and its frames
// travel inside TLS. Each connection is sniffed on a goroutine of its own, so a slow one
// holds up no other.
type sniffListener struct {
	lis       net.Listener
	p         *peerService
	timeout   time.Duration // ServerConfig.HandshakeTimeout
	onTimeout func()
	tls       *tls.Config // ServerConfig.TLS; nil: plaintext

	conns chan net.Conn // to gRPC
	done  chan struct{} // closed by Close
	once  sync.Once
	errc  chan struct{} // closed when the accept loop ended, with err set
	err   error

	mu       sync.Mutex // guards sniffing
	sniffing map[net.Conn]struct{}
}

// newSniffListener starts accepting on lis; p.framedWG counts the accept loop and the
// sniffing goroutines.
func newSniffListener(lis net.Listener, p *peerService, timeout time.Duration, onTimeout func(), tlsConfig *tls.Config) *sniffListener {
	l := &sniffListener{lis: lis, p: p, timeout: timeout, onTimeout: onTimeout, tls: tlsConfig,
		conns: make(chan net.Conn), done: make(chan struct{}), errc: make(chan struct{}),
		sniffing: make(map[net.Conn]struct{})}
	p.framedWG.Add(1)
	go func() { defer p.framedWG.Done(); l.acceptLoop() }()
	return l
}

func (l *sniffListener) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.lis.Accept()
		if err != nil {
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of file descriptors, say: wait and try again, as gRPC's Serve does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-l.done:
				}
			}
			l.err = err
			close(l.errc)
			return
		}
		delay = 0
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			c.Close()
			continue
		default:
		}
		l.sniffing[c] = struct{}{}
		l.p.framedWG.Add(1)
		l.mu.Unlock()
		go func() { defer l.p.framedWG.Done(); l.sniff(c) }()
	}
}

// sniff reads c's first bytes and serves it as a framed connection, or hands it to gRPC.
func (l *sniffListener) sniff(c net.Conn) {
	fc, prefix, err := l.handshake(c)
	l.mu.Lock()
	delete(l.sniffing, c)
	l.mu.Unlock()
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			l.onTimeout()
		}
		c.Close()
		return
	}
	if fc != nil {
		l.p.serveFramed(fc)
		return
	}
	hc := &handshakeConn{Conn: &prefixConn{Conn: c, prefix: prefix}, onTimeout: l.onTimeout}
	select {
	case l.conns <- hc:
	case <-l.done:
		c.Close()
	}
}

// handshake reads c's first bytes, by the handshake timeout. A framed connection's preface is
// answered (and with TLS, the TLS handshake done): it returns the connection to read frames
// from. Any other connection is gRPC's: it returns the bytes read, for gRPC to read again.
func (l *sniffListener) handshake(c net.Conn) (framed net.Conn, prefix []byte, err error) {
	c.SetDeadline(time.Now().Add(l.timeout))
	var got [len(framePreface)]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return nil, nil, err
	}
	if string(got[:]) != framePreface {
		c.SetDeadline(time.Time{})
		return nil, got[:], nil
	}
	if _, err := io.WriteString(c, framePreface); err != nil {
		return nil, nil, err
	}
	framed = c
	if l.tls != nil {
		tc := tls.Server(c, l.tls)
		if err := tc.Handshake(); err != nil {
			return nil, nil, err
		}
		framed = tc
	}
	c.SetDeadline(time.Time{})
	return framed, nil, nil
}

// Accept returns the next connection for gRPC.
func (l *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-l.errc:
		return nil, l.err
	}
}

// Close stops accepting and closes the connections being sniffed; the framed connections
// already served are the Server's to end (Stop).
func (l *sniffListener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.sniffing {
			c.Close()
		}
		l.mu.Unlock()
		err = l.lis.Close()
	})
	return err
}

func (l *sniffListener) Addr() net.Addr { return l.lis.Addr() }

// prefixConn is a connection whose first bytes were read already: Read returns them first.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// serveFramed serves a framed connection until it ends or the Server stops.
func (p *peerService) serveFramed(c net.Conn) {
	ctx, cancel := context.WithCancel(peer.NewContext(context.Background(),
		&peer.Peer{Addr: c.RemoteAddr(), LocalAddr: c.LocalAddr()}))
	p.framedMu.Lock()
	if p.framedClosed {
		p.framedMu.Unlock()
		cancel()
		c.Close()
		return
	}
	if p.framedConns == nil {
		p.framedConns = make(map[net.Conn]context.CancelFunc)
	}
	p.framedConns[c] = cancel
	p.framedMu.Unlock()

	f := newFramed[*peerpb.GetReply](c, newFrameReader(c), p.maxMessage, newGetCall)
	p.serveStream(ctx, f)

	p.framedMu.Lock()
	delete(p.framedConns, c)
	p.framedMu.Unlock()
	cancel()
	c.Close() // ends the receive loop's Recv
}

// closeFramed ends every framed connection at once, cancelling the calls running on them,
// and refuses new ones: Stop's ctx has ended.
func (p *peerService) closeFramed() {
	p.framedMu.Lock()
	defer p.framedMu.Unlock()
	p.framedClosed = true
	for c, cancel := range p.framedConns {
		cancel()
		c.Close()
	}
}
