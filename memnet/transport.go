package memnet

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Transport is a memberlist transport on one port of a host: packets (memberlist's UDP) and
// streams (its TCP) on that port, as memberlist's NetTransport binds both. Give it to
// memberlist in Config.Transport; memberlist calls Shutdown when it shuts down.
//
// A Transport lives as long as the host's life it was made in: a crash closes it for good
// (its sends fail, nothing arrives), and a restarted host needs a new one.
type Transport struct {
	n    *Network
	h    *Host
	port int
	udp  *net.UDPAddr
	tcp  *net.TCPAddr

	packetCh chan *memberlist.Packet
	streamCh chan net.Conn

	ctx    context.Context // cancelled by Shutdown: aborts dials in progress
	cancel context.CancelFunc
	done   chan struct{} // closed by Shutdown: stops the pump
	pumped chan struct{} // closed when the pump has returned
	once   sync.Once

	// The fields below are guarded by n.mu.

	inbox   inbox // packets and accepted streams, in arrival order
	closed  bool  // by Shutdown or the host's crash
	conns   map[*Conn]struct{}
	wake    chan struct{}
	waiting bool
}

var (
	_ memberlist.NodeAwareTransport = (*Transport)(nil)
	_ acceptor                      = (*Transport)(nil)
)

// NewTransport returns a memberlist transport on port of this host (0 = a port free for both
// packets and streams; Port tells which). It starts one goroutine, which Shutdown stops. It
// fails with EADDRINUSE when the port is taken and ErrHostDown when the host is down.
func (h *Host) NewTransport(port int) (*Transport, error) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	port, err := h.bindLocked("listen", port, true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		n:        n,
		h:        h,
		port:     port,
		udp:      &net.UDPAddr{IP: h.ip.AsSlice(), Port: port},
		tcp:      &net.TCPAddr{IP: h.ip.AsSlice(), Port: port},
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		pumped:   make(chan struct{}),
		conns:    make(map[*Conn]struct{}),
		wake:     make(chan struct{}),
	}
	h.listeners[port] = t
	h.endpoints[port] = t
	n.traceLocked(Event{Kind: EventListen, From: t.udp.String(), Detail: "transport"})
	go t.pump()
	return t, nil
}

// Host returns the host the transport is on.
func (t *Transport) Host() *Host { return t.h }

// Port returns the port the transport is bound to.
func (t *Transport) Port() int { return t.port }

// Addr returns "ip:port", the address to give other members as a seed.
func (t *Transport) Addr() string { return t.udp.String() }

// FinalAdvertiseAddr returns what memberlist advertises, as NetTransport decides it: ip and
// port when ip is set (it must be an IP address), else this host's address and the bound port.
func (t *Transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip == "" {
		return t.h.ip.AsSlice(), t.port, nil
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, 0, fmt.Errorf("memnet: advertise address %q: %w", ip, err)
	}
	return a.AsSlice(), port, nil
}

// WriteTo is WriteToAddress without a node name.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends one packet to a.Addr ("ip:port"; the name is not used: the network
// routes by address). It never blocks. As over UDP, a packet that cannot arrive is dropped
// without an error: see the package documentation for when. It fails when b is larger than
// Config.MaxPacket (EMSGSIZE) or the transport is closed (net.ErrClosed).
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	n := t.n
	opErr := func(err error) error {
		return &net.OpError{Op: "write", Net: "udp", Source: t.udp, Addr: udpAddr(a.Addr), Err: err}
	}
	ap, err := netip.ParseAddrPort(a.Addr)
	if err != nil {
		return time.Time{}, opErr(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if t.closed {
		return time.Time{}, opErr(net.ErrClosed)
	}
	if len(b) > n.cfg.MaxPacket {
		return time.Time{}, opErr(errMsgSize)
	}
	n.stats.PacketsSent++
	to := a.Addr
	drop := func(why string) (time.Time, error) {
		n.stats.PacketsDropped++
		n.traceLocked(Event{Time: now, Kind: EventDrop, From: t.udp.String(), To: to, Size: len(b), Detail: why})
		return now, nil
	}
	h := t.h
	if h.paused {
		return drop("sender paused")
	}
	dest := n.byIP[ap.Addr().Unmap()]
	if dest == nil {
		return drop("no such host")
	}
	if dest.down {
		return drop("host down")
	}
	ep := dest.endpoints[int(ap.Port())]
	if ep == nil {
		return drop("port closed")
	}
	if n.cuts[pair{h, dest}] {
		return drop("cut")
	}
	l := n.linkLocked(h, dest)
	if n.lostLocked(h, dest, l) {
		return drop("loss")
	}
	if ep.inbox.packets >= n.cfg.PacketQueue {
		return drop("queue full")
	}
	at := now.Add(n.delayLocked(h, dest, l))
	ep.pushLocked(&item{at: at, from: h, pkt: &memberlist.Packet{Buf: slices.Clone(b), From: t.udp}})
	n.traceLocked(Event{Time: now, Kind: EventSend, From: t.udp.String(), To: to, Size: len(b)})
	return now, nil
}

// PacketCh returns the channel on which packets to this transport arrive. It is never closed.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout is DialAddressTimeout without a node name.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout opens a stream to a.Addr from this transport's host, as Host.DialContext
// does, within timeout (0 = Config.ConnectTimeout). Shutdown aborts it, and closes the
// connection if it outlives the transport.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	ctx := t.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c, err := t.h.dial(ctx, a.Addr, t)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// StreamCh returns the channel on which streams dialled to this transport arrive. It is never
// closed.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown closes the transport: the port is free again, sends fail, dials in progress end, and
// every connection it dialled or accepted is closed; it returns when its goroutine has. It is
// safe to call more than once.
func (t *Transport) Shutdown() error {
	t.once.Do(func() {
		n := t.n
		n.mu.Lock()
		t.closeLocked()
		conns := make([]*Conn, 0, len(t.conns))
		for c := range t.conns {
			conns = append(conns, c)
		}
		n.mu.Unlock()
		t.cancel()
		close(t.done)
		<-t.pumped
		slices.SortFunc(conns, func(a, b *Conn) int { return cmp.Compare(a.id, b.id) })
		for _, c := range conns {
			c.Close() // an error only says it was closed already
		}
	})
	return nil
}

// closeLocked closes the transport for sends and arrivals; what is queued is lost.
func (t *Transport) closeLocked() {
	if t.closed {
		return
	}
	n := t.n
	t.closed = true
	h := t.h
	if cur, ok := h.listeners[t.port]; ok && cur == acceptor(t) {
		delete(h.listeners, t.port)
	}
	if h.endpoints[t.port] == t {
		delete(h.endpoints, t.port)
	}
	for _, it := range t.inbox.items {
		if it.conn != nil {
			it.conn.abortLocked()
		} else {
			n.stats.PacketsDropped++
		}
	}
	t.inbox = inbox{}
	t.signalLocked()
	n.traceLocked(Event{Kind: EventUnlisten, From: t.udp.String(), Detail: "transport"})
}

func (t *Transport) enqueueLocked(c *Conn) bool {
	if t.closed || t.inbox.len()-t.inbox.packets >= t.n.cfg.Backlog {
		return false
	}
	c.owner = t
	t.conns[c] = struct{}{}
	t.pushLocked(&item{at: time.Now(), conn: c})
	return true
}

func (t *Transport) pushLocked(it *item) {
	it.seq = t.n.nextID
	t.n.nextID++
	heap.Push(&t.inbox, it)
	t.signalLocked()
}

func (t *Transport) signalLocked() {
	if t.waiting {
		close(t.wake)
		t.wake = make(chan struct{})
		t.waiting = false
	}
}

// pump hands what arrives to memberlist: each packet and stream in arrival order, once its time
// has come and while the host is not paused.
func (t *Transport) pump() {
	defer close(t.pumped)
	n := t.n
	for {
		n.mu.Lock()
		it, next := t.nextLocked()
		var wake <-chan struct{}
		if it == nil {
			t.waiting = true
			wake = t.wake
		}
		changed := n.changed
		n.mu.Unlock()

		switch {
		case it == nil:
			var timeout <-chan time.Time
			if !next.IsZero() {
				timer := time.NewTimer(time.Until(next))
				timeout = timer.C
				select {
				case <-wake:
				case <-changed:
				case <-timeout:
				case <-t.done:
				}
				timer.Stop()
			} else {
				select {
				case <-wake:
				case <-changed:
				case <-t.done:
				}
			}
		case it.pkt != nil:
			select {
			case t.packetCh <- it.pkt:
			case <-t.done:
			}
		default:
			select {
			case t.streamCh <- it.conn:
			case <-t.done:
				it.conn.Close()
			}
		}
		select {
		case <-t.done:
			return
		default:
		}
	}
}

// nextLocked pops the next item to hand over, or returns when to look again (zero = when woken).
func (t *Transport) nextLocked() (*item, time.Time) {
	n := t.n
	if t.closed || t.h.paused {
		return nil, time.Time{}
	}
	now := time.Now()
	for t.inbox.len() > 0 {
		it := t.inbox.items[0]
		if now.Before(it.at) {
			return nil, it.at
		}
		heap.Pop(&t.inbox)
		if it.conn != nil {
			return it, time.Time{}
		}
		if n.cuts[pair{it.from, t.h}] {
			// Cut while in flight.
			n.stats.PacketsDropped++
			n.traceLocked(Event{Time: now, Kind: EventDrop, From: it.pkt.From.String(), To: t.udp.String(),
				Size: len(it.pkt.Buf), Detail: "cut in flight"})
			continue
		}
		it.pkt.Timestamp = now
		n.stats.PacketsDelivered++
		n.traceLocked(Event{Time: now, Kind: EventDeliver, From: it.pkt.From.String(), To: t.udp.String(),
			Size: len(it.pkt.Buf)})
		return it, time.Time{}
	}
	return nil, time.Time{}
}

// item is a packet or an accepted stream waiting in a Transport's inbox.
type item struct {
	at   time.Time // when it arrives
	seq  uint64    // ties broken by the order of sending
	from *Host     // the sender of a packet
	pkt  *memberlist.Packet
	conn *Conn
}

// inbox is a heap of items by (at, seq).
type inbox struct {
	items   []*item
	packets int // items with a pkt
}

func (q *inbox) len() int { return len(q.items) }

func (q inbox) Len() int { return len(q.items) }
func (q inbox) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.seq < b.seq
}
func (q inbox) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *inbox) Push(x any) {
	it := x.(*item)
	if it.pkt != nil {
		q.packets++
	}
	q.items = append(q.items, it)
}
func (q *inbox) Pop() any {
	k := len(q.items) - 1
	it := q.items[k]
	q.items[k] = nil
	q.items = q.items[:k]
	if it.pkt != nil {
		q.packets--
	}
	return it
}

// udpAddr returns addr as a *net.UDPAddr when it is "ip:port", for error messages.
func udpAddr(addr string) net.Addr {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return net.UDPAddrFromAddrPort(ap)
	}
	return nil
}
