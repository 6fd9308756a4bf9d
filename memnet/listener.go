package memnet

import (
	"net"
	"time"
)

// acceptor is what a dial connects to: a Listener, or the stream side of a Transport.
type acceptor interface {
	// enqueueLocked takes the acceptor's end of a new connection, or reports false when the
	// accept queue is full or closed (the dial is then refused).
	enqueueLocked(c *Conn) bool
	// closeLocked closes the acceptor; connections not yet accepted are aborted.
	closeLocked()
}

// Listener is a stream listener on one port of a host, for a gRPC server (Serve) or anything
// else that takes a net.Listener.
type Listener struct {
	h    *Host
	addr *net.TCPAddr
	port int

	// The fields below are guarded by h.n.mu.

	backlog []*Conn // connected, not yet accepted
	closed  bool    // by Close or the host's crash
	wake    chan struct{}
	waiting bool
}

var (
	_ net.Listener = (*Listener)(nil)
	_ acceptor     = (*Listener)(nil)
)

func newListener(h *Host, port int) *Listener {
	return &Listener{
		h:    h,
		addr: &net.TCPAddr{IP: h.ip.AsSlice(), Port: port},
		port: port,
		wake: make(chan struct{}),
	}
}

// Accept waits for a connection and returns its end on this host, a *Conn. While the host is
// paused, connections wait in the queue. After Close, or the host's crash, it returns an error
// wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	n := l.h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		if l.closed {
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
		}
		if !l.h.paused && len(l.backlog) > 0 {
			c := l.backlog[0]
			l.backlog[0] = nil
			l.backlog = l.backlog[1:]
			n.traceLocked(Event{Kind: EventAccept, From: c.remote.String(), To: c.local.String()})
			return c, nil
		}
		l.waiting = true
		n.waitLocked(l.wake, time.Time{}, nil)
	}
}

func (l *Listener) enqueueLocked(c *Conn) bool {
	if l.closed || len(l.backlog) >= l.h.n.cfg.Backlog {
		return false
	}
	l.backlog = append(l.backlog, c)
	l.signalLocked()
	return true
}

func (l *Listener) signalLocked() {
	if l.waiting {
		close(l.wake)
		l.wake = make(chan struct{})
		l.waiting = false
	}
}

// Close stops listening: Accept returns an error, connections not yet accepted are reset, and
// the port is free for another Listen. Closing twice returns an error wrapping net.ErrClosed.
func (l *Listener) Close() error {
	n := l.h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if l.closed {
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
	l.closeLocked()
	return nil
}

func (l *Listener) closeLocked() {
	l.closed = true
	if cur, ok := l.h.listeners[l.port]; ok && cur == acceptor(l) {
		delete(l.h.listeners, l.port)
	}
	for _, c := range l.backlog {
		c.abortLocked()
	}
	l.backlog = nil
	l.signalLocked()
	l.h.n.traceLocked(Event{Kind: EventUnlisten, From: l.addr.String()})
}

// Addr returns the listener's address, a *net.TCPAddr ("10.0.0.1:7947").
func (l *Listener) Addr() net.Addr { return l.addr }
