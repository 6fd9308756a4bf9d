package transport

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// DefaultHandshakeTimeout bounds how long a new peer connection may take to complete its
// handshake (TLS, if any, and HTTP/2's preface and settings) before the Server closes it:
// peers on a pod network do it in milliseconds, and a connection that sends nothing — a
// port scan, a slowloris — must not hold a goroutine and a socket for gRPC's default of
// 120 s.
const DefaultHandshakeTimeout = 5 * time.Second

// DefaultMaxConcurrentStreams bounds the calls (HTTP/2 streams) one peer connection may have
// open at once on a Server; a peer's calls past it wait, within their deadlines, for one to
// end. A peer's Gets all share one stream (MaxStreamCalls bounds those), so this bounds its
// writes, invalidations, hand-offs and long-polls: 256 is far above what one member sends.
const DefaultMaxConcurrentStreams = 256

// handshakeListener marks its connections so that one whose handshake runs out of time is
// counted (ServerConfig.OnLimit, "peer_handshake"): gRPC sets a deadline on a new connection
// for its handshake and clears it when the handshake is done, so a read that times out
// before the deadline is cleared is a handshake that took too long.
type handshakeListener struct {
	net.Listener
	onTimeout func()
}

func (l handshakeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c, onTimeout: l.onTimeout}, nil
}

type handshakeConn struct {
	net.Conn
	onTimeout func()
	done      atomic.Bool // the handshake's deadline was cleared, or a timeout counted
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	var ne net.Error
	if err != nil && !c.done.Load() && errors.As(err, &ne) && ne.Timeout() && c.done.CompareAndSwap(false, true) {
		c.onTimeout()
	}
	return n, err
}

func (c *handshakeConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.done.Store(true)
	}
	return c.Conn.SetDeadline(t)
}
