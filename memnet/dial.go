package memnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"
)

// dial connects from h to addr. When t is not nil the dial is the Transport's: it fails once t
// is closed (by Shutdown or a crash), even if the host restarted since.
func (h *Host) dial(ctx context.Context, addr string, t *Transport) (*Conn, error) {
	n := h.n
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: tcpAddr(addr), Err: err}
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		host, _, serr := net.SplitHostPort(addr)
		if serr != nil {
			return nil, opErr(serr)
		}
		return nil, opErr(&net.DNSError{Err: "no such host", Name: host, IsNotFound: true})
	}
	ip, port := ap.Addr().Unmap(), int(ap.Port())

	deadline := time.Now().Add(n.cfg.ConnectTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.Dials++
	gen := h.generation
	n.traceLocked(Event{Kind: EventDial, From: h.ip.String(), To: addr})
	timedOut := func(err error) error {
		n.stats.DialsTimedOut++
		n.traceLocked(Event{Kind: EventDialTimeout, From: h.ip.String(), To: addr})
		return opErr(err)
	}
	for attempt := 0; ; {
		if h.down || h.generation != gen {
			return nil, opErr(ErrHostDown)
		}
		if t != nil && t.closed {
			return nil, opErr(net.ErrClosed)
		}
		now := time.Now()
		if !now.Before(deadline) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, timedOut(timeoutError{})
		}
		if err := ctx.Err(); err != nil {
			return nil, timedOut(err)
		}
		dest := n.byIP[ip]
		if dest == nil || !n.handshakeFlowsLocked(h, dest) {
			// No path, or no host at all: the SYNs go unanswered until the network changes.
			n.waitLocked(nil, deadline, ctx.Done())
			continue
		}
		// One round trip: SYN there, SYN-ACK (or RST) back. A lost one is sent again after
		// the retransmission timeout, which doubles each time.
		there, back := n.linkLocked(h, dest), n.linkLocked(dest, h)
		wait := n.delayLocked(h, dest, there) + n.delayLocked(dest, h, back)
		lost := n.lostLocked(h, dest, there) || n.lostLocked(dest, h, back)
		if lost {
			wait = synRetransmit << attempt
			attempt++
		}
		if wait > 0 {
			n.sleepLocked(time.Now().Add(wait), deadline, ctx.Done())
			if !time.Now().Before(deadline) || ctx.Err() != nil {
				continue // reported at the top
			}
		}
		if lost || !n.handshakeFlowsLocked(h, dest) || h.down || h.generation != gen || (t != nil && t.closed) {
			// Lost, or cut while on its way: the next attempt waits for the path. (Or this end
			// died meanwhile, which the top reports: a Transport's Shutdown closes it before
			// it cancels ctx, so a dial waking here in between must not make a connection
			// that nobody would close.)
			continue
		}
		acc := dest.listeners[port]
		if dest.down || acc == nil {
			n.stats.DialsRefused++
			n.traceLocked(Event{Kind: EventRefuse, From: h.ip.String(), To: addr})
			return nil, opErr(errRefused)
		}
		c, s := n.newConnLocked(h, dest, port)
		if !acc.enqueueLocked(s) {
			c.unregisterLocked()
			s.unregisterLocked()
			n.stats.DialsRefused++
			n.traceLocked(Event{Kind: EventRefuse, From: h.ip.String(), To: addr, Detail: "accept queue full"})
			return nil, opErr(errRefused)
		}
		if t != nil {
			c.owner = t
			t.conns[c] = struct{}{}
		}
		n.traceLocked(Event{Kind: EventConnect, From: c.local.String(), To: addr})
		return c, nil
	}
}

// sleepLocked releases n.mu until until, deadline or done, whichever comes first, and takes it
// again. Unlike waitLocked, a change of the network does not end it.
func (n *Network) sleepLocked(until, deadline time.Time, done <-chan struct{}) {
	t := time.NewTimer(time.Until(earliest(until, deadline)))
	defer t.Stop()
	n.mu.Unlock()
	select {
	case <-t.C:
	case <-done:
	}
	n.mu.Lock()
}

// tcpAddr returns addr as a *net.TCPAddr when it is "ip:port", for error messages.
func tcpAddr(addr string) net.Addr {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return nil
}
