package memnet

import (
	"io"
	"net"
	"os"
	"time"
)

// Conn is one end of a stream connection between two hosts, made by a dial. It behaves as a
// TCP connection would over the links between them (see the package documentation for the
// exact rules); its deadlines follow the clock of the goroutine that waits, so inside a
// testing/synctest bubble they fire in virtual time.
type Conn struct {
	n      *Network
	id     uint64 // order of creation; the dialer's end is even, the acceptor's odd
	local  *net.TCPAddr
	remote *net.TCPAddr
	lh, rh *Host // local and remote host
	in     *pipe // bytes to this end
	out    *pipe // bytes from this end
	peer   *Conn

	// The fields below are guarded by n.mu.

	owner  *Transport // the Transport that closes this end at Shutdown, or nil
	closed bool       // by Close, a crash of lh, or the abort of a pending connection
	rdl    time.Time  // read deadline; zero = none
	wdl    time.Time  // write deadline; zero = none
}

var _ net.Conn = (*Conn)(nil)

// pipe is one direction of a connection: the bytes written at one end and not yet read at the
// other. Its fields are guarded by the network's mu.
type pipe struct {
	from, to *Host
	segs     []segment // in the order written; arrival times never decrease
	queued   int       // bytes in segs: the writer blocks while it is Config.Window
	last     time.Time // arrival time of the last segment (or of fin): none arrives earlier
	fin      bool      // the writer closed; the reader gets EOF at finAt, after every segment
	finAt    time.Time
	reset    bool // the writer's end was aborted: the reader gets ECONNRESET at resetAt
	resetAt  time.Time
	discard  bool // the reader's end is gone: what is written vanishes
	// wake is closed, and replaced, when anything above changes while someone waits on it.
	wake    chan struct{}
	waiting bool
}

// segment is the bytes of one Write (or of several, written at one instant), arriving at at.
type segment struct {
	at time.Time
	b  []byte
}

func newPipe(from, to *Host) *pipe {
	return &pipe{from: from, to: to, wake: make(chan struct{})}
}

// waitChLocked returns the channel that the next change of p closes.
func (p *pipe) waitChLocked() <-chan struct{} {
	p.waiting = true
	return p.wake
}

// signalLocked wakes whoever waits on p.
func (p *pipe) signalLocked() {
	if p.waiting {
		close(p.wake)
		p.wake = make(chan struct{})
		p.waiting = false
	}
}

// newConnLocked makes the two ends of a connection from a (an ephemeral port) to b:port and
// registers them on their hosts.
func (n *Network) newConnLocked(a, b *Host, port int) (dialer, acceptor *Conn) {
	lport := a.nextEphemeralLocked()
	for a.listeners[lport] != nil {
		lport = a.nextEphemeralLocked()
	}
	ab, ba := newPipe(a, b), newPipe(b, a)
	aAddr := &net.TCPAddr{IP: a.ip.AsSlice(), Port: lport}
	bAddr := &net.TCPAddr{IP: b.ip.AsSlice(), Port: port}
	dialer = &Conn{n: n, id: n.nextID, local: aAddr, remote: bAddr, lh: a, rh: b, in: ba, out: ab}
	acceptor = &Conn{n: n, id: n.nextID + 1, local: bAddr, remote: aAddr, lh: b, rh: a, in: ab, out: ba}
	n.nextID += 2
	dialer.peer, acceptor.peer = acceptor, dialer
	a.conns[dialer] = struct{}{}
	b.conns[acceptor] = struct{}{}
	n.stats.Conns++
	return dialer, acceptor
}

// Read reads what has arrived, up to len(b) bytes, waiting for something to arrive. It returns
// io.EOF after the far end closed and every byte it wrote was read; an error wrapping
// ECONNRESET once the far end's reset has arrived (bytes not yet read are lost); a timeout
// (wrapping os.ErrDeadlineExceeded) once the read deadline has passed, even if bytes have
// arrived; and net.ErrClosed after Close.
func (c *Conn) Read(b []byte) (int, error) {
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	p := c.in
	for {
		if c.closed {
			return 0, c.opErr("read", net.ErrClosed)
		}
		if len(b) == 0 {
			return 0, nil
		}
		now := time.Now()
		// As net.Conn's: once the deadline has passed, Read fails without reading.
		if !c.rdl.IsZero() && !now.Before(c.rdl) {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		flows := n.flowsLocked(p.from, p.to)
		var next time.Time // when the next thing arrives, once flowing
		switch {
		case p.reset:
			if flows && !now.Before(p.resetAt) {
				return 0, c.opErr("read", errReset)
			}
			next = p.resetAt
		case len(p.segs) > 0:
			if flows && !now.Before(p.segs[0].at) {
				return p.readLocked(b, now), nil
			}
			next = p.segs[0].at
		case p.fin:
			if flows && !now.Before(p.finAt) {
				return 0, io.EOF
			}
			next = p.finAt
		}
		if !flows {
			next = time.Time{} // the network's change wakes us, not the clock
		}
		n.waitLocked(p.waitChLocked(), earliest(next, c.rdl), nil)
	}
}

// readLocked copies into b the bytes of the segments that have arrived by now.
func (p *pipe) readLocked(b []byte, now time.Time) int {
	read := 0
	for len(p.segs) > 0 && read < len(b) && !now.Before(p.segs[0].at) {
		s := &p.segs[0]
		k := copy(b[read:], s.b)
		read += k
		s.b = s.b[k:]
		if len(s.b) == 0 {
			p.segs[0] = segment{}
			p.segs = p.segs[1:]
		}
	}
	p.queued -= read
	if len(p.segs) == 0 {
		p.segs = nil // let the backing array go
	}
	p.signalLocked() // a writer may wait for room
	return read
}

// Write writes b, waiting while Config.Window bytes are unread. It returns an error wrapping
// ECONNRESET once the far end's reset has arrived, a timeout at the write deadline (with the
// count of bytes written before it), and net.ErrClosed after Close. Bytes written after the
// far end closed vanish, as they do when its kernel answers them with a reset that nobody
// reads.
func (c *Conn) Write(b []byte) (int, error) {
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	written := 0
	for {
		if c.closed {
			return written, c.opErr("write", net.ErrClosed)
		}
		now := time.Now()
		if !c.wdl.IsZero() && !now.Before(c.wdl) {
			return written, c.opErr("write", os.ErrDeadlineExceeded)
		}
		if c.in.reset && n.flowsLocked(c.rh, c.lh) && !now.Before(c.in.resetAt) {
			return written, c.opErr("write", errReset)
		}
		if len(b) == 0 {
			return written, nil
		}
		p := c.out
		if p.discard {
			n.stats.StreamBytes += int64(len(b))
			return written + len(b), nil
		}
		if room := n.cfg.Window - p.queued; room > 0 {
			k := min(room, len(b))
			n.pushLocked(p, b[:k], now)
			b = b[k:]
			written += k
			continue
		}
		n.waitLocked(p.waitChLocked(), c.wdl, nil)
	}
}

// pushLocked queues a copy of b on p, arriving after the link's delay (and a retransmission
// timeout when the segment is lost), never before what was written earlier.
func (n *Network) pushLocked(p *pipe, b []byte, now time.Time) {
	l := n.linkLocked(p.from, p.to)
	at := now.Add(n.delayLocked(p.from, p.to, l))
	if n.lostLocked(p.from, p.to, l) {
		at = at.Add(segmentRetransmit)
	}
	if at.Before(p.last) {
		at = p.last
	}
	p.last = at
	if k := len(p.segs); k > 0 && p.segs[k-1].at.Equal(at) {
		p.segs[k-1].b = append(p.segs[k-1].b, b...)
	} else {
		p.segs = append(p.segs, segment{at: at, b: append([]byte(nil), b...)})
	}
	p.queued += len(b)
	n.stats.StreamBytes += int64(len(b))
	p.signalLocked()
}

// Close closes this end: its blocked calls return net.ErrClosed, the far end reads what was
// written before and then io.EOF, and what the far end writes from now on vanishes. Closing
// twice returns an error wrapping net.ErrClosed.
func (c *Conn) Close() error {
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.closed {
		return c.opErr("close", net.ErrClosed)
	}
	c.closeLocked()
	return nil
}

func (c *Conn) closeLocked() {
	n := c.n
	now := time.Now()
	c.closed = true
	o := c.out
	if !o.fin && !o.reset {
		o.fin = true
		l := n.linkLocked(o.from, o.to)
		o.finAt = now.Add(n.delayLocked(o.from, o.to, l))
		if o.finAt.Before(o.last) {
			o.finAt = o.last
		}
		o.last = o.finAt
	}
	o.signalLocked()
	c.dropInLocked()
	c.unregisterLocked()
	n.traceLocked(Event{Time: now, Kind: EventClose, From: c.local.String(), To: c.remote.String()})
}

// dropInLocked discards what is on its way to this end, and whatever comes after.
func (c *Conn) dropInLocked() {
	i := c.in
	i.discard = true
	i.segs = nil
	i.queued = 0
	i.signalLocked()
}

func (c *Conn) unregisterLocked() {
	delete(c.lh.conns, c)
	if c.owner != nil {
		delete(c.owner.conns, c)
	}
}

// abortLocked closes this end without a FIN and resets the far end, as a process crash or a
// closed listener does: the far end's reads and writes fail with ECONNRESET once the reset has
// crossed the link (it needs the link to flow), and what is in flight either way is lost.
func (c *Conn) abortLocked() {
	if c.closed {
		return
	}
	n := c.n
	now := time.Now()
	c.closed = true
	c.dropInLocked()
	c.unregisterLocked()
	o := c.out // the far end's in
	if !c.peer.closed {
		l := n.linkLocked(o.from, o.to)
		o.reset = true
		o.resetAt = now.Add(n.delayLocked(o.from, o.to, l))
		o.segs = nil
		o.queued = 0
		n.stats.Resets++
		n.traceLocked(Event{Time: now, Kind: EventReset, From: c.local.String(), To: c.remote.String()})
	}
	o.signalLocked()
}

// LocalAddr returns this end's address, a *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the far end's address, a *net.TCPAddr.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	return c.setDeadline(t, true, true)
}

// SetReadDeadline sets the instant after which Read fails with a timeout (zero = never); it
// applies to a Read already waiting.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(t, true, false)
}

// SetWriteDeadline sets the instant after which Write fails with a timeout (zero = never); it
// applies to a Write already waiting.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(t, false, true)
}

func (c *Conn) setDeadline(t time.Time, read, write bool) error {
	n := c.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.closed {
		return c.opErr("set deadline", net.ErrClosed)
	}
	if read {
		c.rdl = t
		c.in.signalLocked()
	}
	if write {
		c.wdl = t
		c.out.signalLocked()
	}
	return nil
}

// waitLocked releases n.mu and waits until wake is closed, the network's shape changes, until
// passes (zero = no such instant) or done is closed (nil = never); then it takes n.mu again.
// Every one of these is a channel or a timer made in the caller's bubble, so inside
// testing/synctest the wait blocks durably and virtual time moves on.
func (n *Network) waitLocked(wake <-chan struct{}, until time.Time, done <-chan struct{}) {
	changed := n.changed
	var timeout <-chan time.Time
	if !until.IsZero() {
		d := time.Until(until)
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	n.mu.Unlock()
	select {
	case <-wake:
	case <-changed:
	case <-timeout:
	case <-done:
	}
	n.mu.Lock()
}

// earliest returns the earlier of two instants, zero meaning "none".
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.Before(a):
		return b
	}
	return a
}
