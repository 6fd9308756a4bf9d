//go:build linux

package resp

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corralcache/corral/cmd/corral/internal/sockfd"
)

// An event loop serves the connections that are only reading hits, as redis-server serves
// every connection: one goroutine waits on an epoll instance of its own for any of its
// connections to have bytes, reads them, answers every GET whose value this node holds
// fresh as the key's owner or as a near copy (Group.GetIfHeld), and writes the replies, all without a
// goroutine of the connection's own being woken through the netpoller — which is where a
// goroutine per connection spends its time under redis-benchmark (the kernel's read, write
// and futex wakeups, 60 % of its profile at -P16).
//
// Anything else — another command, a GET that would fill or ask a peer, a command not yet
// whole, a reply the client does not read fast enough, a connection idle past
// --resp-idle-timeout — hands the connection to a goroutine of its own (conn.serve), with
// the bytes not yet answered, which serves it exactly as a connection that never was on a
// loop, with every bound and reply of its own. The loop answers only what the goroutine would
// have answered the same way, so a client cannot tell the two apart. The goroutine gives the
// connection back when it would wait for the client again after handBackAfter such GETs in a
// row, so a connection that writes keeps its goroutine and one that reads comes back.
//
// A connection on a loop is a bare file descriptor the loop owns; on its goroutine, a
// net.Conn made from a duplicate of it. Only one of the two reads it at a time, since the
// loop stops watching a connection before it hands it over and starts again only once the
// goroutine has closed its duplicate.

// Scratch sizes of a loop: one read takes a pipeline of GETs whole (64 KiB is 1500 GETs of
// 40-byte keys), and the replies are written at once.
const (
	loopReadBytes  = 64 << 10
	loopWriteBytes = 64 << 10 // replies that add up to this are written before more are made
	loopOutKeep    = 1 << 20  // a reply scratch grown past this is dropped after use
)

type eventLoop struct {
	s  *Server
	ep *sockfd.Poller // woken when a connection was given, or the loop is to stop

	mu       sync.Mutex // guards given, stopping, broken and closed, and pokes wake
	given    []*conn
	stopping bool
	broken   bool // its epoll instance failed: its connections are served on goroutines
	closed   bool // ep is closed: the loop has ended

	failNext atomic.Bool // a test's: the loop's next wake is a failed epoll_wait

	// The loop goroutine's own.
	conns     map[int32]*conn // by file descriptor
	events    []unix.EpollEvent
	in, out   []byte
	args      [][]byte
	now       int64 // Unix nanoseconds at the loop's last wake
	nextSweep int64 // when the loop next looks for idle connections
}

// startLoops starts n event loops for s, which wait for them (s.wg); none when n is 0 or the
// system refuses one (said in the log: the connections are served on goroutines then).
func startLoops(s *Server, n int) []*eventLoop {
	var loops []*eventLoop
	for range n {
		l, err := newLoop(s)
		if err != nil {
			s.cfg.Log.Warn("Redis protocol: no event loop; every connection is served on a goroutine of its own", "err", err)
			for _, l := range loops {
				l.stop()
			}
			return nil
		}
		loops = append(loops, l)
		s.wg.Add(1)
		go l.run()
	}
	return loops
}

func newLoop(s *Server) (*eventLoop, error) {
	ep, err := sockfd.NewPoller()
	if err != nil {
		return nil, err
	}
	return &eventLoop{s: s, ep: ep, conns: map[int32]*conn{},
		events: make([]unix.EpollEvent, 256), in: make([]byte, loopReadBytes), args: make([][]byte, 0, 3)}, nil
}

// give hands c, whose fd the loop is to own, to the loop, or to a goroutine of its own for
// good if the loop is broken. It reports false when the loop is stopping, or c could not be
// served: c is the caller's still, to end.
func (l *eventLoop) give(c *conn) bool {
	l.mu.Lock()
	stopping, broken := l.stopping, l.broken
	if !stopping {
		l.given = append(l.given, c)
		l.poke()
	}
	l.mu.Unlock()
	switch {
	case broken:
		return l.leave(c)
	case stopping:
		return false
	}
	return true
}

// leave serves c, which the loop does not watch, on a goroutine of its own from now on: the
// loop is broken. It reports false when it cannot (c is the caller's, to end).
func (l *eventLoop) leave(c *conn) bool {
	nc, err := sockfd.Conn(c.fd)
	if err != nil {
		l.s.cfg.Log.Warn("Redis protocol: could not hand a connection to a goroutine; it is closed", "err", err, "client", c.remote)
		return false
	}
	c.loop = nil // never handed back
	l.s.cfg.Metrics.toConn.Inc()
	c.goServe(nc)
	return true
}

// stop makes the loop close its connections and end.
func (l *eventLoop) stop() {
	l.mu.Lock()
	l.stopping = true
	l.poke()
	l.mu.Unlock()
}

// poke wakes the loop, if it has not ended; l.mu is held.
func (l *eventLoop) poke() {
	if !l.closed {
		l.ep.Wake()
	}
}

func (l *eventLoop) run() {
	defer l.s.wg.Done()
	defer func() {
		l.mu.Lock()
		l.closed = true
		l.ep.Close()
		l.mu.Unlock()
	}()
	for {
		timeout := -1
		if len(l.conns) > 0 {
			timeout = int(max((l.nextSweep-time.Now().UnixNano())/int64(time.Millisecond), 1))
		}
		n, err := l.ep.Wait(l.events, timeout)
		if l.failNext.Load() {
			n, err = 0, unix.EBADF
		}
		if err != nil && err != unix.EINTR {
			// Only a broken epoll instance fails so: its connections, and those given to it
			// from now on, are served on goroutines of their own.
			l.s.cfg.Log.Error("Redis protocol: event loop failed; its connections are served on goroutines", "err", err)
			l.abandon()
			return
		}
		l.now = time.Now().UnixNano()
		for _, ev := range l.events[:max(n, 0)] {
			if l.ep.Woken(ev) {
				if l.takeGiven() {
					l.closeAll()
					return
				}
				continue
			}
			if c := l.conns[ev.Fd]; c != nil {
				l.serveReady(c)
			}
		}
		if len(l.conns) > 0 && l.now >= l.nextSweep {
			l.sweep()
		}
	}
}

// takeGiven watches the connections given to the loop, and reports whether it is to stop
// (and then closes them instead).
func (l *eventLoop) takeGiven() (stopping bool) {
	l.ep.Drain()
	l.mu.Lock()
	given, stopping := l.given, l.stopping
	l.given = nil
	l.mu.Unlock()
	for _, c := range given {
		if stopping {
			c.end()
			continue
		}
		l.watch(c)
	}
	return stopping
}

// abandon gives every connection of the broken loop to a goroutine of its own, and
// marks it broken so that those given to it later go to theirs (give). When the server
// is stopping, they end instead.
func (l *eventLoop) abandon() {
	l.mu.Lock()
	given, stopping := l.given, l.stopping
	l.given, l.stopping, l.broken = nil, true, !stopping
	l.mu.Unlock()
	for _, c := range given {
		if stopping || !l.leave(c) {
			c.end()
		}
	}
	for _, c := range l.conns {
		l.unwatch(c)
		if stopping || !l.leave(c) {
			c.end()
		}
	}
}

// watch starts reading c on the loop.
func (l *eventLoop) watch(c *conn) {
	c.lastActive = l.now
	if err := l.ep.Add(c.fd); err != nil {
		l.s.cfg.Log.Warn("Redis protocol: epoll_ctl failed; the connection is closed", "err", err, "client", c.remote)
		c.end()
		return
	}
	if len(l.conns) == 0 {
		l.nextSweep = c.lastActive + int64(l.sweepEvery())
	}
	l.conns[int32(c.fd)] = c
}

// unwatch stops reading c on the loop: c is the caller's from here.
func (l *eventLoop) unwatch(c *conn) {
	l.ep.Del(c.fd)
	delete(l.conns, int32(c.fd))
}

func (l *eventLoop) closeAll() {
	for _, c := range l.conns {
		l.unwatch(c)
		c.end()
	}
}

// sweepEvery is how often the loop looks for connections idle past --resp-idle-timeout: a
// tenth of it, within [1 ms, 1 s].
func (l *eventLoop) sweepEvery() time.Duration {
	return min(max(l.s.cfg.Limits.IdleTimeout/10, time.Millisecond), time.Second)
}

// sweep hands every connection idle past --resp-idle-timeout to its goroutine, which tells
// the client and closes it as it closes any idle connection.
func (l *eventLoop) sweep() {
	l.nextSweep = l.now + int64(l.sweepEvery())
	idle := int64(l.s.cfg.Limits.IdleTimeout)
	for _, c := range l.conns {
		if l.now-c.lastActive >= idle {
			c.idleExpired = true
			l.handOff(c, nil, nil)
		}
	}
}

// serveReady reads what c's client sent, answers the GETs it can at once and hands c to its
// goroutine at the first command it cannot.
func (l *eventLoop) serveReady(c *conn) {
	defer func() {
		if p := recover(); p != nil {
			c.panicked(p)
			unix.Write(c.fd, []byte("-ERR internal error\r\n"))
			l.unwatch(c)
			c.end()
		}
	}()
	n, err := sockfd.Read(c.fd, l.in)
	switch {
	case err == unix.EAGAIN:
		return
	case err != nil || n == 0: // the client left (or reset the connection)
		l.unwatch(c)
		c.end()
		return
	}
	c.lastActive = l.now
	data, done := l.in[:n], 0
	for {
		// Answer what can be answered here, until the replies reach loopWriteBytes: they go
		// as they add up, as the goroutine's writer sends them, so a read of many GETs of
		// large values never holds all their replies at once.
		out, stuck, answered := l.out[:0], false, 0
		for done < len(data) && len(out) < loopWriteBytes {
			args, used := parseCommand(data[done:], l.args[:0])
			var ok bool
			if used > 0 {
				out, ok = l.s.answerAtOnce(c, args, out)
			}
			if !ok {
				stuck = true // not whole, or not a GET held here: the goroutine's
				break
			}
			done += used
			answered++
		}
		if answered > 0 {
			l.s.cfg.Metrics.loopGets.Add(float64(answered))
		}
		l.out = out[:0]
		if cap(out) > loopOutKeep {
			l.out = nil
		}
		written, err := sockfd.Write(c.fd, out)
		switch {
		case err != nil && err != unix.EAGAIN:
			l.unwatch(c)
			c.end()
			return
		case written < len(out) || stuck:
			l.handOff(c, data[done:], out[written:])
			return
		case done == len(data):
			return
		}
	}
}

// handOff gives c to a goroutine of its own, which serves rest, the bytes the loop did not
// answer, as the first the client sent, after it has written pending, the replies the client
// has yet to read.
func (l *eventLoop) handOff(c *conn, rest, pending []byte) {
	l.unwatch(c)
	nc, err := sockfd.Conn(c.fd)
	if err != nil {
		l.s.cfg.Log.Warn("Redis protocol: could not hand a connection to a goroutine; it is closed", "err", err, "client", c.remote)
		c.end()
		return
	}
	c.mu.Lock()
	c.early = append(c.early[:0], rest...)
	c.mu.Unlock()
	c.pending = append(c.pending[:0], pending...)
	l.s.cfg.Metrics.toConn.Inc()
	c.goServe(nc)
}
