package transport

import (
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/corralcache/corral/transport/peerpb"
)

// conn returns the connection to addr, making it on first use. The common
// case is one lock-free map read; making a connection takes c.mu so that
// any number of concurrent first calls to one address share one connection.
func (c *Client) conn(addr string) (*peerConn, error) {
	if v, ok := c.conns.Load(addr); ok {
		return v.(*peerConn), nil
	}
	return c.dial(addr)
}

func (c *Client) dial(addr string) (*peerConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if addr == "" {
		return nil, fmt.Errorf("%w: empty peer address", ErrInvalidArgument)
	}
	// Another goroutine may have made it between our Load and the lock.
	if v, ok := c.conns.Load(addr); ok {
		return v.(*peerConn), nil
	}
	// grpc.NewClient does no I/O: the connection is made by the first call.
	// passthrough hands addr to the dialer unchanged, so a hostname is
	// resolved at each connection attempt rather than by gRPC's DNS
	// resolver and its 30s minimum re-resolution interval.
	cc, err := grpc.NewClient("passthrough:///"+addr, c.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	p := &peerConn{addr: addr, cc: cc, rpc: peerpb.NewPeerClient(cc), client: c}
	c.conns.Store(addr, p)
	if c.silence.on() {
		// From the first peer on, this node measures how late it runs: the silence bounds of
		// its questions to peers stretch by it (lateness.go). Close stops it.
		c.silence.late.start()
	}
	return p, nil
}

// Prepare starts connecting to addr in the background, unless a connection is open or
// being made, and returns at once: for a member that has just entered the view, so that the
// first question to it — often a new owner's warm pull, bounded by a peek's short timeout —
// does not wait for a connection (on a lossy network a lost SYN alone costs a second). A
// peer that refused a connection a moment ago is not dialled again before its backoff ends.
func (c *Client) Prepare(addr string) {
	p, err := c.conn(addr)
	if err != nil {
		return
	}
	if p.unaryGets.Load() { // an older corral, asked with unary calls: connect only
		p.cc.Connect()
		return
	}
	_, _, _ = p.startOpening() // an error is the next call's to report
}

// Forget closes the connection to addr and drops it, for a member that left
// or died. Calls in flight on it fail as unreachable; the next call to addr
// makes a new connection. Forgetting an unknown address does nothing.
func (c *Client) Forget(addr string) {
	c.mu.Lock()
	v, ok := c.conns.LoadAndDelete(addr)
	c.mu.Unlock()
	if ok {
		p := v.(*peerConn)
		p.closeStream(errForgotten)
		// The only error is "already closing", which cannot be: a peerConn
		// is closed once, by whoever removed it from conns.
		_ = p.cc.Close()
	}
}

// errForgotten is why Forget closed a connection: the calls on it fail as unreachable.
var errForgotten = fmt.Errorf("transport: connection closed (the member left)")

// Close closes every connection. Calls in flight fail with ErrClosed, and so
// does every call after. It is safe to call more than once; later calls
// return nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil
	}
	c.closed.Store(true)
	c.silence.late.stop()
	var conns []*peerConn
	c.conns.Range(func(k, v any) bool {
		conns = append(conns, v.(*peerConn))
		c.conns.Delete(k)
		return true
	})
	c.mu.Unlock()
	var errs []error
	for _, p := range conns {
		p.closeStream(ErrClosed)
		if err := p.cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	// The streams' readers and writers, and openings in progress, end with their
	// connections.
	c.wg.Wait()
	return errors.Join(errs...)
}
