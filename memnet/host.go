package memnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
)

// ErrHostDown is returned by Listen, NewTransport and DialContext on a host that has crashed and
// not restarted.
var ErrHostDown = errors.New("memnet: host is down")

// ErrHostUp is returned by Restart of a host that has not crashed.
var ErrHostUp = errors.New("memnet: host is up")

// Host is one machine on a Network, with one IP address. Its stream ports (Listen, the stream
// side of a Transport) and its packet ports (the packet side of a Transport) are separate
// spaces, as TCP's and UDP's are.
type Host struct {
	n  *Network
	ip netip.Addr

	// The fields below are guarded by n.mu.

	listeners map[int]acceptor   // stream ports
	endpoints map[int]*Transport // packet ports
	conns     map[*Conn]struct{} // connection ends on this host
	ephemeral int                // next local port to try for a dial or a port-0 bind
	paused    bool
	down      bool
	// generation counts the host's lives: Restart increments it, and anything made in an
	// earlier life (listeners, transports, conns) stays dead.
	generation int
}

// IP returns the host's address, e.g. "10.0.0.1".
func (h *Host) IP() string { return h.ip.String() }

// Addr returns "ip:port" on this host, e.g. "10.0.0.1:7946".
func (h *Host) Addr(port int) string { return netip.AddrPortFrom(h.ip, uint16(port)).String() }

func (h *Host) String() string { return h.ip.String() }

// Pause freezes the host, as SIGSTOP freezes a process, while its goroutines go on running:
// nothing it sends leaves it (packets are dropped, stream bytes wait), nothing sent to it is
// read (packets queue up to Config.PacketQueue, stream bytes wait, accepted connections wait in
// the accept queue) and its dials wait. Dials to it still complete, its kernel answering.
// Resume undoes it. Pausing a paused or crashed host does nothing.
func (h *Host) Pause() {
	h.setPaused(true)
}

// Resume undoes Pause: whatever waited moves at once, in the order it was sent.
func (h *Host) Resume() {
	h.setPaused(false)
}

func (h *Host) setPaused(p bool) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if h.down || h.paused == p {
		return
	}
	h.paused = p
	kind := EventResume
	if p {
		kind = EventPause
	}
	n.traceLocked(Event{Kind: kind, From: h.ip.String()})
	n.changedLocked()
}

// Paused reports whether the host is paused.
func (h *Host) Paused() bool {
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	return h.paused
}

// Down reports whether the host has crashed and not restarted.
func (h *Host) Down() bool {
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	return h.down
}

// Crash kills the host's process, its kernel staying up: every listener and Transport on it
// closes, and every connection end on it is closed (its own calls return net.ErrClosed) while
// the far end is reset (its reads and writes fail with ECONNRESET, once a packet could carry
// the reset across: at once after the link's delay, or when a cut between them heals). Packets
// queued for it are lost. While it is down, dials to it are refused and packets to it dropped.
// The goroutines of the software that ran on it are not stopped: that is the caller's to do
// (memberlist's Shutdown, grpc's Stop), and nothing they send reaches the network. Restart
// brings the host back. Crashing a host that is down does nothing.
func (h *Host) Crash() {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if h.down {
		return
	}
	h.down = true
	h.paused = false
	n.traceLocked(Event{Kind: EventCrash, From: h.ip.String()})
	for _, port := range sortedKeys(h.listeners) {
		h.listeners[port].closeLocked()
	}
	for _, port := range sortedKeys(h.endpoints) {
		h.endpoints[port].closeLocked()
	}
	conns := make([]*Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	slices.SortFunc(conns, func(a, b *Conn) int { return cmp.Compare(a.id, b.id) })
	for _, c := range conns {
		c.abortLocked()
	}
	n.changedLocked()
}

// Restart brings a crashed host back up under the same address, empty: no listener, no
// Transport, no connection. What was made before the crash stays dead. It returns ErrHostDown
// wrapped if the host is up.
func (h *Host) Restart() error {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if !h.down {
		return fmt.Errorf("%w: Restart of %s", ErrHostUp, h.ip)
	}
	h.down = false
	h.generation++
	n.traceLocked(Event{Kind: EventRestart, From: h.ip.String()})
	n.changedLocked()
	return nil
}

// Listen returns a stream listener on port (0 = a free port) of this host, for a gRPC server
// or anything else that takes a net.Listener. It fails with EADDRINUSE when the port is taken
// and with ErrHostDown when the host is down.
func (h *Host) Listen(port int) (*Listener, error) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	port, err := h.bindLocked("listen", port, false)
	if err != nil {
		return nil, err
	}
	l := newListener(h, port)
	h.listeners[port] = l
	n.traceLocked(Event{Kind: EventListen, From: l.addr.String()})
	return l, nil
}

// bindLocked checks that port is free on the host (both spaces when both), or picks a free one
// for port 0.
func (h *Host) bindLocked(op string, port int, both bool) (int, error) {
	if h.down {
		return 0, fmt.Errorf("memnet: %s on %s: %w", op, h.ip, ErrHostDown)
	}
	if port < 0 || port > 65535 {
		return 0, fmt.Errorf("memnet: %s on %s: port %d out of range", op, h.ip, port)
	}
	free := func(p int) bool {
		if _, ok := h.listeners[p]; ok {
			return false
		}
		if _, ok := h.endpoints[p]; ok && both {
			return false
		}
		return true
	}
	if port != 0 {
		if !free(port) {
			addr := &net.TCPAddr{IP: h.ip.AsSlice(), Port: port}
			return 0, &net.OpError{Op: op, Net: "tcp", Addr: addr, Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
		}
		return port, nil
	}
	for range 65536 - firstEphemeralPort {
		p := h.nextEphemeralLocked()
		if free(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("memnet: %s on %s: no free port", op, h.ip)
}

// nextEphemeralLocked returns the next port of the ephemeral range, wrapping around.
func (h *Host) nextEphemeralLocked() int {
	p := h.ephemeral
	h.ephemeral++
	if h.ephemeral > 65535 {
		h.ephemeral = firstEphemeralPort
	}
	return p
}

// DialContext connects to addr ("ip:port", an IP address and a port) from this host, for the
// software of its current life; its signature is grpc.WithContextDialer's. It returns once the
// handshake has crossed the link both ways, so it takes at least the round-trip delay. It waits
// while the path is cut or this host is paused, until ctx ends or Config.ConnectTimeout
// passes (an error that is a timeout, wrapping os.ErrDeadlineExceeded, or wrapping ctx.Err()
// when ctx was cancelled). A dial to a port nobody listens on, or to a host that is down, is
// refused (ECONNREFUSED); a dial to an address with no host waits, as a SYN into the void
// would. A host name is not resolved: it fails as an unknown host.
func (h *Host) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	c, err := h.dial(ctx, addr, nil)
	if err != nil {
		return nil, err // not a nil *Conn in a non-nil net.Conn
	}
	return c, nil
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
