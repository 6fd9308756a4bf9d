package peer

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// openTransport returns the transport gossip runs on and the port it is bound to: s.Transport
// when set, else a new transport on real sockets.
func openTransport(s settings, logger *log.Logger) (memberlist.NodeAwareTransport, int, error) {
	if s.Transport == nil {
		tr, err := newTransport(s.BindAddr, s.BindPort, s.AdvertisePort, logger)
		if err != nil {
			return nil, 0, err
		}
		return tr, tr.GetAutoBindPort(), nil
	}
	port := s.BindPort
	switch t := s.Transport.(type) {
	case interface{ GetAutoBindPort() int }:
		port = t.GetAutoBindPort()
	case interface{ Port() int }:
		port = t.Port()
	}
	if port == 0 || (s.BindPort != 0 && port != s.BindPort) {
		return nil, 0, fmt.Errorf("Config.Transport is bound to port %d, BindPort is %d", port, s.BindPort)
	}
	return s.Transport, port, nil
}

// transport is memberlist's own NetTransport with three changes:
//
//   - It is created here rather than inside memberlist.Create, so that AdvertisePort is honored
//     even when BindPort is 0 (memberlist overwrites AdvertisePort with the picked port) and when
//     AdvertiseAddr is "" (memberlist then ignores AdvertisePort).
//   - Its outgoing streams (joins, push/pull, TCP pings) are dialed with a context that Shutdown
//     cancels, and Shutdown closes the ones still open, so Close never waits for a dial or a read
//     to an unresponsive seed to time out (memberlist's own dial cannot be cancelled).
//   - Nothing else: packets and incoming streams are NetTransport's.
type transport struct {
	*memberlist.NetTransport

	advertisePort int // 0 = the bound port

	ctx    context.Context // cancelled by Shutdown
	cancel context.CancelFunc

	mu sync.Mutex
	// guards conns
	conns map[*trackedConn]struct{}
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// newTransport binds addr:port (port 0 = pick one). Binding port 0 is racy, because the port the
// kernel picks for TCP must also be free for UDP; like memberlist, it retries a few times.
func newTransport(bindAddr string, port, advertisePort int, logger *log.Logger) (*transport, error) {
	nc := &memberlist.NetTransportConfig{
		BindAddrs: []string{bindAddr},
		BindPort:  port,
		Logger:    logger,
	}
	attempts := 1
	if port == 0 {
		attempts = 10
	}
	var nt *memberlist.NetTransport
	var err error
	for range attempts {
		nt, err = memberlist.NewNetTransport(nc)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", net.JoinHostPort(bindAddr, fmt.Sprint(port)), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &transport{
		NetTransport:  nt,
		advertisePort: advertisePort,
		ctx:           ctx,
		cancel:        cancel,
		conns:         make(map[*trackedConn]struct{}),
	}, nil
}

// FinalAdvertiseAddr is NetTransport's, with the port replaced by advertisePort when set.
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	addr, p, err := t.NetTransport.FinalAdvertiseAddr(ip, port)
	if err != nil {
		return nil, 0, err
	}
	if t.advertisePort != 0 {
		p = t.advertisePort
	}
	return addr, p, nil
}

// DialTimeout is DialAddressTimeout without a node name.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout dials a.Addr over TCP; Shutdown aborts the dial and closes the connection.
func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(t.ctx, "tcp", a.Addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Shutdown may have closed the tracked connections between the dial and here.
	if t.ctx.Err() != nil {
		c.Close()
		return nil, net.ErrClosed
	}
	t.conns[tc] = struct{}{}
	return tc, nil
}

// Shutdown aborts dials, closes outgoing streams, then shuts NetTransport down. memberlist calls
// it once, from Memberlist.Shutdown.
func (t *transport) Shutdown() error {
	t.cancel()
	t.mu.Lock()
	conns := t.conns
	t.conns = make(map[*trackedConn]struct{})
	t.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	return t.NetTransport.Shutdown()
}

// trackedConn removes itself from its transport when closed.
type trackedConn struct {
	net.Conn
	t *transport
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}
